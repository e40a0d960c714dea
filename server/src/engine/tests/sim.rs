//! The simulated-time driver on a small workload whose every time can be worked out by hand.

use super::fixtures::*;
use crate::engine::sim::{self, Arrival, Submit};
use crate::engine::*;

fn arrival(id: &str, at: i64, prio: i64, cpu: i64, runtime: i64) -> Arrival {
    Arrival {
        id: id.into(),
        at_ms: at,
        submit: Submit::Queue { queue: "q".into(), priority: prio },
        request: Resources::units(&[("cpu", cpu)]),
        runtime_ms: runtime,
        withdraw_at_ms: None,
    }
}

#[test]
fn replays_admissions_finishes_and_preemptions() {
    let config = config()
        .flavor("local", &[])
        .queue(queue("q").preemption(LowerPriority).group(&["cpu"], &[("local", &[("cpu", 4)])]))
        .compile();
    let nodes = vec![node("n1").cap(&[("cpu", 8)])];
    let arrivals = vec![
        arrival("a", 0, 0, 4, 10),
        arrival("b", 1, 0, 4, 5),
        // c preempts a at 2; a goes back with its enqueue time 0, so it beats b at 5 and
        // restarts its 10 ms of work from scratch.
        arrival("c", 2, 5, 4, 3),
        arrival("huge", 3, 0, 100, 1),
    ];
    let report = sim::run(&config, &nodes, &arrivals, &sim::Options::default());
    let times: Vec<_> = report
        .jobs
        .iter()
        .map(|j| (&*j.id, j.first_admitted_ms, j.last_admitted_ms, j.finished_ms, j.preempted))
        .collect();
    assert_eq!(
        times,
        vec![
            ("a", Some(0), Some(5), Some(15), 1),
            ("b", Some(15), Some(15), Some(20), 0),
            ("c", Some(2), Some(2), Some(5), 0),
            ("huge", None, None, None, 0),
        ]
    );
    assert!(report.jobs[3].rejected.as_deref().unwrap().starts_with("requests cpu 100, more than any node"));
    assert_eq!(report.end_ms, 20);
    assert_eq!((report.admissions, report.preemptions), (4, 1));
    let usage = &report.usage[0];
    assert_eq!((&*usage.queue, &*usage.flavor, &*usage.resource, usage.nominal), ("q", "local", "cpu", Some(Milli::units(4))));
    let p = |t: i64, v: i64| (t, Milli::units(v));
    assert_eq!(usage.points, vec![p(0, 4), p(2, 4), p(5, 4), p(15, 4), p(20, 0)]);
    assert_eq!(usage.average(0, 20), 4000.0);
    // Pure: the same input gives the same report.
    assert_eq!(report, sim::run(&config, &nodes, &arrivals, &sim::Options::default()));
}

#[test]
fn routes_by_labels_and_records_rejections() {
    let config = config()
        .flavor("local", &[])
        .queue(queue("q").group(&["cpu"], &[("local", &[])]))
        .rule(rule("q").when(is_in("team", &["ml"])).priority(Some(3), None, None, None))
        .compile();
    let nodes = vec![node("n1").cap(&[("cpu", 8)])];
    let mk = |id: &str, team: &str| Arrival {
        id: id.into(),
        at_ms: 0,
        submit: Submit::Labels { labels: labels(&[("team", team)]), priority: None },
        request: Resources::units(&[("cpu", 1)]),
        runtime_ms: 1,
        withdraw_at_ms: None,
    };
    let report = sim::run(&config, &nodes, &[mk("ok", "ml"), mk("lost", "ops")], &sim::Options::default());
    assert_eq!(report.jobs[0].queue.as_deref(), Some("q"));
    assert_eq!(report.jobs[0].priority, 3);
    assert_eq!(report.jobs[0].finished_ms, Some(1));
    assert_eq!(report.jobs[1].rejected.as_deref(), Some("no scheduling rule matches labels team=ops"));
}

