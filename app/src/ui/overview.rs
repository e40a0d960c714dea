//! `/`: where the quota goes. Every queue with its usage per flavor and resource, what waits
//! and for how long, and the nodes each backend contributes.

use leptos::prelude::*;

use super::live::{use_live, LiveBadge};
use super::server_fns::{get_leader, list_nodes, list_queues};
use super::widgets::{amount, duration, waits_too_long, ErrorBox, Loading, QuotaBar, WAIT_TROUBLE_S};
use crate::jobs::{NodeView, QueueView};

#[component]
pub fn OverviewPage() -> impl IntoView {
    let live = use_live();
    let queues = Resource::new(move || live.tick.get(), |_| list_queues());
    let nodes = Resource::new(move || live.tick.get(), |_| list_nodes());
    let leader = Resource::new(move || live.tick.get(), |_| get_leader());
    view! {
        <header class="page-head">
            <h1>"Overview"</h1>
            <div class="head-actions"><LiveBadge/>{super::session::can(crate::auth::Role::Submitter).then(|| view! { <a class="button primary" href="/jobs/new">"Submit a job"</a> })}</div>
        </header>
        <Transition fallback=|| ()>
            {move || leader.get().and_then(Result::ok).map(|l| view! { <p class="hint" data-testid="leader" title="The replica that runs the admission loop and talks to the backends">{format!("Admission loop: {}", l.trim_start_matches("leader: "))}</p> })}
        </Transition>
        <Transition fallback=Loading>
            {move || queues.get().map(|r| match r {
                Ok(qs) => view! { <Totals queues=qs.clone()/><QueueGrid queues=qs/> }.into_any(),
                Err(e) => view! { <ErrorBox message=e.to_string()/> }.into_any(),
            })}
        </Transition>
        <section class="card">
            <div class="section-head"><h2>"Nodes"</h2><span class="hint">"Capacity each backend reports, what admitted and running jobs leave free, and the flavors that select the node."</span></div>
            <Transition fallback=Loading>
                {move || nodes.get().map(|r| match r {
                    Ok(ns) => view! { <NodeTable nodes=ns/> }.into_any(),
                    Err(e) => view! { <ErrorBox message=e.to_string()/> }.into_any(),
                })}
            </Transition>
        </section>
    }
}

#[component]
fn Totals(queues: Vec<QueueView>) -> impl IntoView {
    let pending: u64 = queues.iter().map(|q| q.pending_count).sum();
    let running: u64 = queues.iter().map(|q| q.running_count).sum();
    let wait = queues.iter().filter_map(|q| q.longest_wait_s).fold(None, |m: Option<f64>, w| Some(m.map_or(w, |m| m.max(w))));
    view! {
        <div class="stats" data-testid="totals">
            <div class="stat"><span class="stat-value">{queues.len()}</span><span class="stat-label">"queues"</span></div>
            <a class="stat" href="/jobs?state=pending"><span class="stat-value" data-testid="total-pending">{pending}</span><span class="stat-label">"pending"</span></a>
            <a class="stat" href="/jobs?state=admitted,running"><span class="stat-value" data-testid="total-running">{running}</span><span class="stat-label">"running"</span></a>
            <div class="stat"><span class="stat-value">{wait.map(duration).unwrap_or_else(|| "–".into())}</span><span class="stat-label">"longest wait"</span></div>
        </div>
    }
}

