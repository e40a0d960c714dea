//! Table cases for preemption within a queue.

use super::fixtures::*;
use crate::engine::*;

fn gpu_queue(quota: i64, p: Option<app::config::WithinQueuePreemption>) -> Compiled {
    let q = queue("research").group(&["gpu"], &[("spot", &[("gpu", quota)])]);
    let q = match p {
        Some(p) => q.preemption(p),
        None => q,
    };
    config().flavor("spot", &[("market", "spot")]).queue(q).compile()
}

fn spot(id: &str, gpus: i64) -> Node {
    node(id).label("market", "spot").cap(&[("gpu", gpus)])
}

fn low(id: &str, prio: i64, gpus: i64, started: i64) -> RunningJob {
    running(id, "research").prio(prio).req(&[("gpu", gpus)]).on("spot", "spot-1").started(started)
}

fn on_spot(job: &str, node: &str) -> Admission {
    admit(job, "research", &[("spot", &["gpu"])], node)
}

#[test]
fn lower_priority_preemption() {
    check(vec![
        Case {
            name: "lowest priority first, then most recently started",
            config: gpu_queue(12, Some(LowerPriority)),
            nodes: vec![spot("spot-1", 12)],
            running: vec![low("r-a", 1, 4, 10), low("r-b", 1, 4, 20), low("r-c", 3, 4, 5)],
            pending: vec![pending("p", "research").prio(5).req(&[("gpu", 4)])],
            want: plan(vec![on_spot("p", "spot-1")], vec![preempt("p", "research", &["r-b"])], vec![]),
        },
        Case {
            name: "victims that turn out unnecessary are put back",
            config: gpu_queue(10, Some(LowerPriority)),
            nodes: vec![spot("spot-1", 10)],
            running: vec![low("r-small", 1, 2, 20), low("r-big", 2, 8, 10)],
            pending: vec![pending("p", "research").prio(5).req(&[("gpu", 8)])],
            want: plan(vec![on_spot("p", "spot-1")], vec![preempt("p", "research", &["r-big"])], vec![]),
        },
        Case {
            name: "several victims when one is not enough",
            config: gpu_queue(8, Some(LowerPriority)),
            nodes: vec![spot("spot-1", 8)],
            running: vec![low("r1", 1, 4, 1), low("r2", 1, 4, 2)],
            pending: vec![pending("p", "research").prio(5).req(&[("gpu", 8)])],
            want: plan(vec![on_spot("p", "spot-1")], vec![preempt("p", "research", &["r2", "r1"])], vec![]),
        },
        Case {
            name: "node capacity counts too: the victim on a node that then has room",
            config: config()
                .flavor("spot", &[("market", "spot")])
                .queue(queue("research").preemption(LowerPriority).group(&["gpu"], &[("spot", &[])]))
                .compile(),
            nodes: vec![spot("spot-1", 8), spot("spot-2", 8)],
            running: vec![
                running("r1", "research").prio(1).req(&[("gpu", 8)]).on("spot", "spot-1").started(10),
                running("r2", "research").prio(0).req(&[("gpu", 6)]).on("spot", "spot-2").started(5),
            ],
            pending: vec![pending("p", "research").prio(5).req(&[("gpu", 8)])],
            // r2 goes first (lowest priority) but freeing it leaves spot-2 with 8 free: enough.
            want: plan(vec![on_spot("p", "spot-2")], vec![preempt("p", "research", &["r2"])], vec![]),
        },
        Case {
            name: "a victim is not preempted twice",
            config: gpu_queue(8, Some(LowerPriority)),
            nodes: vec![spot("spot-1", 8)],
            running: vec![low("r", 1, 8, 1)],
            pending: vec![
                pending("p1", "research").prio(5).req(&[("gpu", 8)]).at(1),
                pending("p2", "research").prio(5).req(&[("gpu", 8)]).at(2),
            ],
            want: plan(
                vec![on_spot("p1", "spot-1")],
                vec![preempt("p1", "research", &["r"])],
                vec![wait(
                    "p2",
                    "research",
                    1,
                    "queue research: flavor spot: gpu quota 8, in use 8, requested 8; \
                     no running job below priority 5 left to preempt",
                )],
            ),
        },
        Case {
            name: "a job admitted this cycle is not a victim",
            config: gpu_queue(8, Some(LowerPriority)),
            nodes: vec![spot("spot-1", 8)],
            running: vec![],
            pending: vec![
                pending("first", "research").prio(1).req(&[("gpu", 8)]).at(1),
                pending("later-high", "research").prio(9).req(&[("gpu", 8)]).at(2),
            ],
            // Priority orders the queue, so the high one goes first and the low one waits.
            want: plan(
                vec![on_spot("later-high", "spot-1")],
                vec![],
                vec![wait(
                    "first",
                    "research",
                    1,
                    "queue research: flavor spot: gpu quota 8, in use 8, requested 8; \
                     no running job below priority 1 left to preempt",
                )],
            ),
        },
        Case {
            name: "never preempts equal or higher priority",
            config: gpu_queue(8, Some(LowerPriority)),
            nodes: vec![spot("spot-1", 8)],
            running: vec![low("same", 5, 4, 1), low("higher", 7, 4, 2)],
            pending: vec![pending("p", "research").prio(5).req(&[("gpu", 8)])],
            want: plan(vec![], vec![], vec![wait(
                "p",
                "research",
                1,
                "queue research: flavor spot: gpu quota 8, in use 8, requested 8; \
                 no running job below priority 5 left to preempt",
            )]),
        },
        Case {
            name: "preempting every candidate would not make room: nobody is stopped",
            config: gpu_queue(8, Some(LowerPriority)),
            nodes: vec![spot("spot-1", 8)],
            running: vec![low("r-low", 1, 2, 1), low("r-high", 9, 6, 2)],
            pending: vec![pending("p", "research").prio(5).req(&[("gpu", 8)])],
            want: plan(vec![], vec![], vec![wait(
                "p",
                "research",
                1,
                "queue research: flavor spot: gpu quota 8, in use 8, requested 8; \
                 preempting every lower-priority job would not make room",
            )]),
        },
        Case {
            name: "within_resource_queue: never",
            config: gpu_queue(8, Some(Never)),
            nodes: vec![spot("spot-1", 8)],
            running: vec![low("r", 0, 8, 1)],
            pending: vec![pending("p", "research").prio(5).req(&[("gpu", 8)])],
            want: plan(vec![], vec![], vec![wait("p", "research", 1, "queue research: flavor spot: gpu quota 8, in use 8, requested 8")]),
        },
        Case {
            name: "preemption omitted: never",
            config: gpu_queue(8, None),
            nodes: vec![spot("spot-1", 8)],
            running: vec![low("r", 0, 8, 1)],
            pending: vec![pending("p", "research").prio(5).req(&[("gpu", 8)])],
            want: plan(vec![], vec![], vec![wait("p", "research", 1, "queue research: flavor spot: gpu quota 8, in use 8, requested 8")]),
        },
        Case {
            name: "only the preemptor's own queue is searched",
            config: config()
                .flavor("spot", &[("market", "spot")])
                .queue(queue("research").preemption(LowerPriority).group(&["gpu"], &[("spot", &[])]))
                .queue(queue("other").group(&["gpu"], &[("spot", &[])]))
                .compile(),
            nodes: vec![spot("spot-1", 8)],
            running: vec![running("o", "other").prio(0).req(&[("gpu", 8)]).on("spot", "spot-1")],
            pending: vec![pending("p", "research").prio(5).req(&[("gpu", 8)])],
            want: plan(vec![], vec![], vec![wait(
                "p",
                "research",
                1,
                "queue research: flavor spot: the only matching node, spot-1, has no room for gpu 8; \
                 no running job below priority 5 left to preempt",
            )]),
        },
        Case {
            name: "freed room is used by later jobs of the same cycle",
            config: gpu_queue(8, Some(LowerPriority)),
            nodes: vec![spot("spot-1", 8)],
            running: vec![low("r", 1, 8, 1)],
            pending: vec![
                pending("p", "research").prio(5).req(&[("gpu", 6)]).at(1),
                pending("tail", "research").prio(2).req(&[("gpu", 2)]).at(2),
            ],
            want: plan(vec![on_spot("p", "spot-1"), on_spot("tail", "spot-1")], vec![preempt("p", "research", &["r"])], vec![]),
        },
    ]);
}

