//! Kueue's own cohort, borrowing, lending-limit and reclaim cases, ported as facts.
//!
//! From `pkg/scheduler/preemption/preemption_test.go` (`TestPreemption`, its cluster
//! queues `standalone`, `c1`/`c2`, `d1`/`d2`, `l1`, the `with_shared_cq` cohort, `lend1`/
//! `lend2` and `a`/`b`/`c`) and `pkg/scheduler/scheduler_test.go` (`TestSchedule`: `eng-alpha`,
//! `eng-beta`, `lend-a`, `lend-b` and cases' own queues) of kubernetes-sigs/kueue: the
//! queues, the admitted and the incoming workloads, and which workloads are admitted and
//! preempted with which reason (`InClusterQueue` = [`Cause::WithinQueue`],
//! `InCohortReclamation` = [`Cause::Reclaim`], `InCohortReclaimWhileBorrowing` =
//! [`Cause::Borrow`]). A pod set of N pods of 1 CPU is one job of N CPUs here; `3Gi` is
//! `memory_gb: 3`; one node big enough for everything, so quota alone decides, as in
//! Kueue's tests. Kueue's preemption tests hand the preemptor a flavor assignment in
//! `Preempt` mode; Berth assigns flavors itself, which changes nothing in these cases but
//! two (noted). Where Berth's answer differs from Kueue's by design, `differs` says why.

use super::fixtures::*;
use crate::engine::*;

use CohortPreemption as C;
use Cause::{Borrow, Reclaim, WithinQueue as Own};

/// One ported case: the world, who is admitted (job, flavor) and who is preempted.
struct K {
    name: &'static str,
    config: Compiled,
    running: Vec<RunningJob>,
    pending: Vec<PendingJob>,
    admitted: &'static [(&'static str, &'static str)],
    victims: &'static [(&'static str, Cause)],
    /// Why Berth's answer is not Kueue's, when it is not.
    differs: Option<&'static str>,
}

fn check(cases: Vec<K>) {
    let nodes = vec![node("n").cap(&[("cpu", 1000), ("memory_gb", 1000), ("gpu", 1000), ("r1", 1000), ("r2", 1000)])];
    let mut failed = Vec::new();
    for c in &cases {
        let plan = schedule(&Snapshot { now_ms: 1_000, config: &c.config, nodes: &nodes, running: &c.running, pending: &c.pending, limits: &[] });
        let mut admitted: Vec<(String, String)> =
            plan.admissions.iter().map(|a| (a.job.to_string(), a.flavors.first().map_or(String::new(), |f| f.flavor.to_string()))).collect();
        let mut victims: Vec<(String, Cause)> = plan.preemptions.iter().flat_map(|p| p.victims.iter().map(|v| (v.job.to_string(), v.cause))).collect();
        admitted.sort();
        victims.sort_by(|a, b| a.0.cmp(&b.0));
        let mut want_a: Vec<(String, String)> = c.admitted.iter().map(|(j, f)| (j.to_string(), f.to_string())).collect();
        let mut want_v: Vec<(String, Cause)> = c.victims.iter().map(|(j, cause)| (j.to_string(), *cause)).collect();
        want_a.sort();
        want_v.sort_by(|a, b| a.0.cmp(&b.0));
        assert!(c.differs.is_none_or(|d| !d.is_empty()));
        if admitted != want_a || victims != want_v {
            failed.push(format!(
                "{}:\n  admitted {admitted:?}, want {want_a:?}\n  victims {victims:?}, want {want_v:?}\n  waiting {:#?}",
                c.name, plan.pending
            ));
        }
    }
    assert!(failed.is_empty(), "{} of {} Kueue cases failed:\n{}", failed.len(), cases.len(), failed.join("\n"));
}

/// A running job of `cpu` CPUs (and `mem` GB) of priority `prio` under flavor `flavor`.
fn adm(id: &str, queue: &str, prio: i64, amounts: &[(&str, i64)], flavor: &str) -> RunningJob {
    running(id, queue).prio(prio).req(amounts).on(flavor, "n")
}

fn incoming(queue: &str, prio: i64, amounts: &[(&str, i64)]) -> Vec<PendingJob> {
    vec![pending("in", queue).prio(prio).req(amounts)]
}

