//! Table cases for flavor assignment, quotas, placement, ordering and queueing strategy.

use super::fixtures::*;
use crate::engine::*;

fn two_flavors(q: QueueB) -> Compiled {
    config().flavor("spot", &[("market", "spot")]).flavor("on-demand", &[("market", "on-demand")]).queue(q).compile()
}

fn research() -> QueueB {
    queue("research").group(&["gpu"], &[("spot", &[("gpu", 64)]), ("on-demand", &[("gpu", 16)])])
}

fn one_flavor(q: QueueB) -> Compiled {
    config().flavor("spot", &[("market", "spot")]).queue(q).compile()
}

fn spot(id: &str, gpus: i64) -> Node {
    node(id).label("market", "spot").cap(&[("gpu", gpus)])
}

fn on_demand(id: &str, gpus: i64) -> Node {
    node(id).label("market", "on-demand").cap(&[("gpu", gpus)])
}

#[test]
fn flavor_assignment_and_quotas() {
    check(vec![
        Case {
            name: "fits the first flavor",
            config: two_flavors(research()),
            nodes: vec![spot("spot-1", 8), on_demand("od-1", 8)],
            running: vec![],
            pending: vec![pending("j1", "research").req(&[("gpu", 8)])],
            want: plan(vec![admit("j1", "research", &[("spot", &["gpu"])], "spot-1")], vec![], vec![]),
        },
        Case {
            name: "first flavor's quota used up: the second flavor",
            config: two_flavors(research()),
            nodes: vec![spot("spot-0", 64), spot("spot-1", 8), on_demand("od-1", 8)],
            running: vec![running("r1", "research").req(&[("gpu", 60)]).on("spot", "spot-0")],
            pending: vec![pending("j1", "research").req(&[("gpu", 8)])],
            want: plan(vec![admit("j1", "research", &[("on-demand", &["gpu"])], "od-1")], vec![], vec![]),
        },
        Case {
            name: "nothing fits: one sentence per flavor tried",
            config: two_flavors(research()),
            nodes: vec![spot("spot-0", 64)],
            running: vec![running("r1", "research").req(&[("gpu", 60)]).on("spot", "spot-0")],
            pending: vec![pending("j1", "research").req(&[("gpu", 8)])],
            want: plan(vec![], vec![], vec![wait(
                "j1",
                "research",
                1,
                "queue research: flavor spot: gpu quota 64, in use 60, requested 8; \
                 flavor on-demand: no node matches market in [on-demand]",
            )]),
        },
        Case {
            name: "nominal_quota 0 blocks",
            config: one_flavor(queue("research").group(&["gpu"], &[("spot", &[("gpu", 0)])])),
            nodes: vec![spot("spot-1", 8)],
            running: vec![],
            pending: vec![pending("j1", "research").req(&[("gpu", 1)])],
            want: plan(vec![], vec![], vec![wait("j1", "research", 1, "queue research: flavor spot: gpu quota 0, in use 0, requested 1")]),
        },
        Case {
            name: "omitted nominal_quota is unlimited; nodes still bound",
            config: one_flavor(queue("research").group_f(&["gpu"], &[("spot", vec![("gpu", None)])])),
            nodes: vec![spot("spot-2", 8), spot("spot-1", 8)],
            running: vec![],
            pending: vec![
                pending("j1", "research").req(&[("gpu", 8)]).at(1),
                pending("j2", "research").req(&[("gpu", 8)]).at(2),
                pending("j3", "research").req(&[("gpu", 8)]).at(3),
            ],
            want: plan(
                vec![
                    admit("j1", "research", &[("spot", &["gpu"])], "spot-1"),
                    admit("j2", "research", &[("spot", &["gpu"])], "spot-2"),
                ],
                vec![],
                vec![wait("j3", "research", 1, "queue research: flavor spot: none of the 2 matching nodes has room for gpu 8")],
            ),
        },
        Case {
            name: "three decimals add up exactly (0.1 + 0.1 + 0.1 = 0.3)",
            config: config()
                .flavor("local", &[])
                .queue(queue("q").group_f(&["cpu"], &[("local", vec![("cpu", Some(0.3))])]))
                .compile(),
            nodes: vec![node("n1").cap(&[("cpu", 4)])],
            running: vec![],
            pending: ["a", "b", "c", "d"]
                .iter()
                .enumerate()
                .map(|(i, id)| pending(id, "q").req_milli(&[("cpu", 100)]).at(i as i64))
                .collect(),
            want: plan(
                vec![
                    admit("a", "q", &[("local", &["cpu"])], "n1"),
                    admit("b", "q", &[("local", &["cpu"])], "n1"),
                    admit("c", "q", &[("local", &["cpu"])], "n1"),
                ],
                vec![],
                vec![wait("d", "q", 1, "queue q: flavor local: cpu quota 0.3, in use 0.3, requested 0.1")],
            ),
        },
        Case {
            name: "node capacity binds when quota does not",
            config: two_flavors(research()),
            nodes: vec![spot("spot-1", 8)],
            running: vec![running("r1", "research").req(&[("gpu", 4)]).on("spot", "spot-1")],
            pending: vec![pending("j1", "research").req(&[("gpu", 8)])],
            want: plan(vec![], vec![], vec![wait(
                "j1",
                "research",
                1,
                "queue research: flavor spot: the only matching node, spot-1, has no room for gpu 8; \
                 flavor on-demand: no node matches market in [on-demand]",
            )]),
        },
        Case {
            name: "a flavor without selector and no nodes",
            config: config().flavor("local", &[]).queue(queue("q").group(&["cpu"], &[("local", &[])])).compile(),
            nodes: vec![],
            running: vec![],
            pending: vec![pending("j1", "q").req(&[("cpu", 1)])],
            want: plan(vec![], vec![], vec![wait("j1", "q", 1, "queue q: flavor local: no node is available")]),
        },
        Case {
            name: "admission carries the node's backend",
            config: one_flavor(queue("research").group(&["gpu"], &[("spot", &[])])),
            nodes: vec![spot("ray-1", 8).backend("ray")],
            running: vec![],
            pending: vec![pending("j1", "research").req(&[("gpu", 1)])],
            want: plan(
                vec![Admission { backend: "ray".into(), ..admit("j1", "research", &[("spot", &["gpu"])], "ray-1") }],
                vec![],
                vec![],
            ),
        },
    ]);
}

