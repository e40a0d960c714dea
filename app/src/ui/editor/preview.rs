//! "Preview impact": next to the diff before Apply, the draft replayed against the recorded
//! workload of a window, side by side with the active config (the server's what-if replay).
//!
//! While the replay runs the panel says so and offers Cancel, which drops the request's
//! future: the browser aborts the fetch and the server stops the replay.

use std::future::Future;
use std::task::{Poll, Waker};

use leptos::prelude::*;

use super::Editor;
use crate::config::to_canonical_yaml;
use crate::preview::{queue_label, PreviewReport};
use crate::ui::server_fns::{preview_draft, preview_progress};
use crate::ui::chart::Chart;
use crate::api::ChartData;

use crate::ui::widgets::ErrorBox;

/// Windows offered, as the API spells them.
const WINDOWS: [(&str, &str); 4] = [("1h", "last hour"), ("6h", "last 6 hours"), ("24h", "last 24 hours"), ("7d", "last 7 days")];

/// Where the panel is.
#[derive(Debug, Clone, PartialEq)]
enum State {
    Idle,
    Running,
    Done(Box<(PreviewReport, ChartData)>),
    Failed(String),
    Cancelled,
}

/// `12 s`, `40 min`, `1.9 h`, `–` for none.
fn dur(s: Option<f64>) -> String {
    match s {
        None => "–".into(),
        Some(s) if s < 120.0 => format!("{s:.0} s"),
        Some(s) if s < 7200.0 => format!("{:.0} min", s / 60.0),
        Some(s) => format!("{:.1} h", s / 3600.0),
    }
}

/// `a → b`, or `a` alone when equal.
fn pair(a: String, b: String) -> String {
    if a == b {
        a
    } else {
        format!("{a} → {b}")
    }
}

/// Runs `fut` until it completes or `generation` moves past `mine` (then it is dropped).
async fn unless_cancelled<F: Future>(fut: F, generation: RwSignal<u64>, mine: u64, waker: StoredValue<Option<Waker>>) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(move |cx| {
        if generation.get_untracked() != mine {
            return Poll::Ready(None);
        }
        waker.set_value(Some(cx.waker().clone()));
        fut.as_mut().poll(cx).map(Some)
    })
    .await
}

