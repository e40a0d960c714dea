//! `/jobs/:id`: one job. Its state timeline, what it asked for, where it was routed (queue,
//! flavor, node, the config version and rule), its logs (following while it runs), the
//! preemptions it suffered or caused, and the cancel and priority actions.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use super::live::{use_live, LiveBadge};
use super::events::job_label;
use super::reason::WhyItWaits;
use super::server_fns::{cancel_job, change_priority, get_job, job_logs};
use super::widgets::{amount, duration, secs_between, ErrorBox, Loading, LocalTime, StateBadge};
use crate::jobs::{Event, Job};

/// Log lines shown.
const LOG_LINES: u64 = 500;

#[component]
pub fn JobPage() -> impl IntoView {
    let live = use_live();
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    // Bumped by the actions so their result shows at once, before the stream says so.
    let acted = RwSignal::new(0u32);
    // The actions' state lives here, not in the body that every refetch re-renders: an open
    // confirmation or a typed priority survives the page updating underneath.
    let ui = ActionState { acted, confirming: RwSignal::new(false), error: RwSignal::new(None), typed: RwSignal::new(None) };
    let job = Resource::new(move || (live.tick.get(), acted.get(), id()), |(_, _, id)| get_job(id));
    view! {
        <Transition fallback=Loading>
            {move || job.get().map(|r| match r {
                Ok((j, caused)) => view! { <JobBody j caused ui/> }.into_any(),
                Err(e) => view! {
                    <header class="page-head"><h1>"Job"</h1></header>
                    <ErrorBox message=e.to_string()/>
                }.into_any(),
            })}
        </Transition>
    }
}

#[component]
fn JobBody(j: Job, caused: Vec<Event>, ui: ActionState) -> impl IntoView {
    let live = use_live();
    let ended = j.state.is_terminal();
    let id = j.id.clone();
    let took = {
        let (start, end, enq) = (j.started_at, j.finished_at, j.enqueued_at);
        move || match (start, end) {
            (Some(s), Some(f)) => format!("ran {}", duration(secs_between(s, f))),
            (Some(s), None) => format!("running for {}", duration(secs_between(s, live.now.get()))),
            (None, _) if !ended => format!("waiting for {}", duration(secs_between(enq, live.now.get()))),
            _ => String::new(),
        }
    };
    let flavors: Vec<String> = j.flavors.iter().map(|f| format!("{} ({})", f.flavor, f.resources.join(", "))).collect();
    let resources: Vec<String> = j.resources.iter().map(|(r, v)| format!("{r} {}", amount(v))).collect();
    let env: Vec<String> = j.runtime_env.env_vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let no_labels = j.labels.is_empty();
    let labels = j.labels.iter().map(|(k, v)| view! { <code class="label-chip">{format!("{k}={v}")}</code> }).collect_view();
    let priority = match j.requested_priority {
        Some(r) if r != j.priority => format!("{} (asked {r}, set by the rule's policy)", j.priority),
        _ => j.priority.to_string(),
    };
    let reason_label = if j.state.is_terminal() { "Outcome" } else { "Why it waits" };
    let ran = j.runs > 0;
    view! {
        <header class="page-head">
            <h1><span class="crumb"><a href="/jobs">"Jobs"</a>" / "</span>{j.name.clone()}</h1>
            <div class="head-actions"><LiveBadge/><StateBadge state=j.state/></div>
        </header>
        <section class="card">
            <div class="job-summary">
                <p class="mono sub" data-testid="job-id">{j.id.clone()}</p>
                <p class="took">{took}</p>
                {j.position.map(|p| view! { <p class="position-line" data-testid="job-position">{format!("Position {p} in its queue.")}</p> })}
                {j.reason.clone().map(|r| view! {
                    <div class="reason-line" data-testid="job-reason"><strong>{reason_label}": "</strong>
                        <WhyItWaits headline=j.reason_headline.clone() reason=r/></div>
                })}
            </div>
            {(!ended && super::session::may_act_on(&j.submitter)).then(|| view! { <Actions id=id.clone() priority=j.priority ui/> })}
        </section>
        <div class="columns">
            <section class="card">
                <h2>"Placement"</h2>
                <dl class="facts">
                    <dt>"Queue"</dt><dd>{j.queue.clone().map(|q| view! { <a href=format!("/queues/{q}")>{q.clone()}</a> }.into_any()).unwrap_or_else(|| "not routed".into_any())}</dd>
                    <dt>"Routed by"</dt><dd>{match (j.config_version, j.rule_index) {
                        (Some(v), Some(r)) => view! { "rule #"{r + 1}" of "<a href=format!("/config/versions/{v}")>{format!("config v{v}")}</a> }.into_any(),
                        (Some(v), None) => view! { <a href=format!("/config/versions/{v}")>{format!("config v{v}")}</a> }.into_any(),
                        _ => "–".into_any(),
                    }}</dd>
                    <dt>"Flavor"</dt><dd>{if flavors.is_empty() { "–".to_string() } else { flavors.join("; ") }}</dd>
                    <dt>"Node"</dt><dd class="mono">{j.node.clone().map(|n| format!("{n} ({})", j.backend.clone().unwrap_or_default())).unwrap_or_else(|| "–".into())}</dd>
                    <dt>"Priority"</dt><dd data-testid="job-priority">{priority}</dd>
                    <dt>"Submitter"</dt><dd>{j.submitter.clone()}</dd>
                    {j.stage_id.clone().map(|s| view! { <dt>"Stage"</dt><dd><a href=format!("/stages/{s}")>{s.clone()}</a></dd> })}
                    {j.submission_id.clone().map(|s| view! { <dt>"Submission id"</dt><dd class="mono" data-testid="job-submission-id">{s}</dd> })}
                </dl>
            </section>
            <section class="card">
                <h2>"Request"</h2>
                <dl class="facts">
                    <dt>"Command"</dt><dd><code class="cmd">{j.entrypoint.clone()}</code></dd>
                    <dt>"Resources"</dt><dd>{resources.join(", ")}</dd>
                    <dt>"Labels"</dt><dd><div class="labels">{labels}{no_labels.then_some("none")}</div></dd>
                    <dt>"Timeout"</dt><dd>{if j.timeout_s == 0 { "none".to_string() } else { duration(j.timeout_s as f64) }}</dd>
                    <dt>"Retries"</dt><dd>{format!("{} of {} used · {} run(s)", j.retries, j.max_retries, j.runs)}</dd>
                    {j.runtime_env.working_dir.clone().map(|d| view! { <dt>"Working dir"</dt><dd class="mono">{d}</dd> })}
                    {(!env.is_empty()).then(|| view! { <dt>"Environment"</dt><dd class="mono">{env.join(" ")}</dd> })}
                    {j.exit_code.map(|c| view! { <dt>"Exit code"</dt><dd data-testid="exit-code">{c}</dd> })}
                    {j.held_by.clone().map(|by| view! { <dt>"Held by"</dt><dd data-testid="held-by">{by}</dd> })}
                    {job_links("After (ok)", "after-ok", &j.after_ok)}
                    {job_links("After (any)", "after-any", &j.after_any)}
                    {job_links("After (not ok)", "after-not-ok", &j.after_not_ok)}
                    {job_links("Dependents", "dependents", &j.dependents)}
                </dl>
            </section>
        </div>
        <section class="card">
            <h2>"Timeline"</h2>
            <Timeline events=j.history.clone()/>
            {(!caused.is_empty()).then(|| view! {
                <h3>"Preemptions this job caused"</h3>
                <ul class="plain" data-testid="caused">
                    {caused.into_iter().map(|e| {
                        let victim = e.job_id.clone().unwrap_or_default();
                        let label = job_label(e.job_name.clone(), &victim);
                        view! { <li><LocalTime at=e.at/>" · preempted "<a href=format!("/jobs/{victim}")>{label}</a>" · "{e.message.clone()}</li> }
                    }).collect_view()}
                </ul>
            })}
        </section>
        <Logs id=id running=!ended ran=ran/>
    }
}