/// `queue` with one group over `resources`, under flavor `default`, with (nominal,
/// borrowing limit, lending limit) per resource.
fn cq(name: &str, cohort: Option<&str>, quotas: &[(&str, i64, Option<i64>, Option<i64>)]) -> QueueB {
    let covered: Vec<&str> = quotas.iter().map(|q| q.0).collect();
    let mut q = queue(name).group_f(&covered, &[("default", quotas.iter().map(|&(r, n, _, _)| (r, Some(n as f64))).collect())]);
    if let Some(c) = cohort {
        q = q.cohort(c);
        for &(r, _, borrow, lend) in quotas {
            q = q.limits("default", r, lend.map(|l| l as f64), borrow.map(|b| b as f64));
        }
    }
    q
}

/// The cluster queues of Kueue's `TestPreemption`.
fn preemption_cqs() -> Compiled {
    let cohort = |name: &str, c: &str, within, reclaim| {
        cq(name, Some(c), &[("cpu", 6, Some(6), None), ("memory_gb", 3, Some(3), None)]).preemption(within).reclaim(reclaim)
    };
    let no_limits = |name: &str, within, reclaim| {
        cq(name, Some("cohort-no-limits"), &[("cpu", 6, None, None), ("memory_gb", 3, None, None)]).preemption(within).reclaim(reclaim)
    };
    let shared = |name: &str, nominal: i64, limit: i64, within, reclaim| {
        cq(name, Some("with_shared_cq"), &[("cpu", nominal, Some(limit), None)])
            .preemption(within)
            .reclaim(reclaim)
            .borrow_within(C::LowerPriority)
    };
    config()
        .flavor("default", &[])
        .flavor("alpha", &[])
        .flavor("beta", &[])
        .queue(
            queue("standalone")
                .group(&["cpu"], &[("default", &[("cpu", 6)])])
                .group(&["memory_gb"], &[("alpha", &[("memory_gb", 3)]), ("beta", &[("memory_gb", 3)])])
                .preemption(LowerPriority),
        )
        .queue(cohort("c1", "cohort", LowerPriority, C::LowerPriority))
        .queue(cohort("c2", "cohort", Never, C::Any))
        .queue(no_limits("d1", LowerPriority, C::LowerPriority))
        .queue(no_limits("d2", Never, C::Any))
        .queue(
            cq("l1", Some("legion"), &[("cpu", 6, Some(12), None), ("memory_gb", 3, Some(6), None)])
                .preemption(LowerPriority)
                .reclaim(C::LowerPriority),
        )
        .queue(shared("a_standard", 1, 12, Never, C::LowerPriority))
        .queue(shared("b_standard", 1, 12, LowerPriority, C::Any))
        .queue(shared("a_best_effort", 1, 12, Never, C::LowerPriority))
        .queue(shared("b_best_effort", 0, 13, Never, C::LowerPriority))
        .queue(cq("shared", Some("with_shared_cq"), &[("cpu", 10, None, None)]))
        .queue(cq("lend1", Some("cohort-lend"), &[("cpu", 6, None, Some(4))]).preemption(LowerPriority).reclaim(C::LowerPriority))
        .queue(cq("lend2", Some("cohort-lend"), &[("cpu", 6, None, Some(2))]).preemption(LowerPriority).reclaim(C::LowerPriority))
        .queue(cq("a", Some("cohort-three"), &[("cpu", 2, None, None), ("memory_gb", 2, None, None)]).preemption(LowerPriority).reclaim(C::Any))
        .queue(cq("b", Some("cohort-three"), &[("cpu", 2, None, None), ("memory_gb", 2, None, None)]))
        .queue(cq("c", Some("cohort-three"), &[("cpu", 2, None, None), ("memory_gb", 2, None, None)]))
        .compile()
}

/// Jobs of 1 CPU each in `queue`: (id, priority).
fn ones(queue: &str, jobs: &[(&str, i64)]) -> Vec<RunningJob> {
    jobs.iter().map(|&(id, p)| adm(id, queue, p, &[("cpu", 1)], "default")).collect()
}

/// Like [`ones`], each also holding 1 GB of memory.
fn ones_mem(queue: &str, jobs: &[(&str, i64)]) -> Vec<RunningJob> {
    jobs.iter().map(|&(id, p)| adm(id, queue, p, &[("cpu", 1), ("memory_gb", 1)], "default")).collect()
}

