//! A timing hook for the browser tests: how long the wasm validator takes on a config, so
//! the cost of live validation is measured where it runs (`berthValidateTiming` in the
//! page's wasm module).

use std::hint::black_box;

use wasm_bindgen::prelude::*;

use crate::config::{parse_auto, validate};

/// Mean milliseconds of `[validate, parse + validate]` over `iterations` runs on `text`,
/// then the number of problems found.
///
/// Exported functions stay in the wasm's shell; the work is a lazy function, so the
/// validator's code stays in the chunks of the pages that use it (the config pages).
#[wasm_bindgen(js_name = berthValidateTiming)]
pub async fn validate_timing(text: String, iterations: u32) -> Result<Vec<f64>, JsValue> {
    time_validation(text, iterations).await.map_err(|e| JsValue::from_str(&e))
}

#[leptos::lazy]
fn time_validation(text: String, iterations: u32) -> Result<Vec<f64>, String> {
    let clock = web_sys::window().and_then(|w| w.performance()).ok_or("no performance clock")?;
    let cfg = parse_auto(&text).map_err(|p| format!("the config does not parse: {} problem(s)", p.len()))?;
    let n = iterations.max(1);
    let start = clock.now();
    let mut problems = 0;
    for _ in 0..n {
        problems = black_box(validate(black_box(&cfg))).problems.len();
    }
    let validate_ms = (clock.now() - start) / f64::from(n);
    let start = clock.now();
    for _ in 0..n {
        let parsed = black_box(parse_auto(black_box(&text)));
        if let Ok(c) = parsed {
            black_box(validate(&c));
        }
    }
    let both_ms = (clock.now() - start) / f64::from(n);
    Ok(vec![validate_ms, both_ms, problems as f64])
}

/// Whether this wasm is an optimized build (timings of a debug build say little).
#[wasm_bindgen(js_name = berthOptimized)]
pub fn optimized() -> bool {
    !cfg!(debug_assertions)
}