/// The state of the actions, kept across re-renders of the job body.
#[derive(Debug, Clone, Copy)]
struct ActionState {
    /// Bumped after an action succeeds, so the job reloads at once.
    acted: RwSignal<u32>,
    confirming: RwSignal<bool>,
    error: RwSignal<Option<String>>,
    /// The priority typed but not yet applied.
    typed: RwSignal<Option<String>>,
}

/// Cancel (with a confirmation step) and change priority.
#[component]
fn Actions(id: String, priority: i64, ui: ActionState) -> impl IntoView {
    let ActionState { acted, confirming, error, typed } = ui;
    // What the priority box shows: what was typed, else the job's priority.
    let new_priority = Signal::derive(move || typed.get().unwrap_or_else(|| priority.to_string()));
    let cancel = {
        let id = id.clone();
        Action::new(move |_: &()| {
            let id = id.clone();
            async move { cancel_job(id).await }
        })
    };
    let reprioritize = {
        let id = id.clone();
        Action::new(move |p: &i64| {
            let (id, p) = (id.clone(), *p);
            async move { change_priority(id, p).await }
        })
    };
    Effect::new(move |_| {
        for result in [cancel.value().get(), reprioritize.value().get()].into_iter().flatten() {
            match result {
                Ok(_) => {
                    error.set(None);
                    confirming.set(false);
                    typed.set(None);
                    acted.update(|n| *n += 1);
                }
                Err(e) => error.set(Some(e.to_string())),
            }
        }
    });
    let submit_priority = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        match new_priority.get().trim().parse::<i64>() {
            Ok(p) => {
                reprioritize.dispatch(p);
            }
            Err(_) => error.set(Some(format!("priority: `{}` is not a whole number", new_priority.get()))),
        }
    };
    view! {
        <div class="job-actions">
            <form class="inline-form" on:submit=submit_priority>
                <label for="new-priority">"Priority"</label>
                <input id="new-priority" class="numeric" type="number" step="1" prop:value=move || new_priority.get()
                    on:input=move |ev| typed.set(Some(event_target_value(&ev)))/>
                <button type="submit" class="button" disabled=move || reprioritize.pending().get()>"Change priority"</button>
            </form>
            <Show when=move || !confirming.get() fallback=move || view! {
                <span class="confirm" role="group" aria-label="Confirm cancel">
                    "Stop this job? Its processes are killed."
                    <button type="button" class="button danger" data-testid="confirm-cancel" disabled=move || cancel.pending().get()
                        on:click=move |_| { cancel.dispatch(()); }>"Yes, cancel it"</button>
                    <button type="button" class="button" on:click=move |_| confirming.set(false)>"Keep it"</button>
                </span>
            }>
                <button type="button" class="button danger" data-testid="cancel" on:click=move |_| confirming.set(true)>"Cancel job…"</button>
            </Show>
            {move || error.get().map(|e| view! { <p class="error-box" role="alert">{e}</p> })}
        </div>
    }
}

