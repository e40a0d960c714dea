//! Table cases for cohorts: borrowing up to the limits, lending limits, the flavor that
//! needs no borrowing, reclaim per `reclaim_within_cohort`, borrowing by preemption per
//! `borrow_within_cohort`, the reasons a user reads, and fair sharing among borrowers.

use super::fixtures::*;
use crate::engine::*;

use CohortPreemption as C;

/// Queue `name` in cohort `research`, 1 flavor `any` with `cpu` nominal quota `nominal`.
fn member(name: &str, nominal: i64) -> QueueB {
    queue(name).cohort("research").group(&["cpu"], &[("any", &[("cpu", nominal)])])
}

fn cohort(queues: Vec<QueueB>) -> Compiled {
    queues.into_iter().fold(config().flavor("any", &[]), |c, q| c.queue(q)).compile()
}

/// One big node, so quota alone decides.
fn big() -> Vec<Node> {
    vec![node("n1").cap(&[("cpu", 100)])]
}

fn jobs(queue: &str, prefix: &str, n: usize, at: i64) -> Vec<PendingJob> {
    (0..n).map(|i| pending(&format!("{prefix}{i}"), queue).req(&[("cpu", 1)]).at(at + i as i64)).collect()
}

fn on_any(job: &str, queue: &str) -> Admission {
    admit(job, queue, &[("any", &["cpu"])], "n1")
}

fn runs(queue: &str, prefix: &str, n: usize, prio: i64) -> Vec<RunningJob> {
    (0..n).map(|i| running(&format!("{prefix}{i}"), queue).prio(prio).req(&[("cpu", 1)]).on("any", "n1").started(i as i64)).collect()
}

