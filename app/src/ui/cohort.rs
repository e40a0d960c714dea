//! `/cohorts/:name`: queues that pool their unused quota. Per flavor and resource, what the
//! members lend and what of it is in use; per member, its nominal quota, use, what it
//! borrows and lends, and its share (Kueue's dominant resource share, by weight); and the
//! usage over time stacked by member.

use leptos::prelude::*;
use leptos_router::hooks::{use_params_map, use_query_map};

use super::chart::{ChartClock, Charts};
use super::live::{use_live, LiveBadge};
use super::queue::{url_range, RangePicker};
use super::server_fns::{get_cohort, usage_chart};
use super::widgets::{amount, ErrorBox, Loading, QuotaBar};
use crate::jobs::{CohortMember, CohortView};

#[component]
pub fn CohortPage() -> impl IntoView {
    let live = use_live();
    let params = use_params_map();
    let query = use_query_map();
    let name = move || params.read().get("name").unwrap_or_default();
    let cohort = Resource::new(move || (live.tick.get(), name()), |(_, n)| get_cohort(n));
    let range = url_range();
    // The flavor the chart shows (`?flavor=`), every flavor when empty; in the URL so a
    // reload or a shared link shows the same chart.
    let flavor = Memo::new(move |_| query.read().get("flavor").unwrap_or_default());
    let clock = ChartClock::new();
    let chart = Resource::new(
        move || (live.tick.get(), clock.key(&range.get()), name(), range.get(), flavor.get()),
        |(_, _, n, since, flavor)| {
            let mut q = format!("cohort={}&since={since}", super::urlencode(&n));
            if !flavor.is_empty() {
                q.push_str(&format!("&flavor={}", super::urlencode(&flavor)));
            }
            usage_chart(q, true)
        },
    );
    let chart_data = Signal::derive(move || chart.get().and_then(Result::ok));
    let href = move |since: &str| {
        let f = flavor.get();
        if f.is_empty() { format!("?range={since}") } else { format!("?range={since}&flavor={}", super::urlencode(&f)) }
    };
    let go = super::history::go_to();
    let pick_flavor = move |f: String| {
        let mut url = format!("?range={}", range.get_untracked());
        if !f.is_empty() {
            url.push_str(&format!("&flavor={}", super::urlencode(&f)));
        }
        go.set(Some(url));
    };
    view! {
        <header class="page-head">
            <h1><span class="crumb"><a href="/">"Overview"</a>" / "</span>{move || format!("Cohort {}", name())}</h1>
            <div class="head-actions"><LiveBadge/></div>
        </header>
        <Transition fallback=Loading>
            {move || cohort.get().map(|r| match r {
                Ok(c) => view! { <CohortBody c/> }.into_any(),
                Err(e) => view! { <ErrorBox message=e.to_string()/> }.into_any(),
            })}
        </Transition>
        <section class="card">
            <div class="section-head">
                <h2>"Usage over time, by member"</h2>
                <Transition fallback=|| ()>
                    {move || cohort.get().and_then(Result::ok).map(|c| {
                        let mut flavors: Vec<String> = c.pools.iter().map(|p| p.flavor.clone()).collect();
                        flavors.sort();
                        flavors.dedup();
                        (flavors.len() > 1).then(|| view! {
                            <label class="inline" for="cohort-flavor">"Flavor "</label>
                            <select id="cohort-flavor" on:change=move |ev| pick_flavor(event_target_value(&ev))>
                                <option value="" selected=flavor.get_untracked().is_empty()>"all"</option>
                                {flavors.into_iter().map(|f| view! { <option value=f.clone() selected=flavor.get_untracked() == f>{f.clone()}</option> }).collect_view()}
                            </select>
                        })
                    })}
                </Transition>
                <RangePicker range href/>
            </div>
            <p class="hint">"Each member's use stacked, with the sum of their quotas (dashed) and the capacity of the nodes the flavors select now (dotted)."</p>
            <Charts charts=chart_data label="Each member's usage, stacked, over time".to_string() testid="cohort-chart"/>
        </section>
    }
}

