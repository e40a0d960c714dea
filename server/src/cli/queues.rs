//! `berth queues [NAME]`, `berth cohorts [NAME]` and `berth nodes`: quota use per queue and
//! per cohort, and each node's free capacity.

use anyhow::Result;
use app::jobs::{CohortView, NodeView, QueueView};

use crate::cli::client::encode;
use crate::cli::jobs::{ago, finish, short_reason, show};
use crate::cli::{Cli, Output};

/// `berth queues [NAME]`; with a name, its pending jobs say why they wait in one line, or in
/// full with `full_reason`.
pub async fn run_queues(cli: &Cli, name: Option<&str>, full_reason: bool, output: Output) -> Result<i32> {
    let client = cli.client();
    let outcome = match name {
        None => client.get_json::<serde_json::Value>("/api/v1/queues", &[]).await.map(|v| {
            let queues: Vec<QueueView> = serde_json::from_value(v["queues"].clone()).unwrap_or_default();
            show(output, &queues, |queues| print_queues(queues))
        }),
        Some(n) => client.get_json::<QueueView>(&format!("/api/v1/queues/{}", encode(n)), &[]).await.map(|q| show(output, &q, |q| {
                print_queues(std::slice::from_ref(q));
                println!("\npending (admission order):");
                for p in &q.pending {
                    let pos = if p.position > 0 { format!("#{}", p.position) } else { "-".into() };
                    let reason = match full_reason {
                        true => p.reason.as_str(),
                        false => short_reason(p.reason_headline.as_deref(), Some(&p.reason)),
                    };
                    println!("  {pos:>5}  {:<18}  prio {:>4}  waiting {:>5}  {reason}", p.id, p.priority, ago(p.enqueued_at));
                }
                println!("running:");
                for r in &q.running {
                    let flavors: Vec<&str> = r.flavors.iter().map(|f| f.flavor.as_str()).collect();
                    println!("  {:<18}  prio {:>4}  {:<10} on {} ({})", r.id, r.priority, r.state.as_str(), r.node, flavors.join(","));
                }
            })),
    };
    Ok(finish(outcome))
}

fn print_queues(queues: &[QueueView]) {
    println!(
        "{:<16}  {:<12}  {:>7}  {:>7}  {:>9}  USAGE (used/nominal per flavor.resource; in a cohort: +borrowed, lent)",
        "QUEUE", "COHORT", "PENDING", "RUNNING", "LONGEST"
    );
    for q in queues {
        let usage: Vec<String> = q
            .usage
            .iter()
            .map(|u| {
                let mut cell = format!("{}.{}={}/{}", u.flavor, u.resource, u.used, amount(u.nominal));
                if q.cohort.is_some() && (u.borrowed > 0.0 || u.lent > 0.0) {
                    cell.push_str(&format!(" (+{} borrowed, {} lent)", u.borrowed, u.lent));
                }
                cell
            })
            .collect();
        let longest = q.longest_wait_s.map_or("-".into(), |s| format!("{s:.0}s"));
        let cohort = q.cohort.as_deref().unwrap_or("-");
        println!("{:<16}  {:<12}  {:>7}  {:>7}  {:>9}  {}", q.name, cohort, q.pending_count, q.running_count, longest, usage.join(" "));
    }
}

/// `berth cohorts [NAME]`: each cohort's pooled quota; with a name, also its members.
pub async fn run_cohorts(cli: &Cli, name: Option<&str>, output: Output) -> Result<i32> {
    let client = cli.client();
    let outcome = match name {
        None => client.get_json::<serde_json::Value>("/api/v1/cohorts", &[]).await.map(|v| {
            let cohorts: Vec<CohortView> = serde_json::from_value(v["cohorts"].clone()).unwrap_or_default();
            show(output, &cohorts, |cohorts| {
                if cohorts.is_empty() {
                    println!("no cohorts: no queue of the active config has a cohort_name");
                    return;
                }
                println!("{:<16}  {:<40}  POOL (used/nominal per flavor.resource: borrowed, idle of lendable)", "COHORT", "MEMBERS");
                for c in cohorts {
                    let members: Vec<&str> = c.members.iter().map(|m| m.queue.as_str()).collect();
                    println!("{:<16}  {:<40}  {}", c.name, members.join(","), pool_cells(c));
                }
            })
        }),
        Some(n) => client.get_json::<CohortView>(&format!("/api/v1/cohorts/{}", encode(n)), &[]).await.map(|c| {
            show(output, &c, |c| {
                let sharing = if c.fair_sharing { "on: borrowers are ordered by weighted share" } else { "off" };
                println!("cohort {}: fair sharing {sharing}", c.name);
                println!("pool: {}\n", pool_cells(c));
                println!("{:<16}  {:>7}  {:>7}  {:>6}  {:>6}  USAGE (used/nominal per flavor.resource: +borrowed, lent)", "QUEUE", "PENDING", "RUNNING", "WEIGHT", "SHARE");
                for m in &c.members {
                    let usage: Vec<String> = m
                        .usage
                        .iter()
                        .map(|u| format!("{}.{}={}/{} (+{} borrowed, {} lent)", u.flavor, u.resource, u.used, amount(u.nominal), u.borrowed, u.lent))
                        .collect();
                    let share = m.share.map_or("-".into(), |s| format!("{s:.0}%"));
                    println!("{:<16}  {:>7}  {:>7}  {:>6}  {:>6}  {}", m.queue, m.pending_count, m.running_count, m.weight, share, usage.join(" "));
                }
            })
        }),
    };
    Ok(finish(outcome))
}

/// A cohort's pools, one cell per flavor × resource.
fn pool_cells(c: &CohortView) -> String {
    let cells: Vec<String> = c
        .pools
        .iter()
        .map(|p| format!("{}.{}={}/{} ({} borrowed, {} idle of {})", p.flavor, p.resource, p.used, amount(p.nominal), p.borrowed, amount(p.idle), amount(p.lendable)))
        .collect();
    cells.join(" ")
}

/// A quota or pool amount; `None` is unlimited.
fn amount(x: Option<f64>) -> String {
    x.map_or("∞".into(), |x| x.to_string())
}

/// `berth nodes`.
pub async fn run_nodes(cli: &Cli, output: Output) -> Result<i32> {
    let outcome = cli.client().get_json::<serde_json::Value>("/api/v1/nodes", &[]).await.map(|v| {
        let nodes: Vec<NodeView> = serde_json::from_value(v["nodes"].clone()).unwrap_or_default();
        show(output, &nodes, |nodes| {
                println!("{:<20}  {:<8}  {:<24}  FREE / CAPACITY", "NODE", "BACKEND", "FLAVORS");
                for n in nodes.iter() {
                    let cap: Vec<String> = n
                        .capacity
                        .iter()
                        .map(|(k, c)| {
                            let outside = n.used_outside.get(k).map_or(String::new(), |o| format!(" ({o} used outside Berth)"));
                            format!("{k}={}/{c}{outside}", n.free.get(k).copied().unwrap_or(0.0))
                        })
                        .collect();
                    println!("{:<20}  {:<8}  {:<24}  {}", n.id, n.backend, n.flavors.join(","), cap.join(" "));
                }
            })
    });
    Ok(finish(outcome))
}
