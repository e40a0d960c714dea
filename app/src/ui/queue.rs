//! `/queues/:name`: one queue. Usage against quota, the pending jobs in the order the engine
//! will admit them (position, priority, waiting time and why each waits), the running jobs,
//! and the queue's usage over time.

use leptos::prelude::*;
use leptos_router::hooks::{use_params_map, use_query_map};

use super::chart::{Chart, ChartClock, Charts};
use super::live::{use_live, LiveBadge};
use super::reason::WhyItWaits;
use super::server_fns::{get_queue, list_jobs, queue_waits, usage_chart, QUEUE_PAGE_PENDING};
use super::widgets::{duration, secs_between, waits_too_long, ErrorBox, Loading, LocalTime, QuotaBar, StateBadge, WAIT_TROUBLE_S};
use crate::jobs::QueueView;

/// The ranges a chart offers: (label, `since` parameter).
pub const RANGES: [(&str, &str); 3] = [("Last hour", "1h"), ("Last day", "24h"), ("Last week", "7d")];

/// The chart range the page's URL names (`?range=24h`), the last hour by default.
pub fn url_range() -> Memo<String> {
    let query = use_query_map();
    Memo::new(move |_| query.read().get("range").filter(|r| RANGES.iter().any(|(_, s)| s == r)).unwrap_or_else(|| "1h".into()))
}

#[component]
pub fn QueuePage() -> impl IntoView {
    let live = use_live();
    let params = use_params_map();
    let name = move || params.read().get("name").unwrap_or_default();
    let queue = Resource::new(move || (live.tick.get(), name()), |(_, n)| get_queue(n));
    let range = url_range();
    let clock = ChartClock::new();
    let chart_key = move || (live.tick.get(), clock.key(&range.get()), name(), range.get());
    let chart = Resource::new(chart_key, |(_, _, n, since)| usage_chart(format!("queue={}&since={since}", super::urlencode(&n)), false));
    let chart_data = Signal::derive(move || chart.get().and_then(Result::ok));
    let waits = Resource::new(chart_key, |(_, _, n, since)| queue_waits(format!("queue={}&since={since}", super::urlencode(&n))));
    let wait_chart = Signal::derive(move || waits.get().and_then(Result::ok).map(|w| w.0));
    let admission_chart = Signal::derive(move || waits.get().and_then(Result::ok).map(|w| w.1));
    let recent = Resource::new(
        move || (live.tick.get(), name()),
        |(_, n)| list_jobs(format!("queue={}&state=succeeded,failed,cancelled,timed_out&max_items=10", super::urlencode(&n))),
    );
    view! {
        <header class="page-head">
            <h1><span class="crumb"><a href="/">"Overview"</a>" / "</span>{move || format!("Queue {}", name())}</h1>
            <div class="head-actions"><LiveBadge/><a class="button" href=move || format!("/jobs?queue={}", super::urlencode(&name()))>"All its jobs"</a></div>
        </header>
        <Transition fallback=Loading>
            {move || queue.get().map(|r| match r {
                Ok(q) => view! { <QueueBody q/> }.into_any(),
                Err(e) => view! { <ErrorBox message=e.to_string()/> }.into_any(),
            })}
        </Transition>
        <section class="card">
            <div class="section-head"><h2>"Recently finished"</h2></div>
            <Transition fallback=Loading>
                {move || recent.get().map(|r| match r {
                    Ok(p) if p.jobs.is_empty() => view! { <p class="hint">"No job of this queue has finished yet."</p> }.into_any(),
                    Ok(p) => view! {
                        <div class="table-wrap"><table data-testid="recent">
                            <thead><tr><th scope="col">"Job"</th><th scope="col">"State"</th><th scope="col">"Finished"</th><th scope="col">"Ran"</th><th scope="col" class="num">"Exit"</th></tr></thead>
                            <tbody>{p.jobs.into_iter().map(|j| view! {
                                <tr data-testid="recent-row" data-job=j.id.clone()>
                                    <td><a href=format!("/jobs/{}", j.id)>{j.name.clone()}</a><div class="sub mono">{j.id.clone()}</div></td>
                                    <td><StateBadge state=j.state/></td>
                                    <td data-label="finished">{j.finished_at.map(|at| view! { <LocalTime at/> })}</td>
                                    <td data-label="ran">{match (j.started_at, j.finished_at) { (Some(s), Some(f)) => duration(secs_between(s, f)), _ => "–".into() }}</td>
                                    <td class="num" data-label="exit">{j.exit_code.map(|c| c.to_string()).unwrap_or_else(|| "–".into())}</td>
                                </tr>
                            }).collect_view()}</tbody>
                        </table></div>
                    }.into_any(),
                    Err(e) => view! { <ErrorBox message=e.to_string()/> }.into_any(),
                })}
            </Transition>
        </section>
        <section class="card">
            <div class="section-head">
                <h2>"Usage over time"</h2>
                <RangePicker range href=|since: &str| format!("?range={since}")/>
            </div>
            <Charts charts=chart_data label="Usage against quota over time".to_string() testid="queue-chart"/>
        </section>
        <section class="card">
            <div class="section-head">
                <h2>"Waiting and admissions"</h2>
                <span class="hint">"How long jobs waited from submission to admission, and how many were admitted."</span>
            </div>
            <div class="chart-pair">
                <Chart data=wait_chart label="Waiting time before admission, median and p95".to_string() testid="queue-waits"/>
                <Chart data=admission_chart label="Jobs admitted over time".to_string() testid="queue-admissions"/>
            </div>
        </section>
    }
}