#[component]
fn CohortBody(c: CohortView) -> impl IntoView {
    let pools = c
        .pools
        .iter()
        .map(|p| {
            let lendable = p.lendable.map_or("unlimited".to_string(), amount);
            let nominal = p.nominal.map_or("unlimited".to_string(), amount);
            let idle = p.idle.map(amount);
            view! {
                <tr data-testid="pool-row" data-pool=format!("{}/{}", p.flavor, p.resource)>
                    <td>{format!("{} · {}", p.flavor, p.resource)}</td>
                    <td class="num" data-label="nominal">{nominal}</td>
                    <td class="num" data-label="in use">{amount(p.used)}</td>
                    <td class="num" data-label="borrowed" data-testid="pool-borrowed">{amount(p.borrowed)}</td>
                    <td class="num" data-label="lendable">{lendable}</td>
                    <td class="num" data-label="idle" data-testid="pool-idle">{idle.unwrap_or_else(|| "unlimited".into())}</td>
                </tr>
            }
        })
        .collect_view();
    let fair = if c.fair_sharing {
        "Fair sharing is on: when members compete for idle quota, the one with the lowest weighted share of what it borrows goes first."
    } else {
        "Fair sharing is off: idle quota goes to waiting jobs by priority, then enqueue time."
    };
    let cohort = c.name.clone();
    let members = c.members.into_iter().map(|m| view! { <MemberCard m cohort=cohort.clone()/> }).collect_view();
    view! {
        <section class="card">
            <div class="section-head"><h2>"Pooled quota"</h2><span class="hint">{fair}</span></div>
            <div class="table-wrap"><table data-testid="pools">
                <thead><tr>
                    <th scope="col">"Flavor · resource"</th>
                    <th scope="col" class="num" title="Sum of the members' nominal quotas">"Nominal"</th>
                    <th scope="col" class="num">"In use"</th>
                    <th scope="col" class="num" title="Used above the members' own nominal quotas">"Borrowed"</th>
                    <th scope="col" class="num" title="What members let peers borrow (nominal minus lending limits)">"Lendable"</th>
                    <th scope="col" class="num" title="Lendable quota no one uses">"Idle"</th>
                </tr></thead>
                <tbody>{pools}</tbody>
            </table></div>
        </section>
        <div class="queue-grid" data-testid="members">{members}</div>
    }
}

#[component]
fn MemberCard(m: CohortMember, cohort: String) -> impl IntoView {
    let borrowed: f64 = m.usage.iter().map(|u| u.borrowed).sum();
    let lent: f64 = m.usage.iter().map(|u| u.lent).sum();
    let share = match m.share {
        Some(s) => format!("{s:.0} %"),
        None => "∞".into(),
    };
    let (role, tone) = match (borrowed > 0.0, lent > 0.0) {
        (true, _) => ("borrowing", "borrowing"),
        (false, true) => ("lending", "lending"),
        _ => ("within its nominal", "muted"),
    };
    let bars = m
        .usage
        .iter()
        .map(|u| view! { <QuotaBar label=format!("{} · {}", u.flavor, u.resource) u=u.clone() cohort=Some(cohort.clone())/> })
        .collect_view();
    let limits = m
        .usage
        .iter()
        .filter(|u| u.borrowing_limit.is_some() || u.lendable != u.nominal)
        .map(|u| {
            let lend = u.lendable.map_or("all unused".into(), amount);
            let borrow = u.borrowing_limit.map_or("no limit".into(), amount);
            format!("{} · {}: lends {lend}, may borrow {borrow}", u.flavor, u.resource)
        })
        .collect::<Vec<_>>();
    view! {
        <article class="card queue-card" data-testid="member" data-queue=m.queue.clone()>
            <div class="queue-card-head">
                <h2><a href=format!("/queues/{}", m.queue)>{m.queue.clone()}</a></h2>
                <span class=format!("badge {tone}") data-testid="member-role">{role}</span>
            </div>
            <dl class="counts">
                <div><dt>"pending"</dt><dd>{m.pending_count}</dd></div>
                <div><dt>"running"</dt><dd>{m.running_count}</dd></div>
                <div><dt>"borrowed"</dt><dd data-testid="member-borrowed">{amount(borrowed)}</dd></div>
                <div><dt>"lent"</dt><dd data-testid="member-lent">{amount(lent)}</dd></div>
                <div><dt title=format!("Dominant share of what it borrows, divided by its weight ({})", amount(m.weight))>"share"</dt><dd data-testid="member-share">{share}</dd></div>
            </dl>
            <div class="usage-list">{bars}</div>
            <p class="hint">{limits.join("; ")}{(m.weight != 1.0).then(|| format!(" · fair-sharing weight {}", amount(m.weight)))}</p>
        </article>
    }
}