#[test]
fn kueue_preemption_cases() {
    let cfg = preemption_cqs;
    let standalone = |id: &str, p: i64, cpu: i64| adm(id, "standalone", p, &[("cpu", cpu)], "default");
    let at = |id: &str, q: &str, p: i64, cpu: i64| adm(id, q, p, &[("cpu", cpu)], "default");
    check(vec![
        K {
            name: "preempt lowest priority",
            config: cfg(),
            running: vec![standalone("low", -1, 2), standalone("mid", 0, 2), standalone("high", 1, 2)],
            pending: incoming("standalone", 1, &[("cpu", 2)]),
            admitted: &[("in", "default")],
            victims: &[("low", Own)],
            differs: None,
        },
        K {
            name: "preempt multiple",
            config: cfg(),
            running: vec![standalone("low", -1, 2), standalone("mid", 0, 2), standalone("high", 1, 2)],
            pending: incoming("standalone", 1, &[("cpu", 3)]),
            admitted: &[("in", "default")],
            victims: &[("low", Own), ("mid", Own)],
            differs: None,
        },
        K {
            name: "no preemption for low priority",
            config: cfg(),
            running: vec![standalone("low", -1, 3), standalone("mid", 0, 3)],
            pending: incoming("standalone", -1, &[("cpu", 1)]),
            admitted: &[],
            victims: &[],
            differs: None,
        },
        K {
            name: "not enough low priority workloads",
            config: cfg(),
            running: vec![standalone("low", -1, 3), standalone("mid", 0, 3)],
            pending: incoming("standalone", 0, &[("cpu", 4)]),
            admitted: &[],
            victims: &[],
            differs: None,
        },
        K {
            name: "some free quota, preempt low priority",
            config: cfg(),
            running: vec![standalone("low", -1, 1), standalone("mid", 0, 1), standalone("high", 1, 3)],
            pending: incoming("standalone", 1, &[("cpu", 2)]),
            admitted: &[("in", "default")],
            victims: &[("low", Own)],
            differs: None,
        },
        K {
            name: "minimal set excludes low priority",
            config: cfg(),
            running: vec![standalone("low", -1, 1), standalone("mid", 0, 2), standalone("high", 1, 3)],
            pending: incoming("standalone", 1, &[("cpu", 2)]),
            admitted: &[("in", "default")],
            victims: &[("mid", Own)],
            differs: None,
        },
        K {
            name: "reclaim quota from borrower",
            config: cfg(),
            running: vec![at("c1-low", "c1", -1, 3), at("c2-mid", "c2", 0, 3), at("c2-high", "c2", 1, 6)],
            pending: incoming("c1", 1, &[("cpu", 3)]),
            admitted: &[("in", "default")],
            victims: &[("c2-mid", Reclaim)],
            differs: None,
        },
        K {
            name: "reclaim quota if workload requests 0 resources for a resource at nominal quota",
            config: cfg(),
            running: vec![adm("c1-low", "c1", -1, &[("cpu", 3), ("memory_gb", 3)], "default"), at("c2-mid", "c2", 0, 3), at("c2-high", "c2", 1, 6)],
            pending: incoming("c1", 1, &[("cpu", 3), ("memory_gb", 0)]),
            admitted: &[("in", "default")],
            victims: &[("c2-mid", Reclaim)],
            differs: None,
        },
        K {
            name: "no workloads borrowing",
            config: cfg(),
            running: vec![at("c1-high", "c1", 1, 4), at("c2-low-1", "c2", -1, 4)],
            pending: incoming("c1", 1, &[("cpu", 4)]),
            admitted: &[("in", "default")],
            victims: &[],
            differs: Some(
                "Kueue's test forces the Preempt mode; under its own (and Berth's) flavor assignment the job \
                 fits by borrowing c2's 2 idle CPUs, so nothing is preempted in either",
            ),
        },
        K {
            name: "not enough workloads borrowing",
            config: cfg(),
            running: vec![at("c1-high", "c1", 1, 4), at("c2-low-1", "c2", -1, 4), at("c2-low-2", "c2", -1, 4)],
            pending: incoming("c1", 1, &[("cpu", 4)]),
            admitted: &[],
            victims: &[],
            differs: None,
        },
        K {
            name: "preempting locally and borrowing other resources in cohort, without cohort candidates",
            config: cfg(),
            running: vec![at("c1-low", "c1", -1, 4), at("c2-low-1", "c2", -1, 4), at("c2-high-2", "c2", 1, 4)],
            pending: incoming("c1", 1, &[("cpu", 4), ("memory_gb", 5)]),
            admitted: &[("in", "default")],
            victims: &[("c1-low", Own)],
            differs: None,
        },
        K {
            name: "preempting locally and borrowing same resource in cohort",
            config: cfg(),
            running: vec![at("c1-med", "c1", 0, 4), at("c1-low", "c1", -1, 4), at("c2-low-1", "c2", -1, 4)],
            pending: incoming("c1", 1, &[("cpu", 4)]),
            admitted: &[("in", "default")],
            victims: &[("c1-low", Own)],
            differs: None,
        },
        K {
            name: "preempting locally and borrowing same resource in cohort; no borrowing limit in the cohort",
            config: cfg(),
            running: vec![at("d1-med", "d1", 0, 4), at("d1-low", "d1", -1, 4), at("d2-low-1", "d2", -1, 4)],
            pending: incoming("d1", 1, &[("cpu", 4)]),
            admitted: &[("in", "default")],
            victims: &[("d1-low", Own)],
            differs: None,
        },
        K {
            name: "preempting locally and borrowing other resources in cohort, with cohort candidates",
            config: cfg(),
            running: vec![at("c1-med", "c1", 0, 4), at("c2-low-1", "c2", -1, 5), at("c2-low-2", "c2", -1, 1), at("c2-low-3", "c2", -1, 1)],
            pending: incoming("c1", 1, &[("cpu", 2), ("memory_gb", 5)]),
            admitted: &[("in", "default")],
            victims: &[("c1-med", Own)],
            differs: None,
        },
        K {
            name: "preempting locally and not borrowing same resource in 1-queue cohort",
            config: cfg(),
            running: vec![at("l1-med", "l1", 0, 4), at("l1-low", "l1", -1, 2)],
            pending: incoming("l1", 1, &[("cpu", 4)]),
            admitted: &[("in", "default")],
            victims: &[("l1-med", Own)],
            differs: None,
        },
        K {
            name: "do not reclaim borrowed quota from same priority for withinCohort=ReclaimFromLowerPriority",
            config: cfg(),
            running: vec![at("c1", "c1", 0, 2), at("c2-1", "c2", 0, 4), at("c2-2", "c2", 0, 4)],
            pending: incoming("c1", 0, &[("cpu", 4)]),
            admitted: &[],
            victims: &[],
            differs: None,
        },
        K {
            name: "reclaim borrowed quota from same priority for withinCohort=ReclaimFromAny",
            config: cfg(),
            running: vec![at("c1-1", "c1", 0, 4), at("c1-2", "c1", 1, 4), at("c2", "c2", 0, 2)],
            pending: incoming("c2", 0, &[("cpu", 4)]),
            admitted: &[("in", "default")],
            victims: &[("c1-1", Reclaim)],
            differs: None,
        },
        K {
            name: "preempt from all ClusterQueues in cohort",
            config: cfg(),
            running: vec![at("c1-low", "c1", -1, 3), at("c1-mid", "c1", 0, 2), at("c2-low", "c2", -1, 3), at("c2-mid", "c2", 0, 4)],
            pending: incoming("c1", 0, &[("cpu", 4)]),
            admitted: &[("in", "default")],
            victims: &[("c1-low", Own), ("c2-low", Reclaim)],
            differs: None,
        },
        K {
            name: "can't preempt workloads in ClusterQueue for withinClusterQueue=Never",
            config: cfg(),
            running: vec![at("c2-low", "c2", -1, 3)],
            pending: incoming("c2", 1, &[("cpu", 4)]),
            admitted: &[("in", "default")],
            victims: &[],
            differs: Some(
                "Kueue's test forces the Preempt mode; with c1 idle the job fits by borrowing 1 CPU, so it is \
                 admitted and, as in Kueue, c2-low is not preempted",
            ),
        },
        K {
            name: "use BorrowWithinCohort; allow preempting a lower-priority workload from another ClusterQueue while borrowing",
            config: cfg(),
            running: vec![at("a_best_effort_low", "a_best_effort", -1, 10), at("b_best_effort_low", "b_best_effort", -1, 1)],
            pending: incoming("a_standard", 0, &[("cpu", 10)]),
            admitted: &[("in", "default")],
            victims: &[("a_best_effort_low", Borrow)],
            differs: None,
        },
        K {
            name: "use BorrowWithinCohort; don't allow preempting a lower-priority workload with priority above MaxPriorityThreshold, if borrowing is required even after the preemption",
            config: cfg(),
            running: vec![at("b_standard", "b_standard", 1, 10)],
            pending: incoming("a_standard", 2, &[("cpu", 10)]),
            admitted: &[("in", "default")],
            victims: &[("b_standard", Borrow)],
            differs: Some(
                "the Anyscale model's borrow_within_cohort has no maxPriorityThreshold (Kueue's test sets 0): \
                 lower_priority lets any strictly lower-priority borrower go, as Kueue does without a threshold",
            ),
        },
        K {
            name: "use BorrowWithinCohort; allow preempting a lower-priority workload with priority above MaxPriorityThreshold, if borrowing is not required after the preemption",
            config: cfg(),
            running: vec![at("b_standard", "b_standard", 1, 13)],
            pending: incoming("a_standard", 2, &[("cpu", 1)]),
            admitted: &[("in", "default")],
            victims: &[("b_standard", Reclaim)],
            differs: None,
        },
        K {
            name: "use BorrowWithinCohort; don't allow for preemption of lower-priority workload from the same ClusterQueue",
            config: cfg(),
            running: vec![at("a_standard", "a_standard", 1, 13)],
            pending: incoming("a_standard", 2, &[("cpu", 1)]),
            admitted: &[],
            victims: &[],
            differs: None,
        },
        K {
            name: "use BorrowWithinCohort; only preempt from CQ if no workloads below threshold and already above nominal",
            config: cfg(),
            running: vec![
                at("a_standard_1", "a_standard", 1, 10),
                at("a_standard_2", "a_standard", 1, 1),
                at("b_standard_1", "b_standard", 1, 1),
                at("b_standard_2", "b_standard", 2, 1),
            ],
            pending: incoming("b_standard", 3, &[("cpu", 1)]),
            admitted: &[("in", "default")],
            victims: &[("a_standard_1", Borrow)],
            differs: Some(
                "without maxPriorityThreshold (0 in Kueue's test) a_standard's priority-1 borrowers are below \
                 the preemptor's 3, so borrow_within_cohort lets the peer's borrower go first, peers before \
                 the own queue as in Kueue's candidate order; Kueue, held to priority 0, preempts b_standard_1",
            ),
        },
        K {
            name: "use BorrowWithinCohort; preempt from CQ and from other CQs with workloads below threshold",
            config: cfg(),
            running: vec![
                at("b_standard_high", "b_standard", 2, 10),
                at("b_standard_mid", "b_standard", 1, 1),
                at("a_best_effort_low", "a_best_effort", -1, 1),
                at("a_best_effort_lower", "a_best_effort", -2, 1),
            ],
            pending: incoming("b_standard", 2, &[("cpu", 2)]),
            admitted: &[("in", "default")],
            victims: &[("a_best_effort_lower", Borrow), ("b_standard_mid", Own)],
            differs: None,
        },
        K {
            name: "reclaim quota from lender",
            config: cfg(),
            running: vec![at("lend1-low", "lend1", -1, 3), at("lend2-mid", "lend2", 0, 3), at("lend2-high", "lend2", 1, 4)],
            pending: incoming("lend1", 1, &[("cpu", 3)]),
            admitted: &[("in", "default")],
            victims: &[("lend2-mid", Reclaim)],
            differs: None,
        },
        K {
            name: "preempt from all ClusterQueues in cohort-lend",
            config: cfg(),
            running: vec![
                at("lend1-low", "lend1", -1, 3),
                at("lend1-mid", "lend1", 0, 2),
                at("lend2-low", "lend2", -1, 3),
                at("lend2-mid", "lend2", 0, 4),
            ],
            pending: incoming("lend1", 0, &[("cpu", 4)]),
            admitted: &[("in", "default")],
            victims: &[("lend1-low", Own), ("lend2-low", Reclaim)],
            differs: None,
        },
        K {
            name: "cannot preempt from other ClusterQueues if exceeds requestable quota including lending limit",
            config: cfg(),
            running: vec![at("lend2-low", "lend2", -1, 10)],
            pending: incoming("lend1", 0, &[("cpu", 9)]),
            admitted: &[],
            victims: &[],
            differs: None,
        },
        K {
            name: "preemptions from cq when target queue is exhausted for the single requested resource",
            config: cfg(),
            running: [ones("a", &[("a1", -2), ("a2", -2), ("a3", -1)]), ones("b", &[("b1", 0), ("b2", 0), ("b3", 0)])].concat(),
            pending: incoming("a", 0, &[("cpu", 2)]),
            admitted: &[("in", "default")],
            victims: &[("a1", Own), ("a2", Own)],
            differs: None,
        },
        K {
            name: "preemptions from cq when target queue is exhausted for two requested resources",
            config: cfg(),
            running: [ones_mem("a", &[("a1", -2), ("a2", -2), ("a3", -1)]), ones_mem("b", &[("b1", 0), ("b2", 0), ("b3", 0)])].concat(),
            pending: incoming("a", 0, &[("cpu", 2), ("memory_gb", 2)]),
            admitted: &[("in", "default")],
            victims: &[("a1", Own), ("a2", Own)],
            differs: None,
        },
        K {
            name: "preemptions from cq when target queue is exhausted for one requested resource, but not the other",
            config: cfg(),
            running: [ones("a", &[("a1", -2), ("a2", -2), ("a3", -1)]), ones("b", &[("b1", 0), ("b2", 0), ("b3", 0)])].concat(),
            pending: incoming("a", 0, &[("cpu", 2), ("memory_gb", 2)]),
            admitted: &[("in", "default")],
            victims: &[("a1", Own), ("a2", Own)],
            differs: None,
        },
        K {
            name: "allow preemption from other cluster queues if target cq is not exhausted for the requested resource",
            config: cfg(),
            running: [ones("a", &[("a1", -1)]), ones("b", &[("b1", 0), ("b2", 0), ("b3", 0), ("b4", 0), ("b5", -1)])].concat(),
            pending: incoming("a", 0, &[("cpu", 2)]),
            admitted: &[("in", "default")],
            victims: &[("a1", Own), ("b5", Reclaim)],
            differs: None,
        },
    ]);
}

