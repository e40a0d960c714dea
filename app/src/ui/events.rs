//! `/events`: the scheduler's timeline, newest first. Admissions, preemptions (who preempted
//! whom, at which priorities, under which config version and rule), rejections, timeouts and
//! config applies, filtered by kind and queue.

use leptos::prelude::*;
use leptos_router::components::Form;
use leptos_router::hooks::use_query_map;

use super::jobs_list::options;
use super::live::{use_live, LiveBadge};
use super::server_fns::{list_events, list_queues};
use super::widgets::{ErrorBox, Loading, LocalTime, Pager};
use crate::jobs::{Event, EventPage};

const PAGE: u32 = 50;

/// Kind filter choices: (parameter, label).
const KINDS: [(&str, &str); 14] = [
    ("", "all kinds"),
    ("preempted", "preemptions"),
    ("reclaimed", "reclaims (cohort)"),
    ("borrowed", "borrowing (cohort)"),
    ("admitted", "admissions"),
    ("rejected", "rejections"),
    ("timed_out", "timeouts"),
    ("config_applied", "config applies"),
    ("submitted", "submissions"),
    ("started", "starts"),
    ("finished", "finishes"),
    ("cancelled", "cancels"),
    ("retried", "retries"),
    ("preempted,timed_out,rejected,cancelled", "anything that went wrong"),
];

#[component]
pub fn EventsPage() -> impl IntoView {
    let live = use_live();
    let query = use_query_map();
    let value = move |k: &str| query.read().get(k).unwrap_or_default();
    let api_query = move || {
        let mut parts = vec!["order=newest".to_string(), format!("max_items={PAGE}")];
        for (param, key) in [("kind", "kind"), ("queue", "queue"), ("cursor", "cursor"), ("job", "job")] {
            let v = value(key);
            if !v.is_empty() {
                parts.push(format!("{param}={}", super::urlencode(&v)));
            }
        }
        parts.join("&")
    };
    let page = Resource::new(move || (live.tick.get(), api_query()), |(_, q)| list_events(q));
    let queues = Resource::new(|| (), |_| list_queues());
    view! {
        <header class="page-head">
            <h1>"Events"</h1>
            <div class="head-actions"><LiveBadge/></div>
        </header>
        <section class="card">
            <Form method="GET" action="/events" attr:class="filters">
                <div class="field">
                    <label for="e-kind">"Kind"</label>
                    <select id="e-kind" name="kind">
                        {move || options(&KINDS, &value("kind"))}
                    </select>
                </div>
                <Transition fallback=|| view! { <div class="field"><label for="e-queue">"Queue"</label><select id="e-queue" name="queue" disabled><option>"any"</option></select></div> }>
                    {move || queues.get().map(|r| {
                        let mut choices = vec![(String::new(), "any".to_string())];
                        choices.extend(r.unwrap_or_default().into_iter().map(|q| (q.name.clone(), q.name)));
                        view! { <div class="field"><label for="e-queue">"Queue"</label><select id="e-queue" name="queue">{options(&choices, &value("queue"))}</select></div> }
                    })}
                </Transition>
                <div class="filter-actions"><button type="submit" class="button primary">"Apply filters"</button></div>
            </Form>
        </section>
        <section class="card">
            <Transition fallback=Loading>
                {move || page.get().map(|r| match r {
                    Ok(p) => view! { <EventList page=p first=value("cursor").is_empty() kind=value("kind") queue=value("queue")/> }.into_any(),
                    Err(e) => view! { <ErrorBox message=e.to_string()/> }.into_any(),
                })}
            </Transition>
        </section>
    }
}

#[component]
fn EventList(page: EventPage, first: bool, kind: String, queue: String) -> impl IntoView {
    if page.events.is_empty() {
        return view! { <p class="hint" data-testid="no-events">"No event matches these filters."</p> }.into_any();
    }
    let keep = format!("kind={}&queue={}", super::urlencode(&kind), super::urlencode(&queue));
    let older = page.next_cursor.map(|c| format!("/events?{keep}&cursor={c}"));
    view! {
        <ol class="events" data-testid="events">{page.events.into_iter().map(|e| view! { <EventRow e/> }).collect_view()}</ol>
        <Pager note="Newest first." newest=(!first).then(|| format!("/events?{keep}")) older/>
    }.into_any()
}

