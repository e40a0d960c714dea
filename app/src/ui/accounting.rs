//! `/usage`: the accounting report (`GET /api/v1/usage`, `berth usage`) as a table: per
//! user, queue or label value, the jobs that ended in the range by final state, the CPU,
//! GPU and memory hours they used, how long they waited and how often they were restarted.
//! The grouping and the range live in the URL; the same report downloads as CSV.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use super::history::{go_to, with_param};
use super::jobs_list::options;
use super::server_fns::usage_report;
use super::widgets::{amount, duration, ErrorBox, Loading};
use crate::jobs::{UsageReport, UsageRow};

const RANGES: [(&str, &str); 4] = [("24h", "last day"), ("7d", "last week"), ("30d", "last 30 days"), ("custom", "custom…")];

/// The page's URL parameters, in the order the URL lists them.
const KEYS: [&str; 5] = ["by", "label", "range", "since", "until"];

/// Final states, as the table's columns name them.
const STATES: [(&str, &str); 5] = [("succeeded", "Succeeded"), ("failed", "Failed"), ("timed_out", "Timed out"), ("cancelled", "Cancelled"), ("rejected", "Rejected")];

#[component]
pub fn AccountingPage() -> impl IntoView {
    let query = use_query_map();
    let value = move |k: &str| query.read().get(k).unwrap_or_default();
    let by = move || match value("by").as_str() {
        "queue" => "queue".to_string(),
        "label" => "label".to_string(),
        _ => "user".to_string(),
    };
    let range = move || Some(value("range")).filter(|r| RANGES.iter().any(|(v, _)| v == r)).unwrap_or_else(|| "7d".into());
    let api_query = Memo::new(move |_| api_query(&by(), &value("label"), &range(), &value("since"), &value("until")));
    let report = Resource::new(move || api_query.get(), usage_report);
    let go = go_to();
    let set = move |key: &'static str| {
        move |ev: leptos::ev::Event| go.set(Some(with_param("/usage", &KEYS, &query.read_untracked(), key, &event_target_value(&ev))))
    };
    view! {
        <header class="page-head">
            <h1>"Accounting"</h1>
            <div class="head-actions">
                <a class="button" data-testid="usage-csv" download="berth-usage.csv" href=move || format!("/api/v1/usage?{}&format=csv", api_query.get())>"Download CSV"</a>
            </div>
        </header>
        <section class="card">
            <form class="filters" data-testid="usage-filters" on:submit=|ev| ev.prevent_default()>
                <div class="field">
                    <label for="u-by">"Group by"</label>
                    <select id="u-by" on:change=set("by")>{move || options(&[("user", "user"), ("queue", "queue"), ("label", "label…")], &by())}</select>
                </div>
                <Show when=move || by() == "label">
                    <div class="field"><label for="u-label">"Label key"</label><input id="u-label" placeholder="team" prop:value=move || value("label") on:change=set("label")/></div>
                </Show>
                <div class="field">
                    <label for="u-range">"Ended in the"</label>
                    <select id="u-range" on:change=set("range")>{move || options(&RANGES, &range())}</select>
                </div>
                <Show when=move || range() == "custom">
                    <div class="field"><label for="u-since">"From (UTC)"</label><input id="u-since" type="datetime-local" prop:value=move || value("since") on:change=set("since")/></div>
                    <div class="field"><label for="u-until">"To (UTC)"</label><input id="u-until" type="datetime-local" prop:value=move || value("until") on:change=set("until")/></div>
                </Show>
            </form>
        </section>
        <section class="card">
            <Transition fallback=Loading>
                {move || report.get().map(|r| match r {
                    Ok(report) => view! { <UsageTable report/> }.into_any(),
                    Err(e) => view! { <ErrorBox message=e.to_string()/> }.into_any(),
                })}
            </Transition>
        </section>
    }
}

