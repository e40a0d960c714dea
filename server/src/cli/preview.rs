//! `berth config preview`: the impact report as tables a person reads in a terminal.
//!
//! Each figure is `active → draft`, or one number when both sides agree.

use app::preview::{PreviewReport, QueueImpact};

/// `12 s`, `40 min`, `1.9 h`, `-` for none.
fn dur(s: Option<f64>) -> String {
    match s {
        None => "-".into(),
        Some(s) if s < 120.0 => format!("{s:.0} s"),
        Some(s) if s < 7200.0 => format!("{:.0} min", s / 60.0),
        Some(s) => format!("{:.1} h", s / 3600.0),
    }
}

/// `a → b`, or `a` when equal.
fn pair<T: PartialEq + std::fmt::Display>(a: T, b: T) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("{a} → {b}")
    }
}

fn queue_name(q: &QueueImpact) -> String {
    match (&q.queue, q.in_active, q.in_draft) {
        (None, _, _) => "(no rule)".into(),
        (Some(n), true, false) => format!("{n} (removed)"),
        (Some(n), false, true) => format!("{n} (new)"),
        (Some(n), _, _) => n.clone(),
    }
}

/// Prints the report; at most `max_changes` changed jobs.
pub fn print(r: &PreviewReport, max_changes: usize) {
    let draft = if r.identical { "draft (identical to the active config)" } else { "draft" };
    println!(
        "{draft} vs active config version {}: jobs submitted {} to {} UTC",
        r.active_version,
        r.from.format("%Y-%m-%d %H:%M"),
        r.to.format("%Y-%m-%d %H:%M")
    );
    println!(
        "{} jobs replayed; {} running and {} waiting at the start; {} runtimes estimated; {} ms",
        r.jobs, r.running_at_start, r.pending_at_start, r.estimated_runtimes, r.elapsed_ms
    );
    println!();
    println!(
        "{:<20} {:>9} {:>11} {:>9} {:>9} {:>9} {:>15} {:>15} {:>15}",
        "QUEUE", "JOBS", "ADMITTED", "REJECTED", "CLAMPED", "PREEMPTED", "WAIT P50", "WAIT P95", "WAIT MAX"
    );
    for q in &r.queues {
        let (a, d) = (&q.active, &q.draft);
        println!(
            "{:<20} {:>9} {:>11} {:>9} {:>9} {:>9} {:>15} {:>15} {:>15}",
            queue_name(q),
            pair(a.jobs, d.jobs),
            pair(a.admitted, d.admitted),
            pair(a.rejected, d.rejected),
            pair(a.clamped, d.clamped),
            pair(a.preempted, d.preempted),
            pair(dur(a.wait_p50_s), dur(d.wait_p50_s)),
            pair(dur(a.wait_p95_s), dur(d.wait_p95_s)),
            pair(dur(a.wait_max_s), dur(d.wait_max_s)),
        );
        if a.rejections != d.rejections {
            for (side, stats) in [("active", a), ("draft", d)] {
                for why in &stats.rejections {
                    println!("{:<20}   rejected under the {side}: {} × {}", "", why.count, why.reason);
                }
            }
        }
        for (side, stats) in [("active", a), ("draft", d)] {
            if let Some(cohort) = stats.cohort_summary() {
                println!("{:<20}   under the {side}: {cohort}", "");
            }
        }
        if d.never_admitted > a.never_admitted {
            println!("{:<20}   never admitted under the draft: {} (active: {})", "", d.never_admitted, a.never_admitted);
        }
    }
    print_usage(r);
    print_changes(r, max_changes);
    print_now(r);
    print_fidelity(r);
}

/// Quota cells whose quota or peak use differs.
fn print_usage(r: &PreviewReport) {
    let over: Vec<String> = r
        .usage
        .iter()
        .filter(|u| u.active_nominal != u.draft_nominal || u.active_peak != u.draft_peak)
        .map(|u| {
            let quota = |n: Option<f64>| n.map_or("unlimited".into(), |n| format!("{n}"));
            format!(
                "  {}/{}/{}: quota {}, peak use {}",
                u.queue,
                u.flavor,
                u.resource,
                pair(quota(u.active_nominal), quota(u.draft_nominal)),
                pair(u.active_peak, u.draft_peak)
            )
        })
        .collect();
    if !over.is_empty() {
        println!();
        println!("USAGE that differs (queue/flavor/resource)");
        over.iter().for_each(|l| println!("{l}"));
    }
}

/// Jobs whose outcome changes, up to `max_changes` of them.
fn print_changes(r: &PreviewReport, max_changes: usize) {
    println!();
    let total: u64 = r.change_counts.iter().map(|c| c.count).sum();
    if total == 0 {
        println!("CHANGED JOBS: none");
    } else {
        let kinds: Vec<String> = r.change_counts.iter().map(|c| format!("{} {}", c.count, c.kind.label())).collect();
        println!("CHANGED JOBS ({total}: {})", kinds.join(", "));
        println!("{:<24} {:<20} ACTIVE → DRAFT", "KIND", "JOB");
        for c in r.changes.iter().take(max_changes) {
            println!("{:<24} {:<20} {} → {}", c.kind.label(), c.job_id, c.active, c.draft);
        }
        let listed = r.changes.len().min(max_changes) as u64;
        if total > listed {
            println!("… and {} more (-o json lists up to {})", total - listed, app::preview::MAX_CHANGES);
        }
    }
}

/// What the first cycle under the draft would do to the jobs of now.
fn print_now(r: &PreviewReport) {
    let now = &r.now;
    println!();
    println!(
        "NOW ({} running, {} waiting): the first cycle would admit {}",
        now.running,
        now.pending,
        pair(now.would_admit_active, now.would_admit)
    );
    for o in &now.over_quota {
        println!("  over the draft's quota: {}/{}/{} uses {} of {} ({}): {}", o.queue, o.flavor, o.resource, o.used, o.draft_nominal, o.jobs.join(", "), o.consequence);
    }
    for p in &now.preempted {
        println!("  would be preempted at once: {} (queue {}, priority {}) for {}", p.job_id, p.queue, p.priority, p.preemptor);
    }
    for j in &now.rerouted {
        println!("  {}: {}", j.job_id, j.what);
    }
    if now.over_quota.is_empty() && now.preempted.is_empty() && now.rerouted.is_empty() {
        println!("  no running job is over quota, preempted or routed differently under the draft");
    }
}

/// How well the active replay matches the record, and notes.
fn print_fidelity(r: &PreviewReport) {
    let f = &r.fidelity;
    println!();
    println!(
        "FIDELITY of the active replay vs the record: {} jobs compared, wait error {} on average (recorded mean {}, replayed {}); \
         outcomes agree for {}; {} recorded under another config version",
        f.compared,
        dur(f.wait_mae_s),
        dur(f.actual_wait_mean_s),
        dur(f.replayed_wait_mean_s),
        f.outcome_agreement.map_or("-".into(), |a| format!("{:.1} %", a * 100.0)),
        f.other_versions
    );
    for n in &r.notes {
        println!("note: {n}");
    }
}