#[test]
fn multi_group_requests_run_on_one_node_matching_every_flavor() {
    let ml = || {
        config()
            .flavor("standard", &[("pool", "cpu")])
            .flavor("a100", &[("gpu", "a100")])
            .queue(
                queue("ml")
                    .group(&["cpu", "memory_gb"], &[("standard", &[("cpu", 64), ("memory_gb", 256)])])
                    .group(&["gpu"], &[("a100", &[("gpu", 8)])]),
            )
            .compile()
    };
    let cpu_node = node("cpu-1").label("pool", "cpu").cap(&[("cpu", 64), ("memory_gb", 256)]);
    let gpu_node =
        node("gpu-1").label("pool", "cpu").label("gpu", "a100").cap(&[("cpu", 32), ("memory_gb", 128), ("gpu", 8)]);
    check(vec![
        Case {
            name: "gpu job on the node matching both selectors; cpu job kept off the gpu node",
            config: ml(),
            nodes: vec![cpu_node.clone(), gpu_node.clone()],
            running: vec![],
            pending: vec![
                pending("j", "ml").req(&[("cpu", 8), ("memory_gb", 32), ("gpu", 1)]).at(1),
                pending("j2", "ml").req(&[("cpu", 4)]).at(2),
            ],
            want: plan(
                vec![
                    admit("j", "ml", &[("standard", &["cpu", "memory_gb"]), ("a100", &["gpu"])], "gpu-1"),
                    admit("j2", "ml", &[("standard", &["cpu"])], "cpu-1"),
                ],
                vec![],
                vec![],
            ),
        },
        Case {
            name: "no node matches every chosen flavor",
            config: ml(),
            nodes: vec![cpu_node, node("gpu-2").label("gpu", "a100").cap(&[("cpu", 32), ("memory_gb", 128), ("gpu", 8)])],
            running: vec![],
            pending: vec![pending("j", "ml").req(&[("cpu", 8), ("gpu", 1)])],
            want: plan(vec![], vec![], vec![wait(
                "j",
                "ml",
                1,
                "queue ml: flavors standard + a100: no node matches pool in [cpu] and gpu in [a100]",
            )]),
        },
    ]);
}

#[test]
fn placement_policies() {
    let nodes = || vec![spot("n-a", 8), spot("n-b", 8)];
    let busy = || vec![running("r0", "research").req(&[("gpu", 4)]).on("spot", "n-a")];
    let job = || vec![pending("j1", "research").req(&[("gpu", 2)])];
    let q = || queue("research").group(&["gpu"], &[("spot", &[("gpu", 64)])]);
    check(vec![
        Case {
            name: "bin_packing (default) fills the fuller node",
            config: one_flavor(q()),
            nodes: nodes(),
            running: busy(),
            pending: job(),
            want: plan(vec![admit("j1", "research", &[("spot", &["gpu"])], "n-a")], vec![], vec![]),
        },
        Case {
            name: "spread picks the emptier node",
            config: one_flavor(q().placement("spread")),
            nodes: nodes(),
            running: busy(),
            pending: job(),
            want: plan(vec![admit("j1", "research", &[("spot", &["gpu"])], "n-b")], vec![], vec![]),
        },
    ]);
}

