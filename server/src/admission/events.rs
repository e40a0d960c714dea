//! The events a cohort adds to a cycle: a preemption that says whether it was within the
//! queue, a reclaim or a borrow (naming lender and borrower), the lender's `reclaimed`, and
//! an admission's `borrowed`.

use engine::{Admission, Cause, Preemption, Victim};
use serde_json::json;

use super::*;

/// The `preempted` event of victim `v` (its live job `live`) of preemption `p`, given the
/// preemptor's name and priority and the victims' priorities. The message names the
/// preemptor by its name (pages show its id beside it, from the detail).
pub(super) fn preempted(now: i64, p: &Preemption, v: &Victim, live: &Live, preemptor: (&str, i64, &[i64]), cohort: Option<&Name>) -> NewEvent {
    let (preemptor_name, preemptor_priority, victims) = preemptor;
    let (by, prio) = (said_name(preemptor_name, &p.preemptor), live.row.priority);
    let cohort_name = cohort.map_or("", |c| &**c);
    let message = match v.cause {
        Cause::WithinQueue => format!("preempted by {by} (priority {preemptor_priority} > {prio})"),
        Cause::Reclaim => format!("preempted by {by}: queue {} reclaims its quota from {} in cohort {cohort_name}", p.queue, v.queue),
        Cause::Borrow => format!(
            "preempted by {by} (priority {preemptor_priority} > {prio}): queue {} borrows what {} was borrowing in cohort {cohort_name}",
            p.queue, v.queue
        ),
    };
    let mut e = job_event(now, "preempted", live, message);
    let mut detail = json!({
        "preemptor": &*p.preemptor,
        "preemptor_name": preemptor_name,
        "preemptor_priority": preemptor_priority,
        "queue": &*p.queue,
        "cause": v.cause.as_str(),
        "victims": p.victims.iter().zip(victims).map(|(v, prio)| json!({"job_id": &*v.job, "priority": prio, "queue": &*v.queue, "cause": v.cause.as_str()})).collect::<Vec<_>>(),
    });
    if v.cause != Cause::WithinQueue {
        detail["cohort"] = json!(cohort_name);
        detail["lender"] = json!(&*p.queue);
        detail["borrower"] = json!(&*v.queue);
    }
    e.detail = Some(detail);
    e
}

/// A job as a message names it: its name, or its id when it has none.
pub(super) fn said_name<'a>(name: &'a str, id: &'a str) -> &'a str {
    match name.trim().is_empty() {
        true => id,
        false => name,
    }
}

/// The preemptor's `reclaimed` event, when some of its victims were borrowing its quota.
pub(super) fn reclaimed(now: i64, p: &Preemption, preemptor: &Live, cohort: Option<&Name>) -> Option<NewEvent> {
    let taken: Vec<&Victim> = p.victims.iter().filter(|v| v.cause != Cause::WithinQueue).collect();
    if taken.is_empty() {
        return None;
    }
    let mut borrowers: Vec<&str> = taken.iter().map(|v| &*v.queue).collect();
    borrowers.dedup();
    let jobs: Vec<&str> = taken.iter().map(|v| &*v.job).collect();
    let cohort = cohort.map_or("", |c| &**c);
    let verb = if taken.iter().all(|v| v.cause == Cause::Borrow) { "borrows back" } else { "reclaims" };
    let message = format!("queue {} {verb} quota from {} in cohort {cohort}: preempts {}", p.queue, borrowers.join(", "), jobs.join(", "));
    let mut e = job_event(now, "reclaimed", preemptor, message);
    e.detail = Some(json!({
        "cohort": cohort,
        "lender": &*p.queue,
        "borrowers": borrowers,
        "victims": taken.iter().map(|v| json!({"job_id": &*v.job, "queue": &*v.queue, "cause": v.cause.as_str()})).collect::<Vec<_>>(),
    }));
    Some(e)
}

/// An admission's `borrowed` event: what it takes above its queue's nominal quota.
pub(super) fn borrowed(now: i64, a: &Admission, live: &Live) -> Option<NewEvent> {
    let cohort = &a.borrowed.first()?.cohort;
    let what: Vec<String> = a.borrowed.iter().map(|b| format!("{} {} of flavor {}", b.resource, b.amount, b.flavor)).collect();
    let mut lenders: Vec<&str> = a.borrowed.iter().flat_map(|b| b.lenders.iter().map(|(q, _)| &**q)).collect();
    lenders.sort_unstable();
    lenders.dedup();
    let by = if lenders.is_empty() { String::new() } else { format!(" (lent by {})", lenders.join(", ")) };
    let mut e = job_event(now, "borrowed", live, format!("borrows {} from cohort {cohort}{by}", what.join(", ")));
    e.detail = Some(json!({
        "cohort": &**cohort,
        "borrowed": a.borrowed.iter().map(|b| json!({
            "flavor": &*b.flavor,
            "resource": &*b.resource,
            "amount": b.amount.as_f64(),
            "lenders": b.lenders.iter().map(|(q, m)| json!({"queue": &**q, "amount": m.as_f64()})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    }));
    Some(e)
}