#[component]
fn QueueGrid(queues: Vec<QueueView>) -> impl IntoView {
    if queues.is_empty() {
        return view! { <section class="card"><p class="hint">"The active config defines no queues. "<a href="/config">"Add one in the config editor."</a></p></section> }.into_any();
    }
    let cards = queues.into_iter().map(|q| {
        let href = format!("/queues/{}", q.name);
        let trouble = waits_too_long(q.longest_wait_s);
        let bars = q
            .usage
            .iter()
            .map(|u| view! { <QuotaBar label=format!("{} · {}", u.flavor, u.resource) u=u.clone() cohort=q.cohort.clone() trouble/> })
            .collect_view();
        view! {
            <article class="card queue-card" data-testid="queue-card" data-queue=q.name.clone()>
                <div class="queue-card-head">
                    <h2><a href=href>{q.name.clone()}</a></h2>
                    <span class="badges">
                        <span class="badge" title="Preemption within the queue">{format!("preemption: {}", q.preemption.replace('_', " "))}</span>
                        {q.cohort.clone().map(|c| view! { <a class="badge cohort" data-testid="cohort-link" href=format!("/cohorts/{c}") title="The cohort it pools unused quota with">{format!("cohort {c}")}</a> })}
                    </span>
                </div>
                <dl class="counts">
                    <div><dt>"pending"</dt><dd data-testid="pending-count">{q.pending_count}</dd></div>
                    <div><dt>"running"</dt><dd data-testid="running-count">{q.running_count}</dd></div>
                    <div><dt>"longest wait"</dt><dd data-testid="longest-wait" class:trouble=trouble>{q.longest_wait_s.map(duration).unwrap_or_else(|| "–".into())}</dd></div>
                </dl>
                {trouble.then(|| view! { <p class="trouble-note" data-testid="trouble">{format!("Jobs have waited over {} here.", duration(WAIT_TROUBLE_S))}</p> })}
                <div class="usage-list">{bars}</div>
            </article>
        }
    }).collect_view();
    view! { <div class="queue-grid">{cards}</div> }.into_any()
}

#[component]
pub fn NodeTable(nodes: Vec<NodeView>) -> impl IntoView {
    if nodes.is_empty() {
        return view! { <p class="hint">"No backend reports any node yet."</p> }.into_any();
    }
    let rows = nodes.into_iter().map(|n| {
        let resources = n.capacity.iter().map(|(r, cap)| {
            let free = n.free.get(r).copied().unwrap_or(*cap);
            let used_pct = if *cap > 0.0 { ((cap - free) / cap * 100.0).clamp(0.0, 100.0) } else { 0.0 };
            let outside = match n.used_outside.get(r) {
                Some(o) if *o > 0.0 => format!(" · {} used outside Berth", amount(*o)),
                _ => String::new(),
            };
            view! {
                <div class="node-res">
                    <span class="res-name">{r.clone()}</span>
                    <span class="bar small" aria-hidden="true"><span class="fill" style=format!("width: {used_pct:.0}%")></span></span>
                    <span class="res-num">{format!("{} free of {}{outside}", amount(free), amount(*cap))}</span>
                </div>
            }
        }).collect_view();
        // The backend's own figures (Ray's, a few seconds behind), Berth's jobs included.
        let reported = n.reported.as_ref().map(|rep| {
            let used: Vec<String> = rep.used.iter().filter(|(_, u)| **u > 0.0).map(|(r, u)| format!("{r} {}", amount(*u))).collect();
            let text = if used.is_empty() { "nothing".to_string() } else { used.join(", ") };
            view! { <div class="sub" data-testid="node-reported" title=rep.at.to_rfc3339()>{format!("{} reports in use: {text}", n.backend)}</div> }
        });
        let labels = n.labels.iter().map(|(k, v)| view! { <code class="label-chip">{format!("{k}={v}")}</code> }).collect_view();
        let flavors = if n.flavors.is_empty() { "none".to_string() } else { n.flavors.join(", ") };
        view! {
            <tr data-testid="node-row">
                <td><strong>{n.id.clone()}</strong><div class="sub">{n.backend.clone()}</div></td>
                <td>{flavors}</td>
                <td><div class="node-resources">{resources}</div>{reported}</td>
                <td><div class="labels">{labels}</div></td>
            </tr>
        }
    }).collect_view();
    view! {
        <div class="table-wrap">
            <table class="nodes">
                <thead><tr><th scope="col">"Node"</th><th scope="col">"Flavors"</th><th scope="col">"Resources"</th><th scope="col">"Labels"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
    }.into_any()
}