#[test]
fn ordering_policies_within_priority() {
    let q = |ordering: Option<&str>| {
        let q = queue("research").group(&["gpu"], &[("spot", &[("gpu", 4)])]);
        one_flavor(match ordering {
            Some(o) => q.ordering(o),
            None => q,
        })
    };
    let small_then_big =
        || vec![pending("a", "research").req(&[("gpu", 1)]).at(1), pending("b", "research").req(&[("gpu", 4)]).at(2)];
    let big_then_small =
        || vec![pending("a", "research").req(&[("gpu", 4)]).at(1), pending("b", "research").req(&[("gpu", 1)]).at(2)];
    let full = |job: &str, used: i64, req: i64| {
        wait(job, "research", 1, &format!("queue research: flavor spot: gpu quota 4, in use {used}, requested {req}"))
    };
    let on = |job: &str| admit(job, "research", &[("spot", &["gpu"])], "spot-1");
    check(vec![
        Case {
            name: "fifo (default): enqueue order",
            config: q(None),
            nodes: vec![spot("spot-1", 8)],
            running: vec![],
            pending: small_then_big(),
            want: plan(vec![on("a")], vec![], vec![full("b", 1, 4)]),
        },
        Case {
            name: "large_resource: the bigger request first",
            config: q(Some("large_resource")),
            nodes: vec![spot("spot-1", 8)],
            running: vec![],
            pending: small_then_big(),
            want: plan(vec![on("b")], vec![], vec![full("a", 4, 1)]),
        },
        Case {
            name: "small_first: the smaller request first",
            config: q(Some("small_first")),
            nodes: vec![spot("spot-1", 8)],
            running: vec![],
            pending: big_then_small(),
            want: plan(vec![on("b")], vec![], vec![full("a", 1, 4)]),
        },
        Case {
            name: "priority before policy and enqueue time",
            config: q(Some("small_first")),
            nodes: vec![spot("spot-1", 8)],
            running: vec![],
            pending: vec![
                pending("a", "research").req(&[("gpu", 1)]).at(1),
                pending("b", "research").req(&[("gpu", 4)]).at(2).prio(5),
            ],
            want: plan(vec![on("b")], vec![], vec![full("a", 4, 1)]),
        },
        Case {
            name: "same priority and time: by id",
            config: q(None),
            nodes: vec![spot("spot-1", 8)],
            running: vec![],
            pending: vec![pending("x2", "research").req(&[("gpu", 4)]), pending("x1", "research").req(&[("gpu", 4)])],
            want: plan(vec![on("x1")], vec![], vec![full("x2", 4, 4)]),
        },
    ]);
}

#[test]
fn queueing_strategies() {
    let q = || queue("research").group(&["gpu"], &[("spot", &[("gpu", 8)])]);
    let busy = || vec![running("r1", "research").req(&[("gpu", 4)]).on("spot", "spot-1")];
    let jobs =
        || vec![pending("big", "research").req(&[("gpu", 8)]).at(1), pending("small", "research").req(&[("gpu", 2)]).at(2)];
    let big_waits = wait("big", "research", 1, "queue research: flavor spot: gpu quota 8, in use 4, requested 8");
    check(vec![
        Case {
            name: "best_effort_fifo (default): a job that does not fit does not block",
            config: one_flavor(q()),
            nodes: vec![spot("spot-1", 16)],
            running: busy(),
            pending: jobs(),
            want: plan(vec![admit("small", "research", &[("spot", &["gpu"])], "spot-1")], vec![], vec![big_waits.clone()]),
        },
        Case {
            name: "strict_fifo: the head blocks the queue and the reason says so",
            config: one_flavor(q().strict()),
            nodes: vec![spot("spot-1", 16)],
            running: busy(),
            pending: jobs(),
            want: plan(vec![], vec![], vec![
                big_waits,
                wait("small", "research", 2, "queue research: strict_fifo: waiting behind big, which does not fit"),
            ]),
        },
    ]);
}

