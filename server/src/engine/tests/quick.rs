//! Quick cycles on the admission loop's everyday shapes: which cuts are exact, and the
//! `no_room` flag they rest on.

use super::fixtures::*;
use crate::engine::quick::{exact, Cut};
use crate::engine::*;

/// One best_effort (or strict) fifo queue `q` of `quota` CPUs on a 64-CPU node.
fn one_queue(quota: i64, strict: bool) -> (Compiled, Vec<Node>) {
    let mut q = queue("q").group(&["cpu"], &[("local", &[("cpu", quota)])]);
    if strict {
        q = q.strict();
    }
    (config().flavor("local", &[]).queue(q).compile(), vec![node("n").cap(&[("cpu", 64)])])
}

fn jobs(prefix: &str, n: usize, cpu: i64, from_ms: i64) -> Vec<PendingJob> {
    (0..n).map(|i| pending(&format!("{prefix}{i:03}"), "q").req(&[("cpu", cpu)]).at(from_ms + i as i64)).collect()
}

/// The first `k` jobs offered (they are built in queue order), the rest cut.
fn cut(pending: &[PendingJob], k: usize, strict: bool) -> Cut<'_> {
    Cut {
        strict,
        offered: pending[..k].iter().map(|p| (&*p.id, &p.request)).collect(),
        firsts: Vec::new(),
        rest: pending[k..].iter().map(|p| p.request.clone()).collect(),
    }
}

fn plan_of(config: &Compiled, nodes: &[Node], running: &[RunningJob], pending: &[PendingJob]) -> Plan {
    schedule(&Snapshot { now_ms: 0, config, nodes, running, pending, limits: &[] })
}

fn runner(id: &str, cpu: i64) -> RunningJob {
    running(id, "q").req(&[("cpu", cpu)]).on("local", "n")
}

#[test]
fn a_full_queue_of_like_jobs_needs_only_its_head() {
    let (config, nodes) = one_queue(2, false);
    let pending = jobs("p", 40, 1, 0);
    // One slot of two free: the head is admitted, the next offered job finds no room, and
    // every job left out asks as much.
    let running = [runner("r", 1)];
    let quick = plan_of(&config, &nodes, &running, &pending[..8]);
    assert_eq!(quick.admissions.len(), 1);
    assert_eq!(&*quick.admissions[0].job, "p000");
    assert!(quick.pending.iter().all(|p| p.no_room), "{:#?}", quick.pending);
    assert!(exact(&[cut(&pending, 8, false)], &quick));
    assert_eq!(quick.admissions, plan_of(&config, &nodes, &running, &pending).admissions);
}

/// 40 jobs that cannot fit while `r` (1 CPU of 2) runs, then one that can, and `r`.
fn bigs_then_small() -> (Vec<PendingJob>, [RunningJob; 1]) {
    let mut pending = jobs("big", 40, 2, 0);
    pending.extend(jobs("small", 1, 1, 100));
    (pending, [runner("r", 1)])
}

#[test]
fn a_smaller_job_left_out_calls_for_the_full_cycle() {
    let (config, nodes) = one_queue(2, false);
    let (pending, running) = bigs_then_small();
    let quick = plan_of(&config, &nodes, &running, &pending[..8]);
    assert!(quick.admissions.is_empty());
    assert!(!exact(&[cut(&pending, 8, false)], &quick));
    let full = plan_of(&config, &nodes, &running, &pending);
    assert_eq!(full.admissions.iter().map(|a| &*a.job).collect::<Vec<_>>(), ["small000"]);
}

#[test]
fn a_blocked_strict_queue_blocks_whatever_is_left_out() {
    let (config, nodes) = one_queue(2, true);
    let (pending, running) = bigs_then_small();
    let quick = plan_of(&config, &nodes, &running, &pending[..8]);
    assert!(quick.pending.iter().all(|p| p.no_room));
    assert!(exact(&[cut(&pending, 8, true)], &quick));
    assert!(plan_of(&config, &nodes, &running, &pending).admissions.is_empty());
}

#[test]
fn a_queue_that_admits_all_it_was_offered_is_not_cut_short() {
    let (config, nodes) = one_queue(32, false);
    let pending = jobs("p", 40, 1, 0);
    let quick = plan_of(&config, &nodes, &[], &pending[..8]);
    assert_eq!(quick.admissions.len(), 8);
    assert!(!exact(&[cut(&pending, 8, false)], &quick), "the jobs left out may fit too");
}