/// One event; a preemption names both sides, each a link, and for a reclaim or a borrow the
/// lending and borrowing queues too.
#[component]
pub fn EventRow(e: Event) -> impl IntoView {
    let queue_link = |q: &str| view! { <a class="queue-link" href=format!("/queues/{q}")>{q.to_string()}</a> };
    let cohort_line = {
        let (lender, cohort) = (e.detail.get("lender").and_then(|v| v.as_str()), e.detail.get("cohort").and_then(|v| v.as_str()));
        let borrowers: Vec<String> = match (e.detail.get("borrower").and_then(|v| v.as_str()), e.detail.get("borrowers").and_then(|v| v.as_array())) {
            (Some(b), _) => vec![b.to_string()],
            (None, Some(bs)) => bs.iter().filter_map(|b| b.as_str().map(str::to_string)).collect(),
            _ => Vec::new(),
        };
        let cause = e.detail.get("cause").and_then(|v| v.as_str()).unwrap_or("reclaim").replace('_', " ");
        lender.zip(cohort).map(|(lender, cohort)| view! {
            <div class="reclaim" data-testid="reclaim">
                <span>{format!("{cause}: lender ")}{queue_link(lender)}</span>
                <span>" · borrower "{borrowers.iter().map(|b| queue_link(b)).collect_view()}</span>
                <span>" · cohort "<a class="cohort-link" href=format!("/cohorts/{cohort}")>{cohort.to_string()}</a></span>
            </div>
        })
    };
    let detail = (e.kind == "preempted").then(|| {
        let preemptor = e.detail.get("preemptor").and_then(|v| v.as_str()).unwrap_or_default().to_string();
        let preemptor_name = e.detail.get("preemptor_name").and_then(|v| v.as_str()).filter(|n| !n.is_empty()).map(str::to_string);
        let pprio = e.detail.get("preemptor_priority").and_then(|v| v.as_i64());
        let (own_id, own_name) = (e.job_id.clone(), e.job_name.clone());
        let victims: Vec<(String, Option<i64>)> = e
            .detail
            .get("victims")
            .and_then(|v| v.as_array())
            .map(|vs| vs.iter().map(|v| (v["job_id"].as_str().unwrap_or_default().to_string(), v["priority"].as_i64())).collect())
            .unwrap_or_default();
        view! {
            <div class="preemption" data-testid="preemption">
                <span>"by "<a data-testid="preemptor" href=format!("/jobs/{preemptor}")>{job_label(preemptor_name, &preemptor)}</a>
                    {pprio.map(|p| format!(" (priority {p})"))}</span>
                <span>" · victims: "
                    {victims.into_iter().map(|(id, p)| {
                        let name = own_name.clone().filter(|_| own_id.as_deref() == Some(id.as_str()));
                        view! {
                            <a class="victim" data-testid="victim" href=format!("/jobs/{id}")>{job_label(name, &id)}</a>
                            {p.map(|p| format!(" (priority {p}) "))}
                        }
                    }).collect_view()}
                </span>
            </div>
        }
    });
    let context = [
        e.config_version.map(|v| view! { <a href=format!("/config/versions/{v}")>{format!("config v{v}")}</a> }.into_any()),
        e.rule_index.map(|r| view! { <span>{format!("rule #{}", r + 1)}</span> }.into_any()),
        e.flavor.clone().map(|f| view! { <span>{format!("flavor {f}")}</span> }.into_any()),
        e.node.clone().map(|n| view! { <span class="mono">{n}</span> }.into_any()),
    ];
    view! {
        <li class=format!("event kind-{}", e.kind) data-testid="event" data-kind=e.kind.clone() data-job=e.job_id.clone().unwrap_or_default()>
            <span class=format!("kind-badge {}", e.kind)>{e.kind.replace('_', " ")}</span>
            <div class="event-body">
                <div class="event-line">
                    {e.job_id.clone().map(|j| match e.job_name.clone() {
                        Some(name) => view! { <a href=format!("/jobs/{j}") data-testid="event-job">{name}</a><span class="sub mono">{j.clone()}</span> }.into_any(),
                        None => view! { <a class="mono" href=format!("/jobs/{j}") data-testid="event-job">{j.clone()}</a> }.into_any(),
                    })}
                    {e.queue.clone().map(|q| view! { <a class="queue-link" href=format!("/queues/{q}")>{q.clone()}</a> })}
                    <span class="event-msg">{e.message.clone()}</span>
                </div>
                {detail}
                {cohort_line}
                <div class="event-meta"><LocalTime at=e.at/>{context.into_iter().flatten().map(|c| view! { " · " {c} }).collect_view()}</div>
            </div>
        </li>
    }
}

/// A job as people name it: `nightly-eval (j-mxa3…)`, or the id alone when the name is not
/// known (an event recorded before names were).
pub fn job_label(name: Option<String>, id: &str) -> String {
    match name.filter(|n| !n.is_empty() && n != id) {
        Some(name) => format!("{name} ({id})"),
        None => id.to_string(),
    }
}
