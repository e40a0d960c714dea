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
    };
    let report = sim::run(&config, &nodes, &[mk("ok", "ml"), mk("lost", "ops")], &sim::Options::default());
    assert_eq!(report.jobs[0].queue.as_deref(), Some("q"));
    assert_eq!(report.jobs[0].priority, 3);
    assert_eq!(report.jobs[0].finished_ms, Some(1));
    assert_eq!(report.jobs[1].rejected.as_deref(), Some("no scheduling rule matches labels team=ops"));
}
