//! `/history`: usage against quota over time, per queue, flavor and resource, over the last
//! hour, day, week or a custom range; or, for one flavor and resource, every queue's usage
//! stacked. The server downsamples, so a week stays a few hundred points per series.

use leptos::prelude::*;
use leptos_router::components::Form;
use leptos_router::hooks::use_query_map;

use super::chart::Chart;
use super::jobs_list::options;
use super::live::{use_live, LiveBadge};
use super::server_fns::{list_queues, usage_chart};
use super::widgets::{duration, Loading};

const RANGES: [(&str, &str); 4] = [("1h", "last hour"), ("24h", "last day"), ("7d", "last week"), ("custom", "custom…")];

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
    let chart = Resource::new(move || (live.tick.get(), api_query(), stacked()), |(_, q, s)| usage_chart(q, s));
    let data = Signal::derive(move || chart.get().and_then(Result::ok));
    let queues = Resource::new(|| (), |_| list_queues());
    view! {
        <header class="page-head">
            <h1>"Resource history"</h1>
            <div class="head-actions"><LiveBadge/></div>
        </header>
        <section class="card">
            <Form method="GET" action="/history" attr:class="filters" attr:data-testid="history-filters">
                <div class="field">
                    <label for="h-range">"Range"</label>
                    <select id="h-range" name="range">{move || options(&RANGES, &range())}</select>
                </div>
                <Show when=move || range() == "custom">
                    <div class="field"><label for="h-since">"From (UTC)"</label><input id="h-since" name="since" type="datetime-local" prop:value=move || value("since")/></div>
                    <div class="field"><label for="h-until">"To (UTC)"</label><input id="h-until" name="until" type="datetime-local" prop:value=move || value("until")/></div>
                </Show>
                <Transition fallback=|| view! { <div class="field"><label for="h-queue">"Queue"</label><select id="h-queue" disabled><option>"all"</option></select></div> }>
                    {move || queues.get().map(|r| {
                        let qs = r.unwrap_or_default();
                        let mut queue_choices = vec![(String::new(), "all".to_string())];
                        queue_choices.extend(qs.iter().map(|q| (q.name.clone(), q.name.clone())));
                        let mut flavors: Vec<String> = qs.iter().flat_map(|q| q.usage.iter().map(|u| u.flavor.clone())).collect();
                        flavors.sort();
                        flavors.dedup();
                        let mut resources: Vec<String> = qs.iter().flat_map(|q| q.usage.iter().map(|u| u.resource.clone())).collect();
                        resources.sort();
                        resources.dedup();
                        let with_all = |items: Vec<String>| std::iter::once((String::new(), "all".to_string())).chain(items.into_iter().map(|i| (i.clone(), i))).collect::<Vec<_>>();
                        view! {
                            <div class="field"><label for="h-queue">"Queue"</label><select id="h-queue" name="queue">{options(&queue_choices, &value("queue"))}</select></div>
                            <div class="field"><label for="h-flavor">"Flavor"</label><select id="h-flavor" name="flavor">{options(&with_all(flavors), &value("flavor"))}</select></div>
                            <div class="field"><label for="h-resource">"Resource"</label><select id="h-resource" name="resource">{options(&with_all(resources), &value("resource"))}</select></div>
                        }
                    })}
                </Transition>
                <div class="field">
                    <label for="h-view">"Show"</label>
                    <select id="h-view" name="view">{move || options(&[("", "usage vs quota"), ("stacked", "stacked per queue")], &value("view"))}</select>
                </div>
                <div class="filter-actions"><button type="submit" class="button primary">"Show"</button></div>
            </Form>
        </section>
        <section class="card">
            <Transition fallback=Loading>
                {move || chart.get().map(|r| match r {
                    Ok(d) => view! { <p class="hint" data-testid="chart-caption">{format!("{} points, one per {} per series (peak use in each step). Dashed lines are quotas; hover for values.", d.points, duration(d.step_s))}</p> }.into_any(),
                    Err(e) => view! { <p class="error-box" role="alert">{e.to_string()}</p> }.into_any(),
                })}
            </Transition>
            <Show when=stacked>
                <p class="hint">"Stacked: each queue's use of the chosen flavor and resource, summed. Pick one flavor and one resource for a meaningful stack."</p>
            </Show>
            <Chart data label="Resource usage over time".to_string() testid="history-chart"/>
        </section>
    }
}