#[test]
fn starts_from_running_jobs_and_earlier_arrivals_and_honours_withdrawals() {
    let config = config()
        .flavor("local", &[])
        .queue(queue("q").group(&["cpu"], &[("local", &[("cpu", 4)])]))
        .compile();
    let nodes = vec![node("n1").cap(&[("cpu", 8)])];
    let held = Arrival {
        id: "held".into(),
        at_ms: 100,
        submit: Submit::Running {
            queue: "q".into(),
            priority: 0,
            flavors: vec![FlavorAssignment { flavor: "local".into(), resources: vec!["cpu".into()] }],
            node: "n1".into(),
            started_at_ms: 40,
        },
        request: Resources::units(&[("cpu", 4)]),
        runtime_ms: 10,
        withdraw_at_ms: None,
    };
    // "early" was enqueued before the start: it keeps its place ahead of "late".
    let early = arrival("early", 50, 0, 4, 5);
    let late = arrival("late", 100, 0, 4, 5);
    // "gone" is cancelled while it waits, "cut" while it runs.
    let gone = Arrival { withdraw_at_ms: Some(105), ..arrival("gone", 100, 0, 4, 5) };
    let cut = Arrival { withdraw_at_ms: Some(125), ..arrival("cut", 101, 0, 4, 50) };
    let opts = sim::Options { start_ms: Some(100), ..sim::Options::default() };
    let report = sim::run(&config, &nodes, &[held, early, late, gone, cut], &opts);
    let times: Vec<_> =
        report.jobs.iter().map(|j| (&*j.id, j.last_admitted_ms, j.finished_ms, j.withdrawn_ms)).collect();
    assert_eq!(
        times,
        vec![
            ("held", Some(40), Some(110), None),
            ("early", Some(110), Some(115), None),
            ("late", Some(115), Some(120), None),
            ("gone", None, None, Some(105)),
            ("cut", Some(120), None, Some(125)),
        ]
    );
    // Usage: held's 4 from the start, then each successor's, 0 once cut is withdrawn.
    let p = |t: i64, v: i64| (t, Milli::units(v));
    assert_eq!(report.usage[0].points, vec![p(100, 4), p(110, 4), p(115, 4), p(120, 4), p(125, 0)]);
}

#[test]
fn a_control_that_says_stop_cancels_the_run() {
    let config = config().flavor("local", &[]).queue(queue("q").group(&["cpu"], &[("local", &[])])).compile();
    let nodes = vec![node("n1").cap(&[("cpu", 1)])];
    let arrivals: Vec<Arrival> = (0..2000).map(|i| arrival(&format!("j{i}"), i, 0, 1, 1)).collect();
    let mut calls = 0;
    let out = sim::run_with(&config, &nodes, &arrivals, &sim::Options::default(), &mut |p| {
        calls += 1;
        assert!(p.submitted <= p.total);
        false
    });
    assert_eq!(out, Err(sim::Cancelled));
    assert_eq!(calls, 1);
}

/// Busy random workloads on queues of every kind: offering each cycle only the jobs quota
/// does not refuse (the gate) admits the same jobs at the same times as offering all.
#[test]
fn the_gate_changes_no_admission() {
    let config = config()
        .flavor("a", &[("pool", "a")])
        .flavor("b", &[("pool", "b")])
        .queue(queue("plain").group(&["cpu", "gpu"], &[("a", &[("cpu", 6), ("gpu", 2)]), ("b", &[("cpu", 4)])]))
        .queue(queue("strict").strict().group(&["cpu"], &[("a", &[("cpu", 3)])]))
        .queue(queue("big").ordering("large_resource").group(&["cpu"], &[("b", &[("cpu", 5)])]))
        .queue(queue("pre").preemption(LowerPriority).group(&["cpu", "gpu"], &[("a", &[("cpu", 4), ("gpu", 1)]), ("b", &[("cpu", 2)])]))
        .compile();
    let nodes = vec![
        node("a1").label("pool", "a").cap(&[("cpu", 8), ("gpu", 2)]),
        node("a2").label("pool", "a").cap(&[("cpu", 6), ("gpu", 2)]),
        node("b1").label("pool", "b").cap(&[("cpu", 8)]),
    ];
    let queues = ["plain", "strict", "big", "pre"];
    for seed in 1..=20u64 {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let arrivals: Vec<Arrival> = (0..400)
            .map(|i| {
                let q = queues[next(4) as usize];
                let gpu = if q == "plain" || q == "pre" { next(2) as i64 } else { 0 };
                Arrival {
                    id: format!("j{i:03}").into(),
                    at_ms: i as i64 * 3 + next(3) as i64,
                    submit: Submit::Queue { queue: q.into(), priority: next(3) as i64 * 10 },
                    request: Resources::units(&[("cpu", 1 + next(3) as i64), ("gpu", gpu)]),
                    runtime_ms: 5 + next(60) as i64,
                    withdraw_at_ms: (next(10) == 0).then(|| i as i64 * 3 + 20),
                }
            })
            .collect();
        let gated = sim::run(&config, &nodes, &arrivals, &sim::Options::default());
        let all = sim::run(&config, &nodes, &arrivals, &sim::Options { gate: false, ..sim::Options::default() });
        if let Some(k) = (0..gated.jobs.len()).find(|&k| gated.jobs[k] != all.jobs[k]) {
            panic!("seed {seed}: first difference at {k}:\n gated {:?}\n   all {:?}", gated.jobs[k], all.jobs[k]);
        }
        assert_eq!(gated.usage, all.usage, "seed {seed}");
        assert!(gated.decisions < all.decisions, "seed {seed}: the gate offered fewer jobs");
    }
}