#[test]
fn a_preemption_before_the_heads_miss_keeps_the_cut_exact() {
    let q = queue("q").group(&["cpu"], &[("local", &[("cpu", 2)])]).preemption(app::config::WithinQueuePreemption::LowerPriority);
    let config = config().flavor("local", &[]).queue(q).compile();
    let nodes = vec![node("n").cap(&[("cpu", 64)])];
    let running = [runner("low", 2)];
    let mut pending = vec![pending("urgent", "q").prio(5).req(&[("cpu", 2)])];
    pending.extend(jobs("p", 40, 2, 0));
    let quick = plan_of(&config, &nodes, &running, &pending[..8]);
    assert_eq!(quick.preemptions.len(), 1);
    // urgent preempts first; then p000 finds the quota taken, and so would every job after it.
    assert!(exact(&[cut(&pending, 8, false)], &quick));
    let full = plan_of(&config, &nodes, &running, &pending);
    assert_eq!((&quick.admissions, &quick.preemptions), (&full.admissions, &full.preemptions));
}

#[test]
fn a_preemption_after_the_heads_miss_calls_for_the_full_cycle() {
    // Two queues on one 4-CPU node. q's head misses (the node is full); then a job of q2
    // preempts q2's only runner, and its release leaves room that q's next job would take.
    let lower = app::config::WithinQueuePreemption::LowerPriority;
    let config = config()
        .flavor("local", &[])
        .queue(queue("q").group(&["cpu"], &[("local", &[("cpu", 4)])]))
        .queue(queue("q2").group(&["cpu"], &[("local", &[("cpu", 4)])]).preemption(lower))
        .compile();
    let nodes = vec![node("n").cap(&[("cpu", 4)])];
    let running = [running("filler", "q2").req(&[("cpu", 4)]).on("local", "n")];
    // One priority: the jobs go by time, so q2's job comes between q's first two.
    let at = |id: &str, queue: &str, cpu: i64, ms: i64| super::fixtures::pending(id, queue).prio(5).req(&[("cpu", cpu)]).at(ms);
    let pending = vec![at("p000", "q", 2, 0), at("p001", "q", 2, 20), at("p002", "q", 2, 21), at("small", "q2", 1, 10)];
    let full = plan_of(&config, &nodes, &running, &pending);
    assert_eq!(full.preemptions.len(), 1);
    assert!(full.admission("p001").is_some(), "{full:#?}");
    let offered: Vec<PendingJob> = vec![pending[0].clone(), pending[3].clone()];
    let quick = plan_of(&config, &nodes, &running, &offered);
    assert_eq!(quick.preemptions.len(), 1);
    assert!(quick.pending_info("p000").is_some(), "{quick:#?}");
    let cut = Cut { strict: false, offered: vec![(&*pending[0].id, &pending[0].request)], firsts: Vec::new(), rest: vec![pending[1].request.clone(), pending[2].request.clone()] };
    assert!(!exact(&[cut], &quick));
}

#[test]
fn only_jobs_that_found_no_room_say_so() {
    let (config, nodes) = one_queue(2, false);
    // Asks for a resource the queue does not cover: it waits, but not for room.
    let pending = vec![
        pending("gpu", "q").req(&[("cpu", 1), ("gpu", 1)]),
        pending("fits", "q").req(&[("cpu", 2)]).at(1),
        pending("late", "q").req(&[("cpu", 1)]).at(2),
        pending("lost", "ghost").req(&[("cpu", 1)]),
    ];
    let plan = plan_of(&config, &nodes, &[], &pending);
    let flags: Vec<(&str, bool)> = plan.pending.iter().map(|p| (&*p.job, p.no_room)).collect();
    assert_eq!(flags, [("lost", false), ("gpu", false), ("late", true)]);
}

#[test]
fn covers_compares_every_resource() {
    let r = |pairs: &[(&str, i64)]| Resources::units(pairs);
    assert!(r(&[("cpu", 2), ("gpu", 1)]).covers(&r(&[("cpu", 1)])));
    assert!(r(&[("cpu", 1)]).covers(&r(&[("cpu", 1)])));
    assert!(!r(&[("cpu", 1)]).covers(&r(&[("cpu", 2)])));
    assert!(!r(&[("cpu", 4)]).covers(&r(&[("cpu", 1), ("gpu", 1)])));
    assert!(r(&[("a", 1), ("cpu", 1), ("gpu", 1)]).covers(&r(&[("gpu", 1)])));
    assert!(r(&[]).covers(&r(&[])));
    assert!(!r(&[]).covers(&r(&[("cpu", 1)])));
}