/// The headline a waiting job carries beside its full reason: the first flavor's miss in a
/// person's words, then why preemption does not help.
#[test]
fn waiting_jobs_carry_a_headline_built_from_the_same_misses() {
    let headline = |config: Compiled, nodes: Vec<Node>, running: Vec<RunningJob>, prio: i64, gpus: i64| {
        let pending = vec![pending("p", "research").prio(prio).req(&[("gpu", gpus)])];
        let snap = Snapshot { now_ms: 0, config: &config, nodes: &nodes, running: &running, pending: &pending, limits: &[] };
        let plan = schedule(&snap);
        let p = plan.pending_info("p").expect("p waits");
        (p.headline.to_string(), p.reason.to_string())
    };
    let (h, full) = headline(gpu_queue(2, Some(LowerPriority)), vec![spot("spot-1", 8)], vec![low("r", 9, 2, 1)], 1, 1);
    assert_eq!(h, "Waiting for GPU: 2 of 2 in use in research; nothing of lower priority to preempt");
    assert_eq!(full, "queue research: flavor spot: gpu quota 2, in use 2, requested 1; no running job below priority 1 left to preempt");
    let (h, _) = headline(gpu_queue(8, None), vec![spot("spot-1", 8)], vec![low("r", 9, 2, 1)], 1, 8);
    assert_eq!(h, "Waiting for GPU: 2 of 8 in use in research");
    let (h, _) = headline(gpu_queue(8, None), vec![node("cpu-1").label("market", "ondemand").cap(&[("gpu", 8)])], vec![], 1, 1);
    assert_eq!(h, "Waiting for a node: none matches flavor spot");
}