#[test]
fn borrowing_and_lending() {
    check(vec![
        Case {
            name: "a queue at its nominal borrows an idle peer's quota, and says so",
            config: cohort(vec![member("team-a", 2).limits("any", "cpu", None, Some(3.0)), member("team-b", 2)]),
            nodes: big(),
            running: vec![],
            pending: jobs("team-a", "a", 5, 0),
            want: plan(
                vec![
                    on_any("a0", "team-a"),
                    on_any("a1", "team-a"),
                    on_any("a2", "team-a").borrowing("research", "any", "cpu", 1, &[("team-b", 1)]),
                    on_any("a3", "team-a").borrowing("research", "any", "cpu", 1, &[("team-b", 1)]),
                ],
                vec![],
                vec![wait(
                    "a4",
                    "team-a",
                    1,
                    "queue team-a: flavor any: cpu nominal 2, in use 4, requested 1; \
                     cohort research has 0 idle of 4 lendable; borrowing limit 3, borrowed 2",
                )],
            ),
        },
        Case {
            name: "never beyond the borrowing limit",
            config: cohort(vec![member("team-a", 2).limits("any", "cpu", None, Some(1.0)), member("team-b", 2)]),
            nodes: big(),
            running: vec![],
            pending: jobs("team-a", "a", 4, 0),
            want: plan(
                vec![on_any("a0", "team-a"), on_any("a1", "team-a"), on_any("a2", "team-a").borrowing("research", "any", "cpu", 1, &[("team-b", 1)])],
                vec![],
                vec![wait(
                    "a3",
                    "team-a",
                    1,
                    "queue team-a: flavor any: cpu nominal 2, in use 3, requested 1; \
                     cohort research has 1 idle of 4 lendable; borrowing limit 1, borrowed 1",
                )],
            ),
        },
        Case {
            name: "a lending limit keeps the rest for the lender",
            config: cohort(vec![member("team-a", 2), member("team-b", 2).limits("any", "cpu", Some(1.0), None)]),
            nodes: big(),
            running: vec![],
            pending: jobs("team-a", "a", 4, 0),
            want: plan(
                vec![on_any("a0", "team-a"), on_any("a1", "team-a"), on_any("a2", "team-a").borrowing("research", "any", "cpu", 1, &[("team-b", 1)])],
                vec![],
                vec![wait("a3", "team-a", 1, "queue team-a: flavor any: cpu nominal 2, in use 3, requested 1; cohort research has 0 idle of 3 lendable")],
            ),
        },
        Case {
            name: "the lender's guaranteed part is there when borrowers hold the rest",
            config: cohort(vec![member("team-a", 2), member("team-b", 2).limits("any", "cpu", Some(1.0), None)]),
            nodes: big(),
            running: runs("team-a", "r", 3, 0),
            pending: jobs("team-b", "b", 2, 0),
            want: plan(
                vec![on_any("b0", "team-b")],
                vec![],
                vec![wait(
                    "b1",
                    "team-b",
                    1,
                    "queue team-b: flavor any: cpu nominal 2, in use 1, requested 1; cohort research has 0 idle of 3 lendable; \
                     its nominal quota is lent to peers and reclaim_within_cohort is never: it waits for them to finish",
                )],
            ),
        },
        Case {
            name: "a queue outside the cohort borrows nothing",
            config: cohort(vec![member("team-a", 2), queue("solo").group(&["cpu"], &[("any", &[("cpu", 2)])]), member("team-b", 2)]),
            nodes: big(),
            running: vec![],
            pending: jobs("solo", "s", 3, 0),
            want: plan(
                vec![on_any("s0", "solo"), on_any("s1", "solo")],
                vec![],
                vec![wait("s2", "solo", 1, "queue solo: flavor any: cpu quota 2, in use 2, requested 1")],
            ),
        },
        Case {
            name: "within a cycle, jobs that need no borrowing go first: the lender's later job is not lent away",
            config: cohort(vec![member("team-a", 0), member("team-b", 2)]),
            nodes: big(),
            running: vec![],
            pending: [jobs("team-a", "a", 2, 0), jobs("team-b", "b", 2, 10)].concat(),
            want: plan(
                vec![on_any("b0", "team-b"), on_any("b1", "team-b")],
                vec![],
                vec![
                    wait("a0", "team-a", 1, "queue team-a: flavor any: cpu nominal 0, in use 0, requested 1; cohort research has 0 idle of 2 lendable"),
                    wait("a1", "team-a", 2, "queue team-a: flavor any: cpu nominal 0, in use 0, requested 1; cohort research has 0 idle of 2 lendable"),
                ],
            ),
        },
        Case {
            name: "a flavor where the job fits without borrowing is preferred to an earlier one where it must borrow",
            config: config()
                .flavor("spot", &[])
                .flavor("reserved", &[])
                .queue(queue("team-a").cohort("research").group(&["cpu"], &[("spot", &[("cpu", 0)]), ("reserved", &[("cpu", 2)])]))
                .queue(queue("team-b").cohort("research").group(&["cpu"], &[("spot", &[("cpu", 4)])]))
                .compile(),
            nodes: big(),
            running: vec![],
            pending: jobs("team-a", "a", 3, 0),
            want: plan(
                vec![
                    admit("a0", "team-a", &[("reserved", &["cpu"])], "n1"),
                    admit("a1", "team-a", &[("reserved", &["cpu"])], "n1"),
                    admit("a2", "team-a", &[("spot", &["cpu"])], "n1").borrowing("research", "spot", "cpu", 1, &[("team-b", 1)]),
                ],
                vec![],
                vec![],
            ),
        },
        Case {
            name: "borrowing is per flavor: a peer's idle quota of another flavor does not help",
            config: config()
                .flavor("spot", &[])
                .flavor("reserved", &[])
                .queue(queue("team-a").cohort("research").group(&["cpu"], &[("spot", &[("cpu", 1)])]))
                .queue(queue("team-b").cohort("research").group(&["cpu"], &[("reserved", &[("cpu", 4)])]))
                .compile(),
            nodes: big(),
            running: vec![],
            pending: jobs("team-a", "a", 2, 0),
            want: plan(
                vec![admit("a0", "team-a", &[("spot", &["cpu"])], "n1")],
                vec![],
                vec![wait("a1", "team-a", 1, "queue team-a: flavor spot: cpu nominal 1, in use 1, requested 1; cohort research has 0 idle of 1 lendable")],
            ),
        },
        Case {
            name: "borrowing is per resource, in milli-units",
            config: config()
                .flavor("any", &[])
                .queue(queue("team-a").cohort("research").group_f(&["cpu", "memory_gb"], &[("any", vec![("cpu", Some(1.5)), ("memory_gb", Some(4.0))])]))
                .queue(queue("team-b").cohort("research").group_f(&["cpu", "memory_gb"], &[("any", vec![("cpu", Some(0.25)), ("memory_gb", Some(0.0))])]))
                .compile(),
            nodes: vec![node("n1").cap(&[("cpu", 100), ("memory_gb", 100)])],
            running: vec![],
            pending: vec![
                pending("a0", "team-a").req_milli(&[("cpu", 1_750), ("memory_gb", 2_000)]),
                pending("a1", "team-a").req_milli(&[("cpu", 1), ("memory_gb", 2_001)]).at(1),
            ],
            want: plan(
                vec![Admission {
                    borrowed: vec![Borrowed {
                        cohort: "research".into(),
                        flavor: "any".into(),
                        resource: "cpu".into(),
                        amount: Milli(250),
                        lenders: vec![("team-b".into(), Milli(250))],
                    }],
                    ..admit("a0", "team-a", &[("any", &["cpu", "memory_gb"])], "n1")
                }],
                vec![],
                vec![wait(
                    "a1",
                    "team-a",
                    1,
                    "queue team-a: flavor any: cpu nominal 1.5, in use 1.75, requested 0.001; cohort research has 0 idle of 1.75 lendable",
                )],
            ),
        },
    ]);
}

