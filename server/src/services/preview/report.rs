//! Step 3 of a preview: two replays of the same workload turned into the side-by-side report.
//!
//! Per queue: jobs, admissions, rejections with their reasons, clamps, preemptions and wait
//! percentiles; per quota cell: usage over time in buckets; per job: whether its fate
//! changed; and the fidelity of the active side against the record.

use std::collections::{BTreeMap, HashMap};

use app::preview::{ChangeKind, FateChange, Fidelity, KindCount, LenderCount, QueueImpact, QueueStats, ReasonCount, UsageImpact, MAX_CHANGES};

use crate::engine::sim::{JobRecord, Report, UsageSeries};
use crate::engine::{Compiled, Milli, Name};

use super::load::Workload;
use super::window::Span;

/// One side's tally of a queue: stats, waits, rejection reasons.
type Tally = (QueueStats, Vec<i64>, BTreeMap<String, u64>);
/// A quota cell's series on each side.
type Sides<'a> = (Option<&'a UsageSeries>, Option<&'a UsageSeries>);

/// Buckets of a usage series over the window.
pub const USAGE_BUCKETS: usize = 48;

/// A wait change smaller than this is noise, not a change of fate.
const WAIT_CHANGE_MS: i64 = 60_000;

fn secs(ms: i64) -> f64 {
    ms as f64 / 1000.0
}

/// A job's wait to its last admission, or (never admitted) its wait so far at `end_ms`.
fn wait_ms(j: &JobRecord, end_ms: i64) -> Option<i64> {
    if j.rejected.is_some() {
        return None;
    }
    match (j.last_admitted_ms, j.withdrawn_ms) {
        (Some(a), _) => Some(a - j.arrived_ms),
        (None, Some(w)) => Some(w - j.arrived_ms),
        (None, None) => Some(end_ms.max(j.arrived_ms) - j.arrived_ms),
    }
}

/// Where a replay ends for censoring: its last event, and never before the window's end.
fn end_of(r: &Report, span: Span) -> i64 {
    r.end_ms.max(span.to_us / 1000)
}

/// Per queue, both sides, in config order (active's queues, then the draft's new ones, then
/// the jobs no rule matched).
pub fn queues(w: &Workload, a: &Report, d: &Report, ca: &Compiled, cd: &Compiled, span: Span) -> Vec<QueueImpact> {
    let mut names: Vec<Option<Name>> = ca.queues.iter().map(|q| Some(q.name.clone())).collect();
    for q in &cd.queues {
        if !names.iter().any(|n| n.as_deref() == Some(&*q.name)) {
            names.push(Some(q.name.clone()));
        }
    }
    let side = |r: &Report| {
        let end = end_of(r, span);
        let mut stats: HashMap<Option<Name>, Tally> = HashMap::new();
        // Per borrowing queue, its lenders; per lender, the jobs it lent to.
        let mut lenders: HashMap<Option<Name>, BTreeMap<Name, u64>> = HashMap::new();
        let mut lent: HashMap<Option<Name>, u64> = HashMap::new();
        for (j, rec) in r.jobs.iter().zip(&w.records) {
            if rec.running_at_start {
                continue;
            }
            let (s, waits, reasons) = stats.entry(j.queue.clone()).or_default();
            s.jobs += 1;
            if let Some(why) = &j.rejected {
                s.rejected += 1;
                *reasons.entry(why.clone()).or_default() += 1;
                continue;
            }
            if rec.requested_priority.is_some_and(|p| p != j.priority) {
                s.clamped += 1;
            }
            s.preempted += u64::from(j.preempted);
            if j.first_admitted_ms.is_some() {
                s.admitted += 1;
            } else if j.withdrawn_ms.is_none() {
                s.never_admitted += 1;
            }
            if j.withdrawn_ms.is_some() {
                s.withdrawn += 1;
            }
            if !j.lenders.is_empty() {
                s.borrowed += 1;
                for l in &j.lenders {
                    *lenders.entry(j.queue.clone()).or_default().entry(l.clone()).or_default() += 1;
                    *lent.entry(Some(l.clone())).or_default() += 1;
                }
            }
            waits.extend(wait_ms(j, end));
        }
        for (q, n) in lent {
            stats.entry(q).or_default().0.lent = n;
        }
        stats
            .into_iter()
            .map(|(q, (mut s, mut waits, reasons))| {
                s.lenders = lenders.remove(&q).unwrap_or_default().into_iter().map(|(queue, jobs)| LenderCount { queue: queue.to_string(), jobs }).collect();
                waits.sort_unstable();
                let pick = |p: f64| waits.get(((waits.len() as f64 * p).ceil() as usize).clamp(1, waits.len().max(1)) - 1).map(|&w| secs(w));
                s.wait_p50_s = pick(0.50);
                s.wait_p95_s = pick(0.95);
                s.wait_max_s = waits.last().map(|&w| secs(w));
                s.wait_mean_s = (!waits.is_empty()).then(|| secs(waits.iter().sum::<i64>()) / waits.len() as f64);
                let mut rejections: Vec<ReasonCount> = reasons.into_iter().map(|(reason, count)| ReasonCount { reason, count }).collect();
                rejections.sort_by(|x, y| y.count.cmp(&x.count).then(x.reason.cmp(&y.reason)));
                s.rejections = rejections;
                (q, s)
            })
            .collect::<HashMap<_, _>>()
    };
    let (mut sa, mut sd) = (side(a), side(d));
    if sa.contains_key(&None) || sd.contains_key(&None) {
        names.push(None);
    }
    // Queues only recorded jobs name (a queue neither config has) come last, by name.
    let mut extra: Vec<Option<Name>> = sa.keys().chain(sd.keys()).filter(|k| !names.contains(k)).cloned().collect();
    extra.sort();
    extra.dedup();
    names.extend(extra);
    names
        .into_iter()
        .map(|q| QueueImpact {
            in_active: q.as_ref().is_some_and(|n| ca.queue_ids.contains_key(n)),
            in_draft: q.as_ref().is_some_and(|n| cd.queue_ids.contains_key(n)),
            active: sa.remove(&q).unwrap_or_default(),
            draft: sd.remove(&q).unwrap_or_default(),
            queue: q.map(|n| n.to_string()),
        })
        .collect()
}