#[test]
fn requests_and_queues_the_engine_cannot_serve() {
    let full_reason = "queue research: flavor spot: gpu quota 0, in use 0, requested 1";
    check(vec![
        Case {
            name: "uncovered resource, empty request, unknown queue",
            config: one_flavor(queue("research").group(&["gpu"], &[("spot", &[])])),
            nodes: vec![spot("spot-1", 8).cap(&[("gpu", 8), ("cpu", 8)])],
            running: vec![],
            pending: vec![
                pending("cpu-too", "research").req(&[("cpu", 1), ("gpu", 1)]).at(1),
                pending("nothing", "research").at(2),
                pending("lost", "ghost").req(&[("gpu", 1)]),
            ],
            want: plan(vec![], vec![], vec![
                wait("lost", "ghost", 1, "queue ghost is not defined in the active config"),
                wait("cpu-too", "research", 1, "queue research: no resource group covers cpu"),
                wait("nothing", "research", 2, "queue research: must request at least one resource"),
            ]),
        },
        Case {
            name: "positions are 1..n in admission order within the queue",
            config: one_flavor(queue("research").group(&["gpu"], &[("spot", &[("gpu", 0)])])),
            nodes: vec![spot("spot-1", 8)],
            running: vec![],
            pending: vec![
                pending("c", "research").req(&[("gpu", 1)]).at(3),
                pending("a", "research").req(&[("gpu", 1)]).at(1),
                pending("b", "research").req(&[("gpu", 1)]).at(2),
            ],
            want: plan(vec![], vec![], vec![
                wait("a", "research", 1, full_reason),
                wait("b", "research", 2, full_reason),
                wait("c", "research", 3, full_reason),
            ]),
        },
    ]);
}

#[test]
fn builtin_default_queue_and_competition_between_queues() {
    let local = || config().flavor("local", &[]);
    let unlimited = |name: &str| queue(name).group(&["cpu"], &[("local", &[])]);
    check(vec![
        Case {
            name: "no rules, no queues: the built-in default takes any resource, nodes bound",
            config: config().compile(),
            nodes: vec![node("n1").cap(&[("cpu", 4), ("tpu", 2)])],
            running: vec![],
            pending: vec![
                pending("j", "default").req(&[("tpu", 1)]).at(1),
                pending("j2", "default").req(&[("cpu", 8)]).at(2),
            ],
            want: plan(
                vec![admit("j", "default", &[("default", &["tpu"])], "n1")],
                vec![],
                vec![wait("j2", "default", 1, "queue default: flavor default: the only matching node, n1, has no room for cpu 8")],
            ),
        },
        Case {
            name: "capacity used outside Berth is not free: the smaller job fits, the larger waits, saying why",
            config: local().queue(unlimited("a")).compile(),
            nodes: vec![node("n1").cap(&[("cpu", 4)]).outside(&[("cpu", 3)])],
            running: vec![],
            pending: vec![pending("big", "a").req(&[("cpu", 2)]).at(1), pending("small", "a").req(&[("cpu", 1)]).at(2)],
            want: plan(
                vec![admit("small", "a", &[("local", &["cpu"])], "n1")],
                vec![],
                vec![wait(
                    "big",
                    "a",
                    1,
                    "queue a: flavor local: the only matching node, n1, has no room for cpu 2 \
                     (capacity cpu 4, of which 3 in use outside Berth)",
                )],
            ),
        },
        Case {
            name: "queues compete for nodes: higher priority head first",
            config: local().queue(unlimited("a")).queue(unlimited("b")).compile(),
            nodes: vec![node("n1").cap(&[("cpu", 4)])],
            running: vec![],
            pending: vec![pending("a1", "a").req(&[("cpu", 4)]).at(1), pending("b1", "b").req(&[("cpu", 4)]).at(2).prio(5)],
            want: plan(
                vec![admit("b1", "b", &[("local", &["cpu"])], "n1")],
                vec![],
                vec![wait("a1", "a", 1, "queue a: flavor local: the only matching node, n1, has no room for cpu 4")],
            ),
        },
        Case {
            name: "queues compete for nodes: same priority, earlier enqueue first",
            config: local().queue(unlimited("a")).queue(unlimited("b")).compile(),
            nodes: vec![node("n1").cap(&[("cpu", 4)])],
            running: vec![],
            pending: vec![pending("a1", "a").req(&[("cpu", 4)]).at(2), pending("b1", "b").req(&[("cpu", 4)]).at(1)],
            want: plan(
                vec![admit("b1", "b", &[("local", &["cpu"])], "n1")],
                vec![],
                vec![wait("a1", "a", 1, "queue a: flavor local: the only matching node, n1, has no room for cpu 4")],
            ),
        },
    ]);
}