/// `team-a` (nominal 2) runs 4 jobs of priority `prio`, borrowing 2 from `team-b` (nominal
/// 2, policies given), which now wants 1 back at priority 5.
fn reclaim_case(name: &'static str, b: QueueB, prio: i64, want: Plan) -> Case {
    Case {
        name,
        config: cohort(vec![member("team-a", 2), b]),
        nodes: big(),
        running: runs("team-a", "r", 4, prio),
        pending: vec![pending("b0", "team-b").prio(5).req(&[("cpu", 1)])],
        want,
    }
}

#[test]
fn reclaim() {
    let lent = "queue team-b: flavor any: cpu nominal 2, in use 0, requested 1; cohort research has 0 idle of 4 lendable";
    check(vec![
        reclaim_case(
            "any: the most recently started borrower goes",
            member("team-b", 2).reclaim(C::Any),
            9,
            plan(vec![on_any("b0", "team-b")], vec![preempt_in("b0", "team-b", &[("r3", "team-a", Cause::Reclaim)])], vec![]),
        ),
        reclaim_case(
            "lower_priority: a lower-priority borrower goes",
            member("team-b", 2).reclaim(C::LowerPriority),
            1,
            plan(vec![on_any("b0", "team-b")], vec![preempt_in("b0", "team-b", &[("r3", "team-a", Cause::Reclaim)])], vec![]),
        ),
        reclaim_case(
            "lower_priority: a borrower of higher priority stays",
            member("team-b", 2).reclaim(C::LowerPriority),
            9,
            plan(vec![], vec![], vec![wait("b0", "team-b", 1, &format!("{lent}; no lower-priority job of a borrowing peer to reclaim"))]),
        ),
        reclaim_case(
            "never: waits for the borrowers to finish",
            member("team-b", 2).reclaim(C::Never),
            0,
            plan(vec![], vec![], vec![wait(
                "b0",
                "team-b",
                1,
                &format!("{lent}; its nominal quota is lent to peers and reclaim_within_cohort is never: it waits for them to finish"),
            )]),
        ),
        reclaim_case(
            "omitted: never",
            member("team-b", 2),
            0,
            plan(vec![], vec![], vec![wait(
                "b0",
                "team-b",
                1,
                &format!("{lent}; its nominal quota is lent to peers and reclaim_within_cohort is never: it waits for them to finish"),
            )]),
        ),
        Case {
            name: "reclaim takes only what borrowers hold above their nominal, never a peer within it",
            config: cohort(vec![member("team-a", 2), member("team-b", 2).reclaim(C::Any)]),
            nodes: big(),
            running: runs("team-a", "r", 2, 0),
            pending: jobs("team-b", "b", 3, 0),
            want: plan(
                vec![on_any("b0", "team-b"), on_any("b1", "team-b")],
                vec![],
                vec![wait(
                    "b2",
                    "team-b",
                    1,
                    "queue team-b: flavor any: cpu nominal 2, in use 2, requested 1; cohort research has 0 idle of 4 lendable; \
                     no job of a borrowing peer to reclaim",
                )],
            ),
        },
        Case {
            name: "a reclaim and a preemption within the queue in one: peers' borrowers first",
            config: cohort(vec![member("team-a", 2), member("team-b", 2).reclaim(C::Any).preemption(LowerPriority)]),
            nodes: big(),
            running: [runs("team-a", "r", 3, 0), runs("team-b", "own", 1, 0)].concat(),
            pending: vec![pending("b0", "team-b").prio(5).req(&[("cpu", 2)])],
            want: plan(
                vec![on_any("b0", "team-b")],
                // Reclaiming r2 alone would leave team-b borrowing 1, which only
                // borrow_within_cohort allows; so its own lower-priority job goes too.
                vec![preempt_in("b0", "team-b", &[("r2", "team-a", Cause::Reclaim), ("own0", "team-b", Cause::WithinQueue)])],
                vec![],
            ),
        },
        Case {
            name: "a borrowing queue cannot preempt for more than its nominal without borrow_within_cohort",
            config: cohort(vec![member("team-a", 2).reclaim(C::Any), member("team-b", 2), member("team-c", 2)]),
            nodes: big(),
            running: [runs("team-a", "a", 2, 0), runs("team-b", "b", 4, 0)].concat(),
            pending: vec![pending("p", "team-a").prio(9).req(&[("cpu", 1)])],
            want: plan(vec![], vec![], vec![wait(
                "p",
                "team-a",
                1,
                "queue team-a: flavor any: cpu nominal 2, in use 2, requested 1; cohort research has 0 idle of 6 lendable; \
                 it would borrow, and without borrow_within_cohort a queue reclaims only to stay within its nominal quota",
            )]),
        },
        Case {
            name: "borrow_within_cohort: lower_priority preempts a lower-priority borrower to borrow",
            config: cohort(vec![
                member("team-a", 2).reclaim(C::LowerPriority).borrow_within(C::LowerPriority),
                member("team-b", 2),
                member("team-c", 2),
            ]),
            nodes: big(),
            running: [runs("team-a", "a", 2, 0), runs("team-b", "b", 4, 0)].concat(),
            pending: vec![pending("p", "team-a").prio(9).req(&[("cpu", 1)])],
            want: plan(
                vec![on_any("p", "team-a").borrowing("research", "any", "cpu", 1, &[("team-c", 1)])],
                vec![preempt_in("p", "team-a", &[("b3", "team-b", Cause::Borrow)])],
                vec![],
            ),
        },
        Case {
            name: "borrow_within_cohort spares borrowers of equal priority",
            config: cohort(vec![
                member("team-a", 2).reclaim(C::Any).borrow_within(C::LowerPriority),
                member("team-b", 2),
                member("team-c", 2),
            ]),
            nodes: big(),
            running: [runs("team-a", "a", 2, 0), runs("team-b", "b", 4, 9)].concat(),
            pending: vec![pending("p", "team-a").prio(9).req(&[("cpu", 1)])],
            want: plan(vec![], vec![], vec![wait(
                "p",
                "team-a",
                1,
                "queue team-a: flavor any: cpu nominal 2, in use 2, requested 1; cohort research has 0 idle of 6 lendable; \
                 preempting every job it may preempt would not make room",
            )]),
        },
    ]);
}