/// The cluster queues of Kueue's `TestSchedule` that take part in cohorts.
fn schedule_cqs() -> ConfigB {
    let flavors = |on_demand: (i64, Option<i64>), spot: (i64, Option<i64>)| {
        let q = |n: i64| vec![("cpu", Some(n as f64))];
        (q(on_demand.0), q(spot.0), on_demand.1, spot.1)
    };
    let (a_od, a_spot, a_odb, a_spotb) = flavors((50, Some(50)), (100, Some(0)));
    let (b_od, b_spot, b_odb, b_spotb) = flavors((50, Some(10)), (0, Some(100)));
    config()
        .flavor("default", &[])
        .flavor("on-demand", &[])
        .flavor("spot", &[])
        .queue(
            queue("eng-alpha")
                .cohort("eng")
                .strict()
                .group_f(&["cpu"], &[("on-demand", a_od), ("spot", a_spot)])
                .limits("on-demand", "cpu", None, a_odb.map(|b| b as f64))
                .limits("spot", "cpu", None, a_spotb.map(|b| b as f64)),
        )
        .queue(
            queue("eng-beta")
                .cohort("eng")
                .strict()
                .preemption(LowerPriority)
                .reclaim(C::Any)
                .group_f(&["cpu"], &[("on-demand", b_od), ("spot", b_spot)])
                .limits("on-demand", "cpu", None, b_odb.map(|b| b as f64))
                .limits("spot", "cpu", None, b_spotb.map(|b| b as f64)),
        )
        .queue(cq("lend-a", Some("lend"), &[("cpu", 3, None, Some(2))]))
        .queue(cq("lend-b", Some("lend"), &[("cpu", 2, None, Some(2))]))
}

