//! Kueue's scheduler performance baseline (test/performance/scheduler, configs/baseline)
//! replayed in simulated time through Berth's engine.
//!
//! 30 queues of nominal quota 20 CPU, LowerPriority preemption within each queue. Per queue:
//! 350 small (1 CPU, 200 ms, priority 50) every 100 ms, 100 medium (5 CPU, 500 ms, 100)
//! every 500 ms, 50 large (20 CPU, 1 s, 200) every 1.2 s — 15,000 jobs. Borrowing is
//! DISABLED (Kueue's baseline lets the 6 queues of each cohort borrow up to 100 CPU): Berth
//! has no cohorts yet, so every queue is held to its own 20 CPU. Nodes: 6 × 200 CPU, so
//! capacity never binds (at most 600 CPU of quota in use leaves ≥ 100 free on some node);
//! quota does. Run: `cargo bench -p berth-server --bench kueue_scenario`.

use std::time::Instant;

use app::config::{
    FlavorQuota, PreemptionPolicy, ResourceFlavor, ResourceGroup, ResourceQueue, ResourceQuotaSpec, SchedulerConfig,
    WithinQueuePreemption,
};
use server::engine::sim::{self, Arrival, Submit};
use server::engine::{self, Labels, Node, Resources};

const QUEUES: usize = 30;
/// (class, count, interval ms, cpu, runtime ms, priority)
const CLASSES: [(&str, i64, i64, i64, i64, i64); 3] =
    [("small", 350, 100, 1, 200, 50), ("medium", 100, 500, 5, 500, 100), ("large", 50, 1200, 20, 1000, 200)];

fn config() -> SchedulerConfig {
    let queues = (0..QUEUES)
        .map(|q| ResourceQueue {
            name: format!("cq-{q:02}"),
            preemption: Some(PreemptionPolicy {
                within_resource_queue: Some(WithinQueuePreemption::LowerPriority),
                ..Default::default()
            }),
            resource_groups: Some(vec![ResourceGroup {
                covered_resources: vec!["cpu".into()],
                flavors: vec![FlavorQuota {
                    name: "default".into(),
                    resources: Some(vec![ResourceQuotaSpec {
                        name: "cpu".into(),
                        nominal_quota: Some(20.0),
                        ..Default::default()
                    }]),
                }],
            }]),
            ..Default::default()
        })
        .collect();
    SchedulerConfig {
        resource_flavors: Some(vec![ResourceFlavor { name: "default".into(), selector: None, advanced_instance_config: None }]),
        resource_queues: Some(queues),
        ..Default::default()
    }
}

/// User + system CPU time of this process, from /proc (Linux); `None` elsewhere.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0) // USER_HZ is 100 on Linux
}

fn main() {
    let compiled = engine::compile(&config()).expect("scenario config compiles");
    let nodes: Vec<Node> = (0..6)
        .map(|i| Node {
            id: format!("node-{i}").into(),
            backend: "sim".into(),
            labels: Labels::new(),
            capacity: Resources::units(&[("cpu", 200)]),
            used_outside: Resources::default(),
        })
        .collect();
    let mut arrivals = Vec::new();
    let mut class_of = Vec::new();
    for q in 0..QUEUES {
        for (ci, &(class, count, every, cpu, runtime, priority)) in CLASSES.iter().enumerate() {
            for k in 0..count {
                arrivals.push(Arrival {
                    id: format!("cq-{q:02}-{class}-{k:03}").into(),
                    at_ms: k * every,
                    submit: Submit::Queue { queue: format!("cq-{q:02}").into(), priority },
                    request: Resources::units(&[("cpu", cpu)]),
                    runtime_ms: runtime,
                    withdraw_at_ms: None,
                });
                class_of.push(ci);
            }
        }
    }

    let cpu0 = cpu_seconds();
    let t = Instant::now();
    let report = sim::run(&compiled, &nodes, &arrivals, &sim::Options::default());
    let real = t.elapsed().as_secs_f64();
    let cpu = cpu_seconds().zip(cpu0).map(|(a, b)| a - b);

    let unfinished = report.jobs.iter().filter(|j| j.finished_ms.is_none()).count();
    let mut last = [0i64; 3];
    let mut first = [0i64; 3];
    let mut n = [0i64; 3];
    let mut evictions = [0u32; 3];
    for (j, &c) in report.jobs.iter().zip(&class_of) {
        // Kueue's recorder measures to the last admission (it resets on re-admission).
        last[c] += j.last_admitted_ms.unwrap_or(report.end_ms) - j.arrived_ms;
        first[c] += j.first_admitted_ms.unwrap_or(report.end_ms) - j.arrived_ms;
        evictions[c] += j.preempted;
        n[c] += 1;
    }
    let (from, to) = (0, report.end_ms);
    let mut min_usage = f64::MAX;
    let (mut used, mut quota) = (0.0, 0.0);
    // Only the 30 quota'd queues: compile also lists the built-in unlimited `default` queue
    // (this config has no rules), which no job uses here.
    for s in report.usage.iter().filter(|s| s.nominal.is_some()) {
        let nominal = s.nominal.map_or(0.0, |m| m.0 as f64);
        let avg = s.average(from, to);
        min_usage = min_usage.min(avg / nominal * 100.0);
        used += avg;
        quota += nominal;
    }

    println!("Kueue scheduler performance baseline, replayed in simulated time through the Berth engine");
    println!(
        "{} jobs over {QUEUES} queues of 20 CPU, LowerPriority preemption; borrowing DISABLED (no cohorts in Berth); \
         nodes 6 x 200 CPU (never the bottleneck)",
        arrivals.len()
    );
    println!();
    println!("{:<48} | {:>12} | {:>12} | {:>4}", "metric", "berth", "kueue limit", "ok");
    println!("{}", "-".repeat(86));
    let row = |name: &str, got: f64, limit: f64, le: bool, unit: &str| {
        let ok = if le { got <= limit } else { got >= limit };
        let op = if le { "<=" } else { ">=" };
        println!("{name:<48} | {:>10.1} {unit} | {op} {:>7.0} {unit} | {:>4}", got, limit, if ok { "yes" } else { "NO" });
    };
    row("wall time to finish (simulated)", report.end_ms as f64 / 1e3, 425.0, true, "s");
    for (c, limit) in [(2usize, 23.0), (1, 90.0), (0, 260.0)] {
        row(
            &format!("avg time to admission, {} (last admission)", CLASSES[c].0),
            last[c] as f64 / n[c] as f64 / 1e3,
            limit,
            true,
            "s",
        );
    }
    row("minimum queue usage (time-weighted)", min_usage, 50.0, false, "%");
    println!();
    for c in [2usize, 1, 0] {
        println!(
            "  {:<7} jobs {:>5}, avg to first admission {:>7.1} s, evictions {:>5}",
            CLASSES[c].0,
            n[c],
            first[c] as f64 / n[c] as f64 / 1e3,
            evictions[c]
        );
    }
    println!("  class usage (sum of usage / sum of quota, Kueue's summary): {:.1} %", used / quota * 100.0);
    println!(
        "  cycles {}, decisions {}, admissions {}, preemptions {}, unfinished {}",
        report.cycles, report.decisions, report.admissions, report.preemptions, unfinished
    );
    match cpu {
        Some(cpu) => println!("  real time of the replay: {real:.3} s wall, {cpu:.2} s CPU"),
        None => println!("  real time of the replay: {real:.3} s wall"),
    }
}