/// `GET /api/v1/usage` parameters for the page's choices (a label grouping without a key
/// groups by user until one is typed).
fn api_query(by: &str, label: &str, range: &str, since: &str, until: &str) -> String {
    let by = match (by, label.trim()) {
        ("label", key) if !key.is_empty() => format!("label:{key}"),
        ("queue", _) => "queue".into(),
        _ => "user".into(),
    };
    let mut q = format!("by={}", super::urlencode(&by));
    if range == "custom" {
        for (key, v) in [("since", since), ("until", until)] {
            if !v.is_empty() {
                // datetime-local has no zone: read it as UTC, said so at the field.
                let v = if v.len() == 16 { format!("{v}:00Z") } else { v.to_string() };
                q.push_str(&format!("&{key}={}", super::urlencode(&v)));
            }
        }
    } else {
        q.push_str(&format!("&since={range}"));
    }
    q
}

#[component]
fn UsageTable(report: UsageReport) -> impl IntoView {
    let what = match report.by.strip_prefix("label:") {
        Some(key) => format!("Label {key}"),
        None if report.by == "queue" => "Queue".into(),
        None => "User".into(),
    };
    let span = format!("Jobs that ended from {} to {} (UTC).", report.since.format("%Y-%m-%d %H:%M"), report.until.format("%Y-%m-%d %H:%M"));
    if report.rows.is_empty() {
        return view! { <p class="hint" data-testid="usage-empty">{format!("{span} No job ended in this range.")}</p> }.into_any();
    }
    let rows = report.rows.into_iter().map(|r| view! { <UsageLine r/> }).collect_view();
    view! {
        <p class="hint" data-testid="usage-span">{span}" Hours are the request × run time; waits run from submission to admission."</p>
        <div class="table-wrap"><table class="usage-table" data-testid="usage-table">
            <thead><tr>
                <th scope="col">{what}</th>
                {STATES.iter().map(|(_, label)| view! { <th scope="col" class="num">{*label}</th> }).collect_view()}
                <th scope="col" class="num">"CPU h"</th><th scope="col" class="num">"GPU h"</th><th scope="col" class="num">"Memory GB·h"</th>
                <th scope="col" class="num">"Wait p50"</th><th scope="col" class="num">"Wait p95"</th><th scope="col" class="num">"Longest wait"</th>
                <th scope="col" class="num" title="Runs started again other than by a retry: preemptions, and requeues after a backend lost a run">"Restarts"</th>
            </tr></thead>
            <tbody>{rows}</tbody>
        </table></div>
    }
    .into_any()
}

#[component]
fn UsageLine(r: UsageRow) -> impl IntoView {
    let wait = |w: Option<f64>| w.map(duration).unwrap_or_else(|| "–".into());
    // Two decimals; a little use is said as such, not rounded to nothing.
    let hours = |h: f64| if h > 0.0 && h < 0.005 { "< 0.01".to_string() } else { amount((h * 100.0).round() / 100.0) };
    view! {
        <tr data-testid="usage-row" data-group=r.group.clone()>
            <th scope="row">{r.group.clone()}</th>
            {STATES.iter().map(|(state, label)| view! { <td class="num" data-label=*label>{r.jobs.get(*state).copied().unwrap_or(0)}</td> }).collect_view()}
            <td class="num" data-label="CPU h">{hours(r.cpu_hours)}</td>
            <td class="num" data-label="GPU h">{hours(r.gpu_hours)}</td>
            <td class="num" data-label="Memory GB·h">{hours(r.memory_gb_hours)}</td>
            <td class="num" data-label="Wait p50">{wait(r.wait_p50_s)}</td>
            <td class="num" data-label="Wait p95">{wait(r.wait_p95_s)}</td>
            <td class="num" data-label="Longest wait">{wait(r.wait_max_s)}</td>
            <td class="num" data-label="Restarts">{r.preemptions}</td>
        </tr>
    }
}

#[cfg(test)]
mod tests {
    use super::api_query;

    #[test]
    fn the_page_choices_become_the_api_parameters() {
        assert_eq!(api_query("user", "", "7d", "", ""), "by=user&since=7d");
        assert_eq!(api_query("label", "team", "24h", "", ""), "by=label%3Ateam&since=24h");
        assert_eq!(api_query("label", " ", "24h", "", ""), "by=user&since=24h");
        assert_eq!(api_query("queue", "", "custom", "2026-01-01T00:00", ""), "by=queue&since=2026-01-01T00%3A00%3A00Z");
    }
}