fn wl(id: &str, queue: &str, prio: i64, amounts: &[(&str, i64)], at: i64) -> PendingJob {
    pending(id, queue).prio(prio).req(amounts).at(at)
}

/// Three queues of cohort `co` with `r1` and `r2` of nominal 10, borrowing limit 10.
fn co_three() -> Compiled {
    let q = |name: &str| {
        queue(name)
            .cohort("co")
            .preemption(LowerPriority)
            .reclaim(C::Any)
            .group(&["r1", "r2"], &[("default", &[("r1", 10), ("r2", 10)])])
            .limits("default", "r1", None, Some(10.0))
            .limits("default", "r2", None, Some(10.0))
    };
    config().flavor("default", &[]).queue(q("cq1")).queue(q("cq2")).queue(q("cq3")).compile()
}

/// Queue `a` (gpu nominal 2, `reclaim`) and `b` (gpu nominal 0) in cohort `root`.
fn capacity(reclaim: CohortPreemption) -> Compiled {
    config()
        .flavor("on-demand", &[])
        .queue(queue("ClusterQueueA").cohort("root").reclaim(reclaim).group(&["gpu"], &[("on-demand", &[("gpu", 2)])]))
        .queue(queue("ClusterQueueB").cohort("root").group(&["gpu"], &[("on-demand", &[("gpu", 0)])]))
        .compile()
}