/// The panel: window choice, run/cancel, and the report.
#[component]
pub fn PreviewPanel() -> impl IntoView {
    let ed = expect_context::<Editor>();
    let window = RwSignal::new("24h".to_string());
    let state = RwSignal::new(State::Idle);
    let generation = RwSignal::new(0u64);
    let waker = StoredValue::new(None::<Waker>);
    // `(done, total)` arrivals replayed, polled while a run is on.
    let progress = RwSignal::new(None::<(u64, u64)>);
    let poller = StoredValue::new(None::<IntervalHandle>);
    let stop_polling = move || {
        if let Some(h) = poller.try_update_value(Option::take).flatten() {
            h.clear();
        }
    };
    let run = move |_| {
        let mine = generation.get_untracked() + 1;
        generation.set(mine);
        state.set(State::Running);
        progress.set(None);
        let yaml = ed.draft.config.with_untracked(to_canonical_yaml);
        let w = window.get_untracked();
        let token = format!("p{}-{mine}", chrono::Utc::now().timestamp_micros());
        stop_polling();
        let polled = token.clone();
        let poll = move || {
            let token = polled.clone();
            leptos::task::spawn_local(async move {
                if let Ok(Some(p)) = preview_progress(token).await {
                    if generation.get_untracked() == mine {
                        progress.set(Some(p));
                    }
                }
            });
        };
        if let Ok(handle) = set_interval_with_handle(poll, std::time::Duration::from_millis(300)) {
            poller.set_value(Some(handle));
        }
        leptos::task::spawn_local(async move {
            let outcome = unless_cancelled(preview_draft(yaml, w, token), generation, mine, waker).await;
            if generation.get_untracked() == mine {
                stop_polling();
            }
            match outcome {
                None => {}
                Some(Ok((report, chart))) => state.set(State::Done(Box::new((report, chart)))),
                Some(Err(e)) => state.set(State::Failed(e.to_string())),
            }
        });
    };
    let cancel = move |_| {
        stop_polling();
        generation.update(|g| *g += 1);
        state.set(State::Cancelled);
        if let Some(w) = waker.try_update_value(Option::take).flatten() {
            w.wake();
        }
    };
    let running = move || state.with(|s| *s == State::Running);
    view! {
        <section class="preview" data-testid="preview" aria-labelledby="preview-title">
            <div class="preview-head">
                <h3 id="preview-title">"Preview impact"</h3>
                <label for="preview-window" class="sr-only">"Recorded workload"</label>
                <select id="preview-window" data-testid="preview-window" prop:value=move || window.get()
                    on:change=move |ev| window.set(event_target_value(&ev)) disabled=running>
                    {WINDOWS.iter().map(|(v, l)| view! { <option value=*v>{format!("Replay the {l}")}</option> }).collect_view()}
                </select>
                <Show when=running fallback=move || view! {
                    <button type="button" class="button" data-testid="preview-run" on:click=run>"Preview impact"</button>
                }>
                    <button type="button" class="button" data-testid="preview-cancel" on:click=cancel>"Cancel"</button>
                </Show>
            </div>
            <p class="hint">"Replays the jobs recorded in the window through the scheduler under the active config and under your draft, from the same starting state."</p>
            {move || match state.get() {
                State::Idle => ().into_any(),
                State::Running => view! {
                    <p class="loading" role="status" data-testid="preview-running"><span class="spinner" aria-hidden="true"></span>"Replaying the recorded workload under both configs…"
                        <span data-testid="preview-progress">{move || progress.get().filter(|(_, t)| *t > 0).map(|(d, t)| format!(" {d} of {t} arrivals ({:.0} %)", d as f64 / t as f64 * 100.0))}</span></p>
                    {move || progress.get().filter(|(_, t)| *t > 0).map(|(d, t)| view! { <progress class="preview-bar" max=t value=d aria-label="Replay progress"></progress> })}
                }.into_any(),
                State::Cancelled => view! { <p class="hint" role="status" data-testid="preview-cancelled">"Preview cancelled."</p> }.into_any(),
                State::Failed(e) => view! { <ErrorBox message=e/> }.into_any(),
                State::Done(r) => { let (report, chart) = *r; view! { <Report report chart/> }.into_any() }
            }}
        </section>
    }
}

