//! `/history`: usage against quota over time, per queue, flavor and resource, over the last
//! hour, day, week or a custom range; or every queue's usage stacked with their quotas and
//! the capacity. One chart per resource, each in its unit. Every filter applies as it
//! changes and lives in the URL, so a reload or a shared link shows the same charts. The
//! server downsamples, so a week stays a few hundred points per series.

use leptos::prelude::*;
use leptos_router::hooks::{use_navigate, use_query_map};

use super::chart::{ChartClock, Charts};
use super::jobs_list::options;
use super::live::{use_live, LiveBadge};
use super::server_fns::{list_queues, usage_chart};
use super::widgets::duration;

const RANGES: [(&str, &str); 4] = [("1h", "last hour"), ("24h", "last day"), ("7d", "last week"), ("custom", "custom…")];

/// The page's URL parameters, in the order the URL lists them.
const KEYS: [&str; 7] = ["range", "since", "until", "queue", "flavor", "resource", "view"];

#[component]
pub fn HistoryPage() -> impl IntoView {
    let live = use_live();
    let query = use_query_map();
    let value = move |k: &str| query.read().get(k).unwrap_or_default();
    let range = move || Some(value("range")).filter(|r| !r.is_empty()).unwrap_or_else(|| "1h".into());
    let stacked = move || value("view") == "stacked";
    let api_query = move || {
        let mut parts = Vec::new();
        if range() == "custom" {
            for key in ["since", "until"] {
                let v = value(key);
                if !v.is_empty() {
                    // datetime-local has no zone: read it as UTC, said so at the field.
                    let v = if v.len() == 16 { format!("{v}:00Z") } else { v };
                    parts.push(format!("{key}={}", super::urlencode(&v)));
                }
            }
        } else {
            parts.push(format!("since={}", range()));
        }
        for key in ["queue", "flavor", "resource"] {
            let v = value(key);
            if !v.is_empty() {
                parts.push(format!("{key}={}", super::urlencode(&v)));
            }
        }
        parts.join("&")
    };
    let clock = ChartClock::new();
    let chart = Resource::new(move || (live.tick.get(), clock.key(&range()), api_query(), stacked()), |(_, _, q, s)| usage_chart(q, s));
    let data = Signal::derive(move || chart.get().and_then(Result::ok));
    let queues = Resource::new(|| (), |_| list_queues());
    // A changed filter replaces its URL parameter; the charts follow the URL.
    let go = go_to();
    let set = move |key: &'static str| {
        move |ev: leptos::ev::Event| go.set(Some(with_param("/history", &KEYS, &query.read_untracked(), key, &event_target_value(&ev))))
    };
    view! {
        <header class="page-head">
            <h1>"Resource history"</h1>
            <div class="head-actions"><LiveBadge/></div>
        </header>
        <section class="card">
            <form class="filters" data-testid="history-filters" on:submit=|ev| ev.prevent_default()>
                <div class="field">
                    <label for="h-range">"Range"</label>
                    <select id="h-range" name="range" on:change=set("range")>{move || options(&RANGES, &range())}</select>
                </div>
                <Show when=move || range() == "custom">
                    <div class="field"><label for="h-since">"From (UTC)"</label><input id="h-since" name="since" type="datetime-local" prop:value=move || value("since") on:change=set("since")/></div>
                    <div class="field"><label for="h-until">"To (UTC)"</label><input id="h-until" name="until" type="datetime-local" prop:value=move || value("until") on:change=set("until")/></div>
                </Show>
                <Filters queues value set/>
                <div class="field">
                    <label for="h-view">"Show"</label>
                    <select id="h-view" name="view" on:change=set("view")>{move || options(&[("", "usage vs quota"), ("stacked", "stacked per queue")], &value("view"))}</select>
                </div>
            </form>
        </section>
        <section class="card">
            <Transition fallback=|| ()>
                {move || chart.get().map(|r| match r {
                    Ok(d) => {
                        let step = d.first().map(|d| d.step_s).unwrap_or(0.0);
                        let what = if stacked() {
                            "Each queue's use stacked; the dashed line is the sum of their quotas, the dotted one the capacity of the nodes their flavors select now."
                        } else {
                            "Solid lines are use, dashed lines (a darker shade) their quotas."
                        };
                        view! { <p class="hint" data-testid="history-caption">{format!("One point per {} per series (peak use in each step). {what} Hover for values.", duration(step))}</p> }.into_any()
                    }
                    Err(e) => view! { <p class="error-box" role="alert">{e.to_string()}</p> }.into_any(),
                })}
            </Transition>
            <Charts charts=data label="Resource usage over time".to_string() testid="history-chart"/>
        </section>
    }
}

/// `path` with its filter `key` set to `value` and the page's other filters (`keys`) as
/// `query` has them: how a page whose filters live in its URL applies a change.
pub fn with_param(path: &str, keys: &[&str], query: &leptos_router::params::ParamsMap, key: &str, value: &str) -> String {
    let parts: Vec<String> = keys
        .iter()
        .map(|k| (*k, if *k == key { value.to_string() } else { query.get(k).unwrap_or_default() }))
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", super::urlencode(&v)))
        .collect();
    format!("{path}?{}", parts.join("&"))
}

/// A URL to go to: set it and the router navigates there (a signal, so the handlers that
/// set it stay `Copy`).
pub fn go_to() -> RwSignal<Option<String>> {
    let target = RwSignal::new(None::<String>);
    let navigate = use_navigate();
    Effect::new(move |_| {
        if let Some(url) = target.get() {
            navigate(&url, Default::default());
        }
    });
    target
}

/// The queue, flavor and resource pickers, from the queues of the active config.
#[component]
fn Filters<V, S, H>(queues: Resource<Result<Vec<crate::jobs::QueueView>, ServerFnError>>, value: V, set: S) -> impl IntoView
where
    V: Fn(&str) -> String + Copy + Send + Sync + 'static,
    S: Fn(&'static str) -> H + Copy + Send + Sync + 'static,
    H: FnMut(leptos::ev::Event) + 'static,
{
    view! {
        <Transition fallback=|| view! { <div class="field"><label for="h-queue">"Queue"</label><select id="h-queue" disabled><option>"all"</option></select></div> }>
            {
                move || queues.get().map(|r| {
                    let qs = r.unwrap_or_default();
                    let mut queue_choices = vec![(String::new(), "all".to_string())];
                    queue_choices.extend(qs.iter().map(|q| (q.name.clone(), q.name.clone())));
                    let distinct = |f: fn(&crate::jobs::QuotaUsage) -> String| {
                        let mut items: Vec<String> = qs.iter().flat_map(|q| q.usage.iter().map(f)).collect();
                        items.sort();
                        items.dedup();
                        std::iter::once((String::new(), "all".to_string())).chain(items.into_iter().map(|i| (i.clone(), i))).collect::<Vec<_>>()
                    };
                    let (flavors, resources) = (distinct(|u| u.flavor.clone()), distinct(|u| u.resource.clone()));
                    view! {
                        <div class="field"><label for="h-queue">"Queue"</label><select id="h-queue" name="queue" on:change=set("queue")>{options(&queue_choices, &value("queue"))}</select></div>
                        <div class="field"><label for="h-flavor">"Flavor"</label><select id="h-flavor" name="flavor" on:change=set("flavor")>{options(&flavors, &value("flavor"))}</select></div>
                        <div class="field"><label for="h-resource">"Resource"</label><select id="h-resource" name="resource" on:change=set("resource")>{options(&resources, &value("resource"))}</select></div>
                    }
                })
            }
        </Transition>
    }
}
