//! Backends' in-flight caps: the engine admits no more runs on a backend than its cap, says
//! so in the reason, and a victim's run frees its slot.

use super::fixtures::*;
use crate::engine::*;

fn cpu_queue(preempts: bool) -> Compiled {
    let q = queue("team").group(&["cpu"], &[("any", &[("cpu", 100)])]);
    let q = if preempts { q.preemption(LowerPriority) } else { q };
    config().flavor("any", &[]).queue(q).compile()
}

fn limit(backend: &str, max: usize) -> InFlightLimit {
    InFlightLimit { backend: backend.into(), max_in_flight: max }
}

fn run(config: &Compiled, nodes: &[Node], running: &[RunningJob], pending: &[PendingJob], limits: &[InFlightLimit]) -> Plan {
    schedule(&Snapshot { now_ms: 0, config, nodes, running, pending, limits })
}

fn jobs(n: usize) -> Vec<PendingJob> {
    (0..n).map(|i| pending(&format!("p{i}"), "team").req(&[("cpu", 1)]).at(i as i64)).collect()
}

#[test]
fn a_capped_backend_admits_up_to_its_cap_and_says_why_the_rest_wait() {
    let config = cpu_queue(false);
    let nodes = [node("ray-a-1").backend("ray-a").cap(&[("cpu", 64)])];
    let running = [running("r0", "team").req(&[("cpu", 1)]).on("any", "ray-a-1")];
    let plan = run(&config, &nodes, &running, &jobs(5), &[limit("ray-a", 4)]);
    let admitted: Vec<&str> = plan.admissions.iter().map(|a| &*a.job).collect();
    assert_eq!(admitted, ["p0", "p1", "p2"], "one run in flight plus three admitted makes the cap of 4");
    assert_eq!(plan.pending.len(), 2);
    for p in &plan.pending {
        assert_eq!(&*p.reason, "queue team: cluster ray-a: 4 of 4 in flight", "{}", p.job);
    }
}

#[test]
fn an_uncapped_backend_beside_a_full_one_takes_the_rest() {
    let config = cpu_queue(false);
    let nodes = [node("ray-a-1").backend("ray-a").cap(&[("cpu", 64)]), node("local").cap(&[("cpu", 2)])];
    let plan = run(&config, &nodes, &[], &jobs(5), &[limit("ray-a", 2)]);
    let on = |b: &str| plan.admissions.iter().filter(|a| &*a.backend == b).count();
    assert_eq!((on("ray-a"), on("local")), (2, 2));
    assert_eq!(plan.pending.len(), 1);
    assert!(plan.pending[0].reason.contains("cluster ray-a: 2 of 2 in flight"), "{}", plan.pending[0].reason);
}

#[test]
fn without_limits_the_same_snapshot_admits_everything_that_fits() {
    let config = cpu_queue(false);
    let nodes = [node("ray-a-1").backend("ray-a").cap(&[("cpu", 64)])];
    let plan = run(&config, &nodes, &[], &jobs(5), &[]);
    assert_eq!(plan.admissions.len(), 5);
}

#[test]
fn preempting_a_run_on_the_capped_backend_frees_its_slot() {
    let config = cpu_queue(true);
    let nodes = [node("ray-a-1").backend("ray-a").cap(&[("cpu", 64)])];
    let running = [running("low", "team").prio(1).req(&[("cpu", 1)]).on("any", "ray-a-1").started(5)];
    let urgent = [pending("urgent", "team").prio(9).req(&[("cpu", 1)])];
    let plan = run(&config, &nodes, &running, &urgent, &[limit("ray-a", 1)]);
    assert_eq!(plan.preemptions.len(), 1, "{plan:#?}");
    assert_eq!(plan.preemptions[0].victims.iter().map(|v| &*v.job).collect::<Vec<_>>(), ["low"]);
    assert_eq!(plan.admissions.len(), 1);
    assert_eq!(&*plan.admissions[0].job, "urgent");
}

#[test]
fn an_equal_priority_job_does_not_preempt_for_a_slot() {
    let config = cpu_queue(true);
    let nodes = [node("ray-a-1").backend("ray-a").cap(&[("cpu", 64)])];
    let running = [running("first", "team").prio(5).req(&[("cpu", 1)]).on("any", "ray-a-1")];
    let next = [pending("next", "team").prio(5).req(&[("cpu", 1)])];
    let plan = run(&config, &nodes, &running, &next, &[limit("ray-a", 1)]);
    assert!(plan.preemptions.is_empty() && plan.admissions.is_empty());
    assert!(plan.pending[0].reason.starts_with("queue team: cluster ray-a: 1 of 1 in flight"), "{}", plan.pending[0].reason);
}
