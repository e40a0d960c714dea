//! `/stages/:id`: a stage's progress (counts by state, a bar, each job) and its results.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use super::live::{use_live, LiveBadge};
use super::server_fns::get_stage;
use super::widgets::{ErrorBox, Loading, LocalTime, StateBadge};
use crate::jobs::{JobState, StageResults, StageStatus};

#[component]
pub fn StagePage() -> impl IntoView {
    let live = use_live();
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let stage = Resource::new(move || (live.tick.get(), id()), |(_, id)| get_stage(id));
    view! {
        <Transition fallback=Loading>
            {move || stage.get().map(|r| match r {
                Ok((status, results)) => view! { <StageBody status results/> }.into_any(),
                Err(e) => view! { <header class="page-head"><h1>"Stage"</h1></header><ErrorBox message=e.to_string()/> }.into_any(),
            })}
        </Transition>
    }
}

#[component]
fn StageBody(status: StageStatus, results: StageResults) -> impl IntoView {
    let total = status.jobs.len().max(1) as f64;
    let count = |states: &[JobState]| states.iter().map(|s| status.counts.get(s.as_str()).copied().unwrap_or(0)).sum::<u64>() as f64;
    let ok = count(&[JobState::Succeeded]) / total * 100.0;
    let bad = count(&[JobState::Failed, JobState::TimedOut, JobState::Cancelled, JobState::Rejected]) / total * 100.0;
    let run = count(&[JobState::Admitted, JobState::Running]) / total * 100.0;
    let limit = match status.parallelism.max_concurrent {
        0 => "no concurrency limit".to_string(),
        n => format!("at most {n} at once"),
    };
    let counts = status.counts.iter().map(|(s, n)| view! { <span class="badge">{format!("{n} {}", s.replace('_', " "))}</span> }).collect_view();
    let rows = results.job_statuses.iter().map(|r| view! {
        <tr data-testid="stage-job">
            <td><a href=format!("/jobs/{}", r.job_id)>{r.name.clone()}</a><div class="sub mono">{r.job_id.clone()}</div></td>
            <td><StateBadge state=r.state/>{r.reason.clone().map(|why| view! { <div class="sub reason" data-testid="stage-job-reason">{why}</div> })}</td>
            <td class="num">{r.return_code.map(|c| c.to_string()).unwrap_or_else(|| "–".into())}</td>
            <td>{(!r.stdout.is_empty()).then(|| view! { <details><summary>"stdout"</summary><pre class="log">{r.stdout.clone()}</pre></details> })}
                {(!r.stderr.is_empty()).then(|| view! { <details><summary>"stderr"</summary><pre class="log">{r.stderr.clone()}</pre></details> })}</td>
        </tr>
    }).collect_view();
    view! {
        <header class="page-head">
            <h1><span class="crumb">"Stage / "</span>{status.name.clone()}</h1>
            <div class="head-actions"><LiveBadge/>
                <span class=if status.done { if results.success { "badge state ok" } else { "badge state error" } } else { "badge state run" }>
                    {if status.done { if results.success { "succeeded" } else { "finished with failures" } } else { "in progress" }}</span></div>
        </header>
        <section class="card">
            <p class="hint">{format!("{} jobs · {limit} · by {} · created ", status.jobs.len(), status.submitter)}<LocalTime at=status.created_at/></p>
            <div class="progress" role="img" aria-label=format!("{ok:.0}% succeeded, {bad:.0}% failed, {run:.0}% running")>
                <span class="seg ok" style=format!("width: {ok:.1}%")></span>
                <span class="seg error" style=format!("width: {bad:.1}%")></span>
                <span class="seg run" style=format!("width: {run:.1}%")></span>
            </div>
            <div class="badges" data-testid="stage-counts">{counts}</div>
            {results.error_message.clone().map(|m| view! { <p class="error-box">{m}</p> })}
        </section>
        <section class="card">
            <h2>"Jobs and results"</h2>
            <div class="table-wrap"><table>
                <thead><tr><th scope="col">"Job"</th><th scope="col">"State"</th><th scope="col" class="num">"Exit"</th><th scope="col">"Output"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table></div>
            {(!results.artifacts.is_empty()).then(|| view! {
                <h3>"Artifacts"</h3>
                <ul class="plain">{results.artifacts.keys().map(|k| view! { <li class="mono">{k.clone()}</li> }).collect_view()}</ul>
            })}
        </section>
    }
}
