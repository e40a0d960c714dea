//! Charts drawn by ECharts (served by the app, loaded by the first chart a page shows: see
//! `scripts`) from options the server built with charming: a titled box per chart with its
//! legend (a wrapping list of buttons that show and hide series), the series it left out, a
//! caption, and words instead of empty axes. [`ChartClock`] keeps their time axes following
//! the clock.

use leptos::html::Div;
use leptos::prelude::*;

use crate::api::ChartData;

/// Every chart of `charts` (one per resource, …), each with `testid` and its title.
#[component]
pub fn Charts(#[prop(into)] charts: Signal<Option<Vec<ChartData>>>, label: String, testid: &'static str) -> impl IntoView {
    // The list is drawn once the page is live: the server renders before the data is
    // there, so a list rendered there would not match the browser's (a hydration error).
    let live = RwSignal::new(false);
    Effect::new(move |_| live.set(true));
    let titles = Memo::new(move |_| {
        let titles = charts.with(|c| c.as_ref().map(|c| c.iter().map(|d| d.title.clone()).collect::<Vec<_>>()).unwrap_or_default());
        if live.get() { titles } else { Vec::new() }
    });
    view! {
        <div class="chart-list">
            <For each=move || titles.get() key=|t| t.clone() let:title>
                {
                    let t = title.clone();
                    let data = Signal::derive(move || charts.with(|c| c.as_ref().and_then(|c| c.iter().find(|d| d.title == t).cloned())));
                    view! { <Chart data label=format!("{label}: {title}") testid/> }
                }
            </For>
        </div>
    }
}

/// One chart: draws `data` once it is loaded and redraws when it changes (new data replaces
/// the old option, so series that went away disappear; series switched off stay off).
#[component]
pub fn Chart(#[prop(into)] data: Signal<Option<ChartData>>, label: String, #[prop(optional)] testid: &'static str) -> impl IntoView {
    let el = NodeRef::<Div>::new();
    // Nothing of the data before the page is live: the server renders before it is there,
    // and what it renders must be what the browser hydrates.
    let live = RwSignal::new(false);
    Effect::new(move |_| live.set(true));
    let data = Signal::derive(move || if live.get() { data.get() } else { None });
    // Series switched off in the legend, by name.
    let off = RwSignal::new(Vec::<String>::new());
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        if let (Some(el), Some(d)) = (el.get(), data.get()) {
            let off = off.get_untracked();
            leptos::task::spawn_local(async move {
                if super::scripts::load(super::scripts::Script::ECharts).await {
                    browser::draw(&el, &d.option, &off);
                }
            });
        }
    });
    let field = move |f: fn(&ChartData) -> String| move || data.with(|d| d.as_ref().map(f).unwrap_or_default());
    let empty = move || data.with(|d| d.as_ref().is_some_and(|d| d.points == 0));
    let hidden = move || data.with(|d| d.as_ref().map(|d| d.hidden.clone()).unwrap_or_default());
    // An empty chart's note says it all: no legend, no caption.
    let legend = move || data.with(|d| d.as_ref().filter(|d| d.points > 0).map(|d| d.legend.clone()).unwrap_or_default());
    let toggle = move |name: String| {
        off.update(|o| if let Some(i) = o.iter().position(|n| *n == name) { o.remove(i); } else { o.push(name.clone()); });
        #[cfg(feature = "hydrate")]
        if let Some(el) = el.get_untracked() {
            browser::toggle(&el, &name);
        }
    };
    view! {
        <figure class="chart-box" data-testid=format!("{testid}-box") data-title=field(|d| d.title.clone())>
            <figcaption class="chart-title">{field(|d| d.title.clone())}</figcaption>
            <div class="chart" class:is-empty=empty node_ref=el role="img" aria-label=label data-testid=testid
                data-title=field(|d| d.title.clone())
                data-points=move || data.with(|d| d.as_ref().map(|d| d.points).unwrap_or(0))></div>
            <Show when=empty>
                <p class="chart-empty" data-testid="chart-empty">{field(|d| if d.empty.is_empty() { "Nothing to draw in this range.".into() } else { d.empty.clone() })}</p>
            </Show>
            <ul class="chart-legend" data-testid="chart-legend">
                {move || legend().into_iter().map(|e| {
                    let name = e.name.clone();
                    let n2 = name.clone();
                    let style = format!("border-top-color: {}; border-top-style: {}", e.colour, e.line);
                    view! {
                        <li><button type="button" class="legend-item" aria-pressed=move || (!off.with(|o| o.contains(&n2))).to_string()
                            title="Show or hide this series" on:click=move |_| toggle(name.clone())>
                            <span class="legend-swatch" style=style aria-hidden="true"></span>{e.name.clone()}
                        </button></li>
                    }
                }).collect_view()}
            </ul>
            <Show when=move || !hidden().is_empty()>
                <p class="hint" data-testid="chart-hidden">{move || format!("Not drawn, nothing in use over the range: {}.", hidden().join(", "))}</p>
            </Show>
            <Show when=move || data.with(|d| d.as_ref().is_some_and(|d| d.points > 0 && !d.caption.is_empty()))>
                <p class="hint" data-testid="chart-caption">{field(|d| d.caption.clone())}</p>
            </Show>
        </figure>
    }
}

/// A counter the chart pages add to their data's key, so a chart over "the last hour" moves
/// on with the clock even while nothing changes (the live stream only reports changes).
#[derive(Debug, Clone, Copy)]
pub struct ChartClock(RwSignal<u64>);

impl ChartClock {
    /// Starts ticking in the browser; stops with the page.
    pub fn new() -> ChartClock {
        let ticks = RwSignal::new(0u64);
        #[cfg(feature = "hydrate")]
        {
            // Ten seconds: the finest refresh a range asks for (see `key`).
            let handle = set_interval_with_handle(move || ticks.update(|t| *t += 1), std::time::Duration::from_secs(10));
            if let Ok(handle) = handle {
                on_cleanup(move || handle.clear());
            }
        }
        ChartClock(ticks)
    }

    /// Changes about every 1/300 of the range named by `since` (`1h`: every 10 s, `24h`:
    /// every minute, `7d`: every 5 minutes; a fixed range never).
    pub fn key(&self, since: &str) -> u64 {
        let every = match since {
            "1h" => 1,
            "24h" => 6,
            "7d" => 30,
            _ => return 0,
        };
        self.0.get() / every
    }
}

impl Default for ChartClock {
    fn default() -> Self {
        ChartClock::new()
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
        #[wasm_bindgen(method, js_name = dispatchAction)]
        fn dispatch_action(this: &ECharts, action: &JsValue);
        #[wasm_bindgen(method)]
        fn resize(this: &ECharts);
        #[wasm_bindgen(catch, js_namespace = JSON, js_name = parse)]
        fn json_parse(s: &str) -> Result<JsValue, JsValue>;
    }

    /// Sets the option, then switches off again the series in `off`.
    pub fn draw(el: &web_sys::HtmlDivElement, option: &str, off: &[String]) {
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
        for name in off {
            legend_action(&chart, "legendUnSelect", name);
        }
    }

    /// Shows or hides the series `name`.
    pub fn toggle(el: &web_sys::HtmlDivElement, name: &str) {
        if let Ok(Some(chart)) = instance(el.as_ref()) {
            legend_action(&chart, "legendToggleSelect", name);
        }
    }

    fn legend_action(chart: &ECharts, kind: &str, name: &str) {
        let action = serde_json::json!({ "type": kind, "name": name }).to_string();
        if let Ok(action) = json_parse(&action) {
            chart.dispatch_action(&action);
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
