//! A timing hook for the browser tests: how long the wasm validator takes on a config, so
//! the cost of live validation is measured where it runs. The config page puts it on the
//! window as `berthValidateTiming(text, iterations)`, so it is code of that page (its wasm
//! chunk), with the page's own parser and validator.

use std::hint::black_box;

use wasm_bindgen::prelude::*;

use super::editor::on_demand::parts;
use crate::config::validate;

/// Whether this wasm is an optimized build (timings of a debug build say little).
#[wasm_bindgen(js_name = berthOptimized)]
pub fn optimized() -> bool {
    !cfg!(debug_assertions)
}

/// Sets `window.berthValidateTiming`: a promise of [`time_validation`]'s figures (once per
/// page load, however often the config page is shown).
pub fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(set_hook);
}

fn set_hook() {
    let hook = Closure::<dyn Fn(String, u32) -> js_sys::Promise>::new(|text: String, iterations: u32| {
        wasm_bindgen_futures::future_to_promise(async move {
            let figures = time_validation(text, iterations).await.map_err(|e| JsValue::from_str(&e))?;
            Ok(js_sys::Float64Array::from(figures.as_slice()).into())
        })
    });
    let _ = js_sys::Reflect::set(&web_sys::window().expect("a window").into(), &"berthValidateTiming".into(), hook.as_ref());
    hook.forget();
}

/// Mean milliseconds of `[validate, parse + validate]` over `iterations` runs on `text`,
/// then the number of problems found. Parsing is the editor's own reader, from its on-demand
/// chunk, as in the YAML tab.
async fn time_validation(text: String, iterations: u32) -> Result<Vec<f64>, String> {
    let clock = web_sys::window().and_then(|w| w.performance()).ok_or("no performance clock")?;
    let read = parts().await.read_text;
    let cfg = read(&text).map_err(|p| format!("the config does not parse: {} problem(s)", p.len()))?;
    let n = iterations.max(1);
    let start = clock.now();
    let mut problems = 0;
    for _ in 0..n {
        problems = black_box(validate(black_box(&cfg))).problems.len();
    }
    let validate_ms = (clock.now() - start) / f64::from(n);
    let start = clock.now();
    for _ in 0..n {
        let parsed = black_box(read(black_box(&text)));
        if let Ok(c) = parsed {
            black_box(validate(&c));
        }
    }
    let both_ms = (clock.now() - start) / f64::from(n);
    Ok(vec![validate_ms, both_ms, problems as f64])
}