#[test]
fn kueue_schedule_cases() {
    let capacity_case = |name, reclaim, admitted: &'static [(&'static str, &'static str)], differs| K {
        name,
        config: capacity(reclaim),
        running: vec![adm("a1-admitted", "ClusterQueueA", 0, &[("gpu", 1)], "on-demand")],
        pending: vec![wl("a2-pending", "ClusterQueueA", 0, &[("gpu", 2)], 0), wl("b1-pending", "ClusterQueueB", 0, &[("gpu", 1)], 0)],
        admitted,
        victims: &[],
        differs,
    };
    check(vec![
        K {
            name: "admit in same cohort with no borrowing",
            config: schedule_cqs().compile(),
            running: vec![],
            pending: vec![wl("alpha", "eng-alpha", 0, &[("cpu", 40)], 0), wl("beta", "eng-beta", 0, &[("cpu", 40)], 0)],
            admitted: &[("alpha", "on-demand"), ("beta", "on-demand")],
            victims: &[],
            differs: None,
        },
        K {
            name: "cannot borrow if cohort was assigned and would result in overadmission",
            config: schedule_cqs().compile(),
            running: vec![],
            pending: vec![wl("alpha", "eng-alpha", 0, &[("cpu", 45)], 0), wl("beta", "eng-beta", 0, &[("cpu", 56)], 0)],
            admitted: &[("alpha", "on-demand"), ("beta", "spot")],
            victims: &[],
            differs: Some(
                "Kueue assigns flavors once per cycle against the snapshot taken before it, so eng-beta's \
                 on-demand (fitting then) no longer fits after eng-alpha's admission and the workload waits a \
                 cycle; Berth assigns each job against the cycle's working copy, so it takes the next flavor, \
                 spot, where eng-beta may borrow 100 — what Kueue admits one cycle later",
            ),
        },
        K {
            name: "can borrow if cohort was assigned and will not result in overadmission",
            config: schedule_cqs().compile(),
            running: vec![],
            pending: vec![wl("alpha", "eng-alpha", 0, &[("cpu", 45)], 0), wl("beta", "eng-beta", 0, &[("cpu", 55)], 0)],
            admitted: &[("alpha", "on-demand"), ("beta", "on-demand")],
            victims: &[],
            differs: None,
        },
        K {
            name: "can borrow if needs reclaim from cohort in different flavor",
            config: schedule_cqs().compile(),
            running: vec![adm("user-on-demand", "eng-beta", 0, &[("cpu", 50)], "on-demand"), adm("user-spot", "eng-beta", 0, &[("cpu", 1)], "spot")],
            pending: vec![wl("can-reclaim", "eng-alpha", 0, &[("cpu", 100)], 0), wl("needs-to-borrow", "eng-beta", 0, &[("cpu", 1)], 0)],
            admitted: &[("needs-to-borrow", "on-demand")],
            victims: &[],
            differs: None,
        },
        K {
            name: "workload exceeds lending limit when borrow in cohort",
            config: schedule_cqs().compile(),
            running: vec![adm("a", "lend-b", 0, &[("cpu", 2)], "default")],
            pending: vec![wl("b", "lend-b", 0, &[("cpu", 3)], 0)],
            admitted: &[],
            victims: &[],
            differs: None,
        },
        K {
            name: "preempt workloads in ClusterQueue and cohort",
            config: schedule_cqs().compile(),
            running: vec![
                adm("use-all-spot", "eng-alpha", 0, &[("cpu", 100)], "spot"),
                adm("low-1", "eng-beta", -1, &[("cpu", 30)], "on-demand"),
                adm("low-2", "eng-beta", -2, &[("cpu", 10)], "on-demand"),
                adm("borrower", "eng-alpha", 0, &[("cpu", 60)], "on-demand"),
            ],
            pending: vec![wl("preemptor", "eng-beta", 0, &[("cpu", 20)], 0)],
            admitted: &[("preemptor", "on-demand")],
            victims: &[("borrower", Reclaim), ("low-2", Own)],
            differs: None,
        },
        K {
            name: "two workloads can borrow different resources from the same flavor in the same cycle",
            config: co_three(),
            running: vec![],
            pending: vec![wl("wl1", "cq1", -1, &[("r1", 16)], 0), wl("wl2", "cq2", -2, &[("r2", 16)], 0)],
            admitted: &[("wl1", "default"), ("wl2", "default")],
            victims: &[],
            differs: None,
        },
        K {
            name: "two workloads can borrow the same resources from the same flavor in the same cycle if fits in the cohort quota",
            config: co_three(),
            running: vec![],
            pending: vec![wl("wl1", "cq1", -1, &[("r1", 16)], 0), wl("wl2", "cq2", -2, &[("r1", 14)], 0)],
            admitted: &[("wl1", "default"), ("wl2", "default")],
            victims: &[],
            differs: None,
        },
        K {
            name: "only one workload can borrow one resources from the same flavor in the same cycle if cohort quota cannot fit",
            config: co_three(),
            running: vec![],
            pending: vec![wl("wl1", "cq1", -1, &[("r1", 16)], 0), wl("wl2", "cq2", -2, &[("r1", 16)], 0)],
            admitted: &[("wl1", "default")],
            victims: &[],
            differs: None,
        },
        K {
            name: "A workload is only eligible to do preemptions if it fits fully within nominal quota",
            config: config()
                .flavor("on-demand", &[])
                .queue(
                    queue("other-alpha")
                        .cohort("other")
                        .preemption(LowerPriority)
                        .reclaim(C::Any)
                        .group(&["cpu"], &[("on-demand", &[("cpu", 2)])]),
                )
                .queue(queue("other-beta").cohort("other").group(&["cpu"], &[("on-demand", &[("cpu", 2)])]))
                .compile(),
            running: vec![adm("a1", "other-alpha", -1, &[("cpu", 1)], "on-demand"), adm("b1", "other-beta", -1, &[("cpu", 1)], "on-demand")],
            pending: vec![wl("incoming", "other-alpha", 1, &[("cpu", 3)], 0)],
            admitted: &[],
            victims: &[],
            differs: None,
        },
        K {
            name: "workload requiring reclaimation prioritized over wl in another full cq",
            config: config()
                .flavor("on-demand", &[])
                .queue(queue("CQ1").cohort("other").group(&["gpu"], &[("on-demand", &[("gpu", 10)])]))
                .queue(queue("CQ2").cohort("other").reclaim(C::Any).group(&["gpu"], &[("on-demand", &[("gpu", 10)])]))
                .queue(queue("CQ3").cohort("other").group(&["gpu"], &[("on-demand", &[("gpu", 0)])]))
                .compile(),
            running: vec![
                adm("Admitted-Workload-1", "CQ1", 0, &[("gpu", 5)], "on-demand"),
                adm("Admitted-Workload-2", "CQ3", 0, &[("gpu", 5)], "on-demand"),
                adm("Admitted-Workload-3", "CQ3", 1, &[("gpu", 5)], "on-demand"),
            ],
            pending: vec![wl("WL1", "CQ1", 0, &[("gpu", 10)], 0), wl("WL2", "CQ2", 0, &[("gpu", 10)], 1_000)],
            admitted: &[("WL2", "on-demand")],
            victims: &[("Admitted-Workload-2", Reclaim)],
            differs: None,
        },
        capacity_case(
            "capacity not blocked when lending clusterqueue can reclaim (ReclaimWithinCohort=Any)",
            C::Any,
            &[("b1-pending", "on-demand")],
            None,
        ),
        capacity_case(
            "capacity blocked when lending clusterqueue not guaranteed to reclaim (ReclaimWithinCohort=LowerPriority)",
            C::LowerPriority,
            &[("b1-pending", "on-demand")],
            Some(
                "Kueue holds, for one cycle, the idle nominal quota of a queue whose job needs preemption, found \
                 no victim and could not always reclaim later; Berth holds nothing for a job that cannot be \
                 admitted: the borrower takes the idle CPU, and the lender gets it back when the borrower \
                 finishes (its guaranteed part, nominal minus lending_limit, is never lent)",
            ),
        ),
        capacity_case(
            "capacity blocked when lending clusterqueue not guaranteed to reclaim (ReclaimWithinCohort=Never)",
            C::Never,
            &[("b1-pending", "on-demand")],
            Some("as for LowerPriority: Berth does not hold idle quota for a job that cannot be admitted"),
        ),
    ]);
}