#[test]
fn fair_sharing_splits_idle_quota_by_weight() {
    // A lender with 12 idle CPUs; two borrowers of nominal 0 with 12 jobs each. Weights 2:1
    // split the 12 as 8:4; without weights the earlier-enqueued borrower takes them all.
    let world = |wa: Option<f64>, wb: Option<f64>| {
        let weighted = |q: QueueB, w: Option<f64>| match w {
            Some(w) => q.weight(w),
            None => q,
        };
        cohort(vec![member("lender", 12), weighted(member("a", 0), wa), weighted(member("b", 0), wb)])
    };
    let pending = [jobs("b", "b", 12, 0), jobs("a", "a", 12, 100)].concat();
    let split = |c: &Compiled| {
        let plan = schedule(&Snapshot { now_ms: 0, config: c, nodes: &big(), running: &[], pending: &pending, limits: &[] });
        let n = |q: &str| plan.admissions.iter().filter(|a| &*a.queue == q).count();
        (n("a"), n("b"))
    };
    assert_eq!(split(&world(Some(2.0), Some(1.0))), (8, 4));
    assert_eq!(split(&world(Some(1.0), Some(1.0))), (6, 6));
    assert_eq!(split(&world(Some(2.0), None)), (8, 4), "a member without a weight weighs 1");
    assert_eq!(split(&world(None, None)), (0, 12), "fair sharing is off unless configured");
}
