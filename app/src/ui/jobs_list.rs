//! `/jobs`: every job, newest first, searchable and filtered by state, queue, label,
//! submitter and submission time; paged by cursor so it stays fast at any size. The filters
//! are the URL's query, the same parameters as `GET /api/v1/jobs`.

use leptos::prelude::*;
use leptos_router::components::Form;
use leptos_router::hooks::use_query_map;

use super::live::{use_live, LiveBadge};
use super::server_fns::{list_jobs, list_queues};
use super::widgets::{duration, secs_between, ErrorBox, Loading, LocalTime, Pager, StateBadge};
use crate::jobs::{Job, JobPage, JobState};


/// Jobs per page.
const PAGE: u32 = 50;
/// The filter fields, as query parameters.
const FILTERS: [&str; 6] = ["q", "state", "queue", "label", "submitter", "since"];

#[component]
pub fn JobsPage() -> impl IntoView {
    let live = use_live();
    let query = use_query_map();
    let value = move |k: &str| query.read().get(k).unwrap_or_default();
    let api_query = move || {
        let q = query.read();
        let mut parts: Vec<String> = FILTERS
            .iter()
            .chain(["cursor"].iter())
            .filter_map(|k| q.get(k).filter(|v| !v.is_empty()).map(|v| format!("{k}={}", super::urlencode(&v))))
            .collect();
        parts.push(format!("max_items={PAGE}"));
        parts.join("&")
    };
    let page = Resource::new(move || (live.tick.get(), api_query()), |(_, q)| list_jobs(q));
    let queues = Resource::new(|| (), |_| list_queues());
    let filtered = move || FILTERS.iter().any(|k| !value(k).is_empty());
    view! {
        <header class="page-head">
            <h1>"Jobs"</h1>
            <div class="head-actions"><LiveBadge/>{super::session::can(crate::auth::Role::Submitter).then(|| view! { <a class="button primary" href="/jobs/new">"Submit a job"</a> })}</div>
        </header>
        <section class="card">
            <Form method="GET" action="/jobs" attr:class="filters" attr:data-testid="job-filters">
                <div class="field wide">
                    <label for="f-q">"Search"</label>
                    <input id="f-q" name="q" type="search" placeholder="id or name" prop:value=move || value("q")/>
                </div>
                <div class="field">
                    <label for="f-state">"State"</label>
                    <select id="f-state" name="state">
                        {move || options(&STATE_CHOICES, &value("state"))}
                    </select>
                </div>
                <Transition fallback=|| view! { <div class="field"><label for="f-queue">"Queue"</label><select id="f-queue" name="queue" disabled><option>"any"</option></select></div> }>
                    {move || queues.get().map(|r| {
                        let mut choices = vec![(String::new(), "any".to_string())];
                        choices.extend(r.unwrap_or_default().into_iter().map(|q| (q.name.clone(), q.name)));
                        view! {
                            <div class="field">
                                <label for="f-queue">"Queue"</label>
                                <select id="f-queue" name="queue">{options(&choices, &value("queue"))}</select>
                            </div>
                        }
                    })}
                </Transition>
                <div class="field">
                    <label for="f-label">"Label"</label>
                    <input id="f-label" name="label" placeholder="team=vision" prop:value=move || value("label")/>
                </div>
                <div class="field">
                    <label for="f-submitter">"Submitter"</label>
                    <input id="f-submitter" name="submitter" prop:value=move || value("submitter")/>
                </div>
                <div class="field">
                    <label for="f-since">"Submitted"</label>
                    <select id="f-since" name="since">
                        {move || options(&SINCE_CHOICES, &value("since"))}
                    </select>
                </div>
                <div class="filter-actions">
                    <button type="submit" class="button primary">"Apply filters"</button>
                    <Show when=filtered><a class="button" href="/jobs">"Clear"</a></Show>
                </div>
            </Form>
        </section>
        <section class="card">
            <Transition fallback=Loading>
                {move || page.get().map(|r| match r {
                    Ok(p) => view! { <JobTable page=p first=value("cursor").is_empty() base=move || api_query()/> }.into_any(),
                    Err(e) => view! { <ErrorBox message=e.to_string()/> }.into_any(),
                })}
            </Transition>
        </section>
    }
}

