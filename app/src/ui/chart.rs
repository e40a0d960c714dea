//! A chart drawn by ECharts (served by the app, loaded by the first chart a page shows: see
//! `scripts`) from an option the server built with charming.

use leptos::html::Div;
use leptos::prelude::*;

use crate::api::ChartData;

/// Draws `data` once it is loaded; redraws when it changes (new data replaces the old
/// option, so series that went away disappear). Shows a note instead of empty axes.
#[component]
pub fn Chart(#[prop(into)] data: Signal<Option<ChartData>>, label: String, #[prop(optional)] testid: &'static str) -> impl IntoView {
    let el = NodeRef::<Div>::new();
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        if let (Some(el), Some(d)) = (el.get(), data.get()) {
            leptos::task::spawn_local(async move {
                if super::scripts::load(super::scripts::Script::ECharts).await {
                    browser::draw(&el, &d.option);
                }
            });
        }
    });
    let empty = move || data.with(|d| d.as_ref().is_some_and(|d| d.points == 0));
    view! {
        <div class="chart-box">
            <div class="chart" node_ref=el role="img" aria-label=label data-testid=testid
                data-points=move || data.with(|d| d.as_ref().map(|d| d.points).unwrap_or(0))></div>
            <Show when=empty>
                <p class="chart-empty">"No samples in this range yet: usage is recorded while jobs hold quota."</p>
            </Show>
        </div>
    }
}

/// Tells every chart on the page to fit its container (on window resize).
#[cfg(feature = "hydrate")]
pub fn resize_all() {
    browser::resize_all();
}

#[cfg(feature = "hydrate")]
mod browser {
    use wasm_bindgen::prelude::*;
    use wasm_bindgen::JsCast;

    #[wasm_bindgen]
    extern "C" {
        type ECharts;
        #[wasm_bindgen(catch, js_namespace = echarts, js_name = getInstanceByDom)]
        fn instance(el: &web_sys::Element) -> Result<Option<ECharts>, JsValue>;
        #[wasm_bindgen(catch, js_namespace = echarts, js_name = init)]
        fn init(el: &web_sys::Element) -> Result<ECharts, JsValue>;
        #[wasm_bindgen(method, js_name = setOption)]
        fn set_option(this: &ECharts, option: &JsValue, not_merge: bool);
        #[wasm_bindgen(method)]
        fn resize(this: &ECharts);
        #[wasm_bindgen(catch, js_namespace = JSON, js_name = parse)]
        fn json_parse(s: &str) -> Result<JsValue, JsValue>;
    }

    pub fn draw(el: &web_sys::HtmlDivElement, option: &str) {
        let el: &web_sys::Element = el.as_ref();
        let chart = match instance(el) {
            Ok(Some(c)) => c,
            // ECharts missing (script blocked or not built): leave the box empty, don't crash.
            _ => match init(el) {
                Ok(c) => c,
                Err(_) => return,
            },
        };
        if let Ok(option) = json_parse(option) {
            chart.set_option(&option, true);
        }
    }

    pub fn resize_all() {
        let Some(doc) = web_sys::window().and_then(|w| w.document()) else { return };
        let Ok(list) = doc.query_selector_all(".chart") else { return };
        for i in 0..list.length() {
            if let Some(el) = list.item(i).and_then(|n| n.dyn_into::<web_sys::Element>().ok()) {
                if let Ok(Some(c)) = instance(&el) {
                    c.resize();
                }
            }
        }
    }
}