/// Usage per quota cell of either side, bucketed over the window.
pub fn usage(a: &Report, d: &Report, span: Span) -> (Vec<UsageImpact>, f64) {
    let (from, to) = (span.from_us / 1000, span.to_us / 1000);
    let step = ((to - from) as f64 / USAGE_BUCKETS as f64).max(1.0);
    let key = |s: &UsageSeries| (s.queue.clone(), s.flavor.clone(), s.resource.clone());
    let mut cells: Vec<(Name, Name, Name)> = Vec::new();
    let mut by_key: HashMap<(Name, Name, Name), Sides> = HashMap::new();
    for (side, r) in [(0, a), (1, d)] {
        for s in &r.usage {
            let k = key(s);
            let e = by_key.entry(k.clone()).or_insert_with(|| {
                cells.push(k);
                (None, None)
            });
            if side == 0 {
                e.0 = Some(s);
            } else {
                e.1 = Some(s);
            }
        }
    }
    let nominal = |s: Option<&UsageSeries>| s.and_then(|s| s.nominal).map(Milli::as_f64);
    let out = cells
        .into_iter()
        .filter_map(|k| {
            let (sa, sd) = by_key[&k];
            let (va, pa) = buckets(sa, from, to, step);
            let (vd, pd) = buckets(sd, from, to, step);
            let quota = nominal(sa).is_some() || nominal(sd).is_some();
            (quota || pa > 0.0 || pd > 0.0).then(|| UsageImpact {
                queue: k.0.to_string(),
                flavor: k.1.to_string(),
                resource: k.2.to_string(),
                active_nominal: nominal(sa),
                draft_nominal: nominal(sd),
                active: va,
                draft: vd,
                active_peak: pa,
                draft_peak: pd,
            })
        })
        .collect();
    (out, step / 1000.0)
}

/// Time-weighted average per bucket of `[from, to)`, and the peak, in units.
fn buckets(s: Option<&UsageSeries>, from: i64, to: i64, step: f64) -> (Vec<f64>, f64) {
    let mut area = vec![0f64; USAGE_BUCKETS];
    let mut peak = 0i64;
    let Some(s) = s else { return (area, 0.0) };
    for (i, &(t, v)) in s.points.iter().enumerate() {
        let end = s.points.get(i + 1).map_or(to, |p| p.0).min(to);
        let mut start = t.max(from);
        if end <= start || v.0 == 0 {
            continue;
        }
        peak = peak.max(v.0);
        while start < end {
            let b = (((start - from) as f64 / step) as usize).min(USAGE_BUCKETS - 1);
            let b_end = if b == USAGE_BUCKETS - 1 { to } else { from + ((b + 1) as f64 * step).ceil() as i64 };
            let upto = end.min(b_end.max(start + 1));
            area[b] += (upto - start) as f64 * v.0 as f64;
            start = upto;
        }
    }
    let avg = area.iter().map(|a| (a / step).round() / 1000.0).collect();
    (avg, peak as f64 / 1000.0)
}

/// One sentence for what happened to a job on one side.
fn fate(j: &JobRecord, end: i64) -> String {
    if let Some(why) = &j.rejected {
        return format!("rejected: {why}");
    }
    let q = j.queue.as_deref().unwrap_or("?");
    let pre = match j.preempted {
        0 => String::new(),
        1 => ", preempted once".into(),
        n => format!(", preempted {n} times"),
    };
    match (j.last_admitted_ms, j.withdrawn_ms) {
        (Some(a), _) => format!("admitted to {q} (priority {}) after {}{pre}", j.priority, human(a - j.arrived_ms)),
        (None, Some(w)) => format!("waited in {q} {} until cancelled", human(w - j.arrived_ms)),
        (None, None) => format!("never admitted in {q} (waited {} by the end)", human(end - j.arrived_ms)),
    }
}