/// State filter choices: (parameter, label).
const STATE_CHOICES: [(&str, &str); 10] = [
    ("", "any"),
    ("pending,admitted,running", "not finished"),
    ("pending", "pending"),
    ("admitted,running", "admitted or running"),
    ("succeeded", "succeeded"),
    ("failed", "failed"),
    ("timed_out", "timed out"),
    ("cancelled", "cancelled"),
    ("rejected", "rejected"),
    ("failed,timed_out,rejected", "any failure"),
];

const SINCE_CHOICES: [(&str, &str); 4] = [("", "any time"), ("1h", "last hour"), ("24h", "last day"), ("7d", "last week")];

/// `<option>`s `(value, label)` with the current one selected (in the server's HTML too).
pub fn options<V: AsRef<str>, L: AsRef<str>>(choices: &[(V, L)], current: &str) -> impl IntoView {
    choices
        .iter()
        .map(|(v, l)| {
            let v = v.as_ref();
            view! { <option value=v.to_string() selected=v == current>{l.as_ref().to_string()}</option> }
        })
        .collect_view()
}

#[component]
fn JobTable(page: JobPage, first: bool, base: impl Fn() -> String + Send + Sync + 'static) -> impl IntoView {
    let live = use_live();
    if page.jobs.is_empty() {
        return view! { <p class="hint" data-testid="no-jobs">"No job matches these filters."</p> }.into_any();
    }
    // The links keep the filters and swap the cursor.
    let filters: String = base().split('&').filter(|p| !p.starts_with("cursor=") && !p.starts_with("max_items=")).collect::<Vec<_>>().join("&");
    let newest = format!("/jobs?{filters}");
    let older = page.next_cursor.map(|c| format!("/jobs?{filters}{}cursor={c}", if filters.is_empty() { "" } else { "&" }));
    let rows = page.jobs.into_iter().map(|j| view! { <JobRow j now=live.now/> }).collect_view();
    view! {
        <div class="table-wrap">
            <table class="jobs" data-testid="jobs">
                <thead><tr>
                    <th scope="col">"Job"</th><th scope="col">"State"</th><th scope="col">"Queue"</th>
                    <th scope="col" class="num">"Priority"</th><th scope="col">"Submitter"</th><th scope="col">"Submitted"</th><th scope="col">"Took"</th>
                </tr></thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
        <Pager note=if first { "Newest first." } else { "Older jobs." } newest=(!first).then_some(newest) older/>
    }.into_any()
}

/// One row: how long it ran (or has waited / is running so far).
#[component]
fn JobRow(j: Job, now: RwSignal<chrono::DateTime<chrono::Utc>>) -> impl IntoView {
    let (submitted, started, finished, state) = (j.submitted_at, j.started_at, j.finished_at, j.state);
    let took = move || match (state, started, finished) {
        (_, Some(s), Some(f)) => duration(secs_between(s, f)),
        (JobState::Running, Some(s), None) => format!("{} so far", duration(secs_between(s, now.get()))),
        (JobState::Pending | JobState::Admitted, _, _) => format!("waiting {}", duration(secs_between(j.enqueued_at, now.get()))),
        _ => "–".into(),
    };
    let labels = j.labels.iter().map(|(k, v)| view! { <code class="label-chip">{format!("{k}={v}")}</code> }).collect_view();
    view! {
        <tr data-testid="job-row" data-job=j.id.clone() data-state=state.as_str()>
            <td><a href=format!("/jobs/{}", j.id)>{j.name.clone()}</a><div class="sub mono">{j.id.clone()}</div><div class="labels">{labels}</div></td>
            <td><StateBadge state/>{(state == JobState::Rejected).then(|| j.reason.clone()).flatten().map(|why| view! {
                <div class="sub reason" data-testid="job-row-reason">{why}</div>
            })}</td>
            <td data-label="queue">{j.queue.clone().map(|q| view! { <a href=format!("/queues/{q}")>{q.clone()}</a> })}</td>
            <td class="num" data-label="priority">{j.priority}</td>
            <td data-label="by">{j.submitter.clone()}</td>
            <td data-label="submitted"><LocalTime at=submitted/></td>
            <td data-label="took">{took}</td>
        </tr>
    }
}