/// The chart range links ([`RANGES`]), the current one marked; `href` gives a range's URL.
#[component]
pub fn RangePicker(range: Memo<String>, href: impl Fn(&str) -> String + Copy + Send + Sync + 'static) -> impl IntoView {
    view! {
        <nav class="segmented" aria-label="Range">
            {RANGES.iter().map(|(label, since)| {
                let current = move || (range.get() == *since).then_some("true");
                view! { <a class="button small" href=move || href(since) aria-current=current>{*label}</a> }
            }).collect_view()}
        </nav>
    }
}

#[component]
fn QueueBody(q: QueueView) -> impl IntoView {
    let live = use_live();
    let cohort = q.cohort.clone();
    let trouble = waits_too_long(q.longest_wait_s);
    let bars = q
        .usage
        .iter()
        .map(|u| view! { <QuotaBar label=format!("{} · {}", u.flavor, u.resource) u=u.clone() cohort=cohort.clone() trouble/> })
        .collect_view();
    let more = (q.pending_count as usize).saturating_sub(q.pending.len());
    let pending_rows = q.pending.into_iter().map(|p| {
        let at = p.enqueued_at;
        view! {
            <tr data-testid="pending-row" data-job=p.id.clone()>
                <td class="num">{if p.position == 0 { "–".to_string() } else { p.position.to_string() }}</td>
                <td><a href=format!("/jobs/{}", p.id)>{p.name.clone()}</a><div class="sub mono">{p.id.clone()}</div></td>
                <td class="num" data-label="priority">{p.priority}</td>
                <td data-label="waiting" title="Since it was enqueued (a preempted job keeps its first enqueue time)">{move || duration(secs_between(at, live.now.get()))}</td>
                <td class="reason"><WhyItWaits headline=p.reason_headline.clone() reason=p.reason.clone()/></td>
            </tr>
        }
    }).collect_view();
    let running_rows = q.running.into_iter().map(|r| {
        let started = r.started_at;
        let flavors: Vec<String> = r.flavors.iter().map(|f| f.flavor.clone()).collect();
        view! {
            <tr data-testid="running-row" data-job=r.id.clone()>
                <td><a href=format!("/jobs/{}", r.id)>{r.name.clone()}</a><div class="sub mono">{r.id.clone()}</div></td>
                <td><StateBadge state=r.state/></td>
                <td class="num" data-label="priority">{r.priority}</td>
                <td data-label="flavor">{flavors.join(", ")}</td>
                <td class="mono" data-label="node">{r.node.clone()}</td>
                <td data-label="started">{started.map(|at| view! { <LocalTime at/> })}</td>
                <td data-label="runtime">{move || started.map(|at| duration(secs_between(at, live.now.get()))).unwrap_or_else(|| "starting".into())}</td>
            </tr>
        }
    }).collect_view();
    view! {
        <section class="card">
            <div class="section-head"><h2>"Quota"</h2><span class="badge">{format!("preemption: {}", q.preemption.replace('_', " "))}</span>
                {q.cohort.clone().map(|c| view! { <a class="badge cohort" data-testid="cohort-link" href=format!("/cohorts/{c}")>{format!("cohort {c}: borrows and lends unused quota")}</a> })}</div>
            {trouble.then(|| view! { <p class="trouble-note" data-testid="trouble">{format!("Jobs have waited over {} here.", duration(WAIT_TROUBLE_S))}</p> })}
            <div class="usage-list wide">{bars}</div>
        </section>
        <section class="card">
            <div class="section-head"><h2>"Pending " <span class="count" data-testid="pending-total">{q.pending_count}</span></h2>
                <span class="hint">"In admission order: priority, then enqueue time."</span></div>
            {if q.pending_count == 0 {
                view! { <p class="hint" data-testid="no-pending">"Nothing waits in this queue."</p> }.into_any()
            } else {
                view! {
                    <div class="table-wrap"><table data-testid="pending">
                        <thead><tr><th scope="col" class="num">"#"</th><th scope="col">"Job"</th><th scope="col" class="num">"Priority"</th><th scope="col">"Waiting"</th><th scope="col">"Why it waits"</th></tr></thead>
                        <tbody>{pending_rows}</tbody>
                    </table></div>
                    {(more > 0).then(|| view! { <p class="hint">{format!("…and {more} more (the first {QUEUE_PAGE_PENDING} are shown).")}</p> })}
                }.into_any()
            }}
        </section>
        <section class="card">
            <div class="section-head"><h2>"Running " <span class="count" data-testid="running-total">{q.running_count}</span></h2></div>
            {if q.running_count == 0 {
                view! { <p class="hint">"No job holds quota in this queue."</p> }.into_any()
            } else {
                view! {
                    <div class="table-wrap"><table data-testid="running">
                        <thead><tr><th scope="col">"Job"</th><th scope="col">"State"</th><th scope="col" class="num">"Priority"</th><th scope="col">"Flavor"</th><th scope="col">"Node"</th><th scope="col">"Started"</th><th scope="col">"Runtime"</th></tr></thead>
                        <tbody>{running_rows}</tbody>
                    </table></div>
                }.into_any()
            }}
        </section>
    }
}