/// `45 s`, `12 min`, `3.5 h`.
pub fn human(ms: i64) -> String {
    let s = ms as f64 / 1000.0;
    if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 7200.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

/// Which way a job's fate changed, if it did.
fn change(a: &JobRecord, d: &JobRecord, end_a: i64, end_d: i64) -> Option<ChangeKind> {
    use ChangeKind::*;
    match (&a.rejected, &d.rejected) {
        (None, Some(_)) => return Some(Rejected),
        (Some(_), None) => return Some(Accepted),
        (Some(_), Some(_)) => return None,
        (None, None) => {}
    }
    if a.queue != d.queue {
        return Some(Rerouted);
    }
    if a.priority != d.priority {
        return Some(Reprioritized);
    }
    match (a.first_admitted_ms.is_some(), d.first_admitted_ms.is_some()) {
        (true, false) if d.withdrawn_ms.is_none() => return Some(NeverAdmitted),
        (false, true) if a.withdrawn_ms.is_none() => return Some(Admitted),
        _ => {}
    }
    if d.preempted != a.preempted {
        return Some(if d.preempted > a.preempted { Preempted } else { Spared });
    }
    let (wa, wd) = (wait_ms(a, end_a)?, wait_ms(d, end_d)?);
    if wd - wa >= WAIT_CHANGE_MS && wd * 2 >= wa * 3 {
        return Some(Later);
    }
    if wa - wd >= WAIT_CHANGE_MS && wd * 3 <= wa * 2 {
        return Some(Sooner);
    }
    None
}

/// Jobs whose fate differs, the most significant first, with counts per kind.
pub fn changes(w: &Workload, a: &Report, d: &Report, span: Span) -> (Vec<KindCount>, Vec<FateChange>, bool) {
    let (end_a, end_d) = (end_of(a, span), end_of(d, span));
    let mut out: Vec<(ChangeKind, i64, FateChange)> = Vec::new();
    for ((ja, jd), rec) in a.jobs.iter().zip(&d.jobs).zip(&w.records) {
        if rec.running_at_start {
            continue;
        }
        let Some(kind) = change(ja, jd, end_a, end_d) else { continue };
        let (wa, wd) = (ja.last_admitted_ms.map(|t| t - ja.arrived_ms), jd.last_admitted_ms.map(|t| t - jd.arrived_ms));
        let delta = (wait_ms(jd, end_d).unwrap_or(0) - wait_ms(ja, end_a).unwrap_or(0)).abs();
        out.push((
            kind,
            delta,
            FateChange {
                job_id: ja.id.to_string(),
                name: rec.name.clone(),
                kind,
                active: fate(ja, end_a),
                draft: fate(jd, end_d),
                active_wait_s: wa.map(secs),
                draft_wait_s: wd.map(secs),
            },
        ));
    }
    let mut counts: BTreeMap<ChangeKind, u64> = BTreeMap::new();
    for (k, _, _) in &out {
        *counts.entry(*k).or_default() += 1;
    }
    out.sort_by(|x, y| x.0.rank().cmp(&y.0.rank()).then(y.1.cmp(&x.1)).then(x.2.job_id.cmp(&y.2.job_id)));
    let truncated = out.len() > MAX_CHANGES;
    out.truncate(MAX_CHANGES);
    let counts = counts.into_iter().map(|(kind, count)| KindCount { kind, count }).collect();
    (counts, out.into_iter().map(|c| c.2).collect(), truncated)
}

/// The active side against the record.
pub fn fidelity(w: &Workload, a: &Report, active_version: i64) -> Fidelity {
    let mut f = Fidelity::default();
    let (mut agree, mut outcomes) = (0u64, 0u64);
    let (mut err, mut actual, mut replayed) = (0i64, 0i64, 0i64);
    for (j, rec) in a.jobs.iter().zip(&w.records) {
        if rec.running_at_start {
            continue;
        }
        outcomes += 1;
        if rec.rejected == j.rejected.is_some() {
            agree += 1;
        }
        if rec.config_version.is_some_and(|v| v != active_version) {
            f.other_versions += 1;
        }
        if let (Some(real), Some(adm)) = (rec.wait_ms, j.last_admitted_ms) {
            let sim = adm - j.arrived_ms;
            f.compared += 1;
            err += (sim - real).abs();
            actual += real;
            replayed += sim;
        }
    }
    let n = f.compared as f64;
    if f.compared > 0 {
        f.wait_mae_s = Some(secs(err) / n);
        f.actual_wait_mean_s = Some(secs(actual) / n);
        f.replayed_wait_mean_s = Some(secs(replayed) / n);
    }
    f.outcome_agreement = (outcomes > 0).then(|| agree as f64 / outcomes as f64);
    f
}