/// The report: summary, wait chart and table per queue, changed jobs, now, fidelity.
#[component]
fn Report(report: PreviewReport, chart: ChartData) -> impl IntoView {
    let r = report;
    let total: u64 = r.change_counts.iter().map(|c| c.count).sum();
    let summary = format!(
        "{} jobs submitted in the window{}; {} changed fate under the draft. Replayed in {} ms.",
        r.jobs,
        if r.running_at_start > 0 { format!(" ({} already running at its start)", r.running_at_start) } else { String::new() },
        total,
        r.elapsed_ms
    );
    let kinds = r.change_counts.iter().map(|c| format!("{} {}", c.count, c.kind.label())).collect::<Vec<_>>().join(", ");
    let fidelity = &r.fidelity;
    let fidelity_text = format!(
        "Fidelity: the active-config replay differs from what really happened by {} of wait on average over {} jobs; {} of accept/reject outcomes agree{}.",
        dur(fidelity.wait_mae_s),
        fidelity.compared,
        fidelity.outcome_agreement.map_or("–".into(), |a| format!("{:.0} %", a * 100.0)),
        if fidelity.other_versions > 0 { format!("; {} jobs ran under another config version", fidelity.other_versions) } else { String::new() }
    );
    let now = r.now.clone();
    view! {
        <div class="preview-report" data-testid="preview-report">
            <p data-testid="preview-summary">{summary}{(!kinds.is_empty()).then(|| format!(" ({kinds})"))}</p>
            <figure class="wait-chart" aria-label="Wait p95 per queue, active config vs draft">
                <Chart data=Signal::derive(move || Some(chart.clone())) label="Wait p95 per queue: active config vs draft".to_string() testid="wait-chart"/>
            </figure>
            <div class="table-wrap">
                <table data-testid="preview-queues">
                    <thead><tr><th>"Queue"</th><th>"Admitted"</th><th>"Rejected"</th><th>"Preempted"</th><th>"Wait p50"</th><th>"Wait p95"</th><th>"Wait max"</th></tr></thead>
                    <tbody>
                        {r.queues.iter().map(|q| {
                            let (a, d) = (&q.active, &q.draft);
                            let changed = a != d;
                            let reasons = d.rejections.iter().filter(|x| !a.rejections.contains(x)).map(|x| format!("{} × {}", x.count, x.reason)).collect::<Vec<_>>();
                            let cohort = [("active", a), ("draft", d)]
                                .into_iter()
                                .filter_map(|(side, s)| s.cohort_summary().map(|c| format!("{side}: {c}")))
                                .collect::<Vec<_>>();
                            view! {
                                <tr class:changed=changed data-queue=q.queue.clone().unwrap_or_default()>
                                    <td>{queue_label(q)}{(!reasons.is_empty()).then(|| view! { <div class="message-cell">{format!("draft rejects: {}", reasons.join("; "))}</div> })}
                                        {(!cohort.is_empty()).then(|| view! { <div class="message-cell" data-testid="preview-cohort">{cohort.join(" · ")}</div> })}</td>
                                    <td>{pair(a.admitted.to_string(), d.admitted.to_string())}</td>
                                    <td>{pair(a.rejected.to_string(), d.rejected.to_string())}</td>
                                    <td>{pair(a.preempted.to_string(), d.preempted.to_string())}</td>
                                    <td class="wait-p50">{pair(dur(a.wait_p50_s), dur(d.wait_p50_s))}</td>
                                    <td class="wait-p95">{pair(dur(a.wait_p95_s), dur(d.wait_p95_s))}</td>
                                    <td>{pair(dur(a.wait_max_s), dur(d.wait_max_s))}</td>
                                </tr>
                            }
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
            <Show when={let n = r.changes.len(); move || n > 0}>
                <details class="preview-changes" data-testid="preview-changes">
                    <summary>{format!("Jobs whose fate changes ({total}{})", if r.changes_truncated { ", the first listed" } else { "" })}</summary>
                    <ul class="changes">
                        {r.changes.iter().take(200).map(|c| view! {
                            <li><span class="kind changed">{c.kind.label()}</span>" "
                                <a href=format!("/jobs/{}", c.job_id)>{c.job_id.clone()}</a>" "{format!("({}): {} → {}", c.name, c.active, c.draft)}</li>
                        }).collect_view()}
                    </ul>
                </details>
            </Show>
            <div class="preview-now" data-testid="preview-now">
                <h4>"Right now"</h4>
                <p class="hint">{format!("{} running, {} waiting. The first admission cycle under the draft would admit {} (the active config: {}).", now.running, now.pending, now.would_admit, now.would_admit_active)}</p>
                <ul>
                    {now.over_quota.iter().map(|o| view! {
                        <li>{format!("{}/{}/{}: running jobs use {} of the draft's {}: {}", o.queue, o.flavor, o.resource, o.used, o.draft_nominal, o.consequence)}</li>
                    }).collect_view()}
                    {now.preempted.iter().map(|p| view! {
                        <li>"Would preempt "<a href=format!("/jobs/{}", p.job_id)>{p.job_id.clone()}</a>{format!(" (queue {}, priority {}) for {}", p.queue, p.priority, p.preemptor)}</li>
                    }).collect_view()}
                    {now.rerouted.iter().map(|j| view! { <li><a href=format!("/jobs/{}", j.job_id)>{j.job_id.clone()}</a>": "{j.what.clone()}</li> }).collect_view()}
                </ul>
            </div>
            <p class="hint" data-testid="preview-fidelity">{fidelity_text}</p>
            <ul class="hint">{r.notes.iter().map(|n| view! { <li>{n.clone()}</li> }).collect_view()}</ul>
        </div>
    }
}