/// The job's events, oldest first, each linking to the other job it names.
#[component]
fn Timeline(events: Vec<Event>) -> impl IntoView {
    if events.is_empty() {
        return view! { <p class="hint">"No events yet."</p> }.into_any();
    }
    view! {
        <ol class="timeline" data-testid="timeline">
            {events.into_iter().map(|e| {
                let preemptor = e.detail.get("preemptor").and_then(|p| p.as_str()).map(str::to_string);
                let preemptor_name = e.detail.get("preemptor_name").and_then(|p| p.as_str()).map(str::to_string);
                view! {
                    <li class=format!("tl-item kind-{}", e.kind) data-kind=e.kind.clone()>
                        <span class=format!("kind-badge {}", e.kind)>{e.kind.replace('_', " ")}</span>
                        <span class="tl-time"><LocalTime at=e.at/></span>
                        <span class="tl-msg">{e.message.clone()}</span>
                        {preemptor.map(|p| view! { <a class="tl-link" data-testid="preemptor-link" href=format!("/jobs/{p}")>{format!("see {}", job_label(preemptor_name, &p))}</a> })}
                    </li>
                }
            }).collect_view()}
        </ol>
    }.into_any()
}

/// What an empty log means: nothing written *yet* only while the job may still write.
fn empty_log(running: bool, ran: bool, stderr: bool) -> &'static str {
    match (running, ran, stderr) {
        (true, _, _) => "Nothing written yet.",
        (false, false, _) => "No output: the job never ran.",
        (false, true, false) => "No output: the job wrote nothing to stdout.",
        (false, true, true) => "No output: the job wrote nothing to stderr.",
    }
}

/// stdout / stderr, the last lines, refreshed every second while the job runs.
#[component]
fn Logs(id: String, running: bool, ran: bool) -> impl IntoView {
    let live = use_live();
    let stderr = RwSignal::new(false);
    let key = move || (stderr.get(), if running { live.now.get().timestamp() } else { 0 }, live.tick.get());
    let log = Resource::new(key, move |(err, _, _)| job_logs(id.clone(), err, LOG_LINES));
    view! {
        <section class="card">
            <div class="section-head">
                <h2>"Logs"</h2>
                <div class="segmented" role="tablist" aria-label="Stream">
                    <button type="button" role="tab" class="small" aria-selected=move || (!stderr.get()).to_string() on:click=move |_| stderr.set(false)>"stdout"</button>
                    <button type="button" role="tab" class="small" aria-selected=move || stderr.get().to_string() on:click=move |_| stderr.set(true)>"stderr"</button>
                </div>
                {running.then(|| view! { <span class="hint">"following"</span> })}
            </div>
            <Transition fallback=Loading>
                {move || log.get().map(|r| match r {
                    Ok(text) if text.is_empty() => view! {
                        <p class="hint" data-testid="log-empty">{empty_log(running, ran, stderr.get_untracked())}</p>
                    }.into_any(),
                    Ok(text) => view! { <pre class="log" data-testid="log">{text}</pre> }.into_any(),
                    Err(e) => view! { <ErrorBox message=e.to_string()/> }.into_any(),
                })}
            </Transition>
            <p class="hint">{format!("The last {LOG_LINES} lines. ")}</p>
        </section>
    }
}

/// A fact row linking each of `ids` to its job page (nothing when there are none): the
/// jobs this one waits for, or that wait for it.
fn job_links(title: &'static str, testid: &'static str, ids: &[String]) -> Option<impl IntoView> {
    (!ids.is_empty()).then(|| {
        let links = ids.iter().map(|id| view! { <a class="mono" href=format!("/jobs/{id}")>{id.clone()}</a>" " }).collect_view();
        view! { <dt>{title}</dt><dd data-testid=testid>{links}</dd> }
    })
}
