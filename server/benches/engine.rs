//! Cost of one admission cycle at scale: 50 queues × 4 flavors × 3 resources, 1,000 nodes,
//! 1k / 10k / 100k pending jobs over a cluster already half full; then the same with the 50
//! queues in 5 cohorts of 10 (borrowing without limit, even queues reclaiming lower
//! priority), so the two rows stand side by side.
//!
//! Prints a plain table per variant: cycle time, decisions per second, cost per decision (and
//! its ratio 100k vs 1k), what the cycle decided, and bytes per pending job measured with a
//! counting global allocator. Run: `cargo bench -p berth-server --bench engine`.

mod support;
use support::{Counting, Rng, LIVE, PEAK};

use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use app::config::{
    CohortPreemption, FlavorQuota, MatchExpression, Operator, PreemptionPolicy, ResourceFlavor, ResourceGroup, ResourceQueue,
    ResourceQuotaSpec, SchedulerConfig, WithinQueuePreemption,
};
use server::engine::{self, Compiled, Labels, Milli, Name, Node, PendingJob, Resources, RunningJob, Snapshot};

#[global_allocator]
static GLOBAL: Counting = Counting;

const QUEUES: usize = 50;
const POOLS: [&str; 4] = ["a100", "h100", "cpu-spot", "cpu-ondemand"];
const NODES: usize = 1_000;

fn config(cohorts: bool) -> SchedulerConfig {
    let flavors = POOLS
        .iter()
        .map(|p| ResourceFlavor {
            name: p.to_string(),
            selector: Some(vec![MatchExpression { key: "pool".into(), operator: Operator::In, values: Some(vec![p.to_string()]) }]),
            advanced_instance_config: None,
        })
        .collect();
    let quota = |name: &str, n: f64| ResourceQuotaSpec { name: name.into(), nominal_quota: Some(n), ..Default::default() };
    let queues = (0..QUEUES)
        .map(|q| ResourceQueue {
            name: format!("team-{q:02}"),
            preemption: (q % 2 == 0).then(|| PreemptionPolicy {
                within_resource_queue: Some(WithinQueuePreemption::LowerPriority),
                reclaim_within_cohort: cohorts.then_some(CohortPreemption::LowerPriority),
                ..Default::default()
            }),
            cohort_name: cohorts.then(|| format!("org-{}", q / 10)),
            resource_groups: Some(vec![ResourceGroup {
                covered_resources: vec!["cpu".into(), "gpu".into(), "memory_gb".into()],
                // Each queue prefers the pools in a different rotation.
                flavors: (0..4)
                    .map(|k| FlavorQuota {
                        name: POOLS[(q + k) % 4].into(),
                        resources: Some(vec![
                            quota("cpu", 300.0),
                            // CPU pools have no GPUs: quota 0 blocks instead of a node scan.
                            quota("gpu", if (q + k) % 4 < 2 { 40.0 } else { 0.0 }),
                            quota("memory_gb", 2400.0),
                        ]),
                    })
                    .collect(),
            }]),
            ordering_policy: Some(["fifo", "large_resource", "small_first"][q % 3].into()),
            placement_policy: Some(["bin_packing", "spread"][q % 2].into()),
            queueing_strategy: Some(if q % 10 == 9 { "strict_fifo" } else { "best_effort_fifo" }.into()),
            ..Default::default()
        })
        .collect();
    SchedulerConfig { resource_flavors: Some(flavors), resource_queues: Some(queues), ..Default::default() }
}

fn nodes() -> Vec<Node> {
    (0..NODES)
        .map(|i| {
            let pool = POOLS[i % 4];
            let gpus = if i % 4 < 2 { 8 } else { 0 };
            Node {
                id: format!("node-{i:04}").into(),
                backend: "ray".into(),
                labels: Labels::from([("pool".to_string(), pool.to_string())]),
                capacity: Resources::units(&[("cpu", 64), ("gpu", gpus), ("memory_gb", 512)]),
                used_outside: Resources::default(),
            }
        })
        .collect()
}

/// Queue names and resource names shared, as a runtime would share them.
struct Names {
    queues: Vec<Name>,
    cpu: Name,
    gpu: Name,
    mem: Name,
}

fn jobs(rng: &mut Rng, names: &Names, prefix: &str, n: usize, prios: &[i64]) -> Vec<PendingJob> {
    (0..n)
        .map(|i| {
            let gpu = rng.pick(&[0, 0, 0, 0, 1, 2, 4, 8]);
            let req = [
                (names.cpu.clone(), Milli::units(rng.pick(&[1, 2, 4, 8, 16]))),
                (names.gpu.clone(), Milli::units(gpu)),
                (names.mem.clone(), Milli::units(rng.pick(&[2, 4, 8, 16, 32, 64]))),
            ];
            PendingJob {
                id: format!("{prefix}-{i:06}").into(),
                queue: names.queues[(rng.next() % QUEUES as u64) as usize].clone(),
                priority: rng.pick(prios),
                request: Resources::new(req),
                enqueued_at_ms: (rng.next() % 3_600_000) as i64,
            }
        })
        .collect()
}

/// A cluster already running what one cycle admitted from 20k low-priority jobs.
fn warm(c: &Compiled, nodes: &[Node], names: &Names) -> Vec<RunningJob> {
    let mut rng = Rng(0x5eed_0001);
    let pending = jobs(&mut rng, names, "warm", 20_000, &[0, 1, 2]);
    let plan = engine::schedule(&Snapshot { now_ms: 0, config: c, nodes, running: &[], pending: &pending, limits: &[] });
    let by_id: std::collections::HashMap<&str, &PendingJob> = pending.iter().map(|p| (&*p.id, p)).collect();
    plan.admissions
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let p = by_id[&*a.job];
            RunningJob {
                id: p.id.clone(),
                queue: p.queue.clone(),
                priority: p.priority,
                request: p.request.clone(),
                flavors: a.flavors.clone(),
                node: a.node.clone(),
                started_at_ms: i as i64,
            }
        })
        .collect()
}

fn main() {
    println!("berth admission engine, one cycle (single thread)");
    for cohorts in [false, true] {
        bench(cohorts);
    }
}

/// One variant's table and memory figures.
fn bench(cohorts: bool) {
    let compiled = engine::compile(&config(cohorts)).expect("bench config compiles");
    let nodes = nodes();
    let names = Names {
        queues: compiled.queue_names().cloned().collect(),
        cpu: "cpu".into(),
        gpu: "gpu".into(),
        mem: "memory_gb".into(),
    };
    let running = warm(&compiled, &nodes, &names);
    println!();
    println!("## {}", if cohorts { "cohorts: the 50 queues in 5 cohorts of 10, borrowing on" } else { "no cohorts" });
    println!(
        "setup: {QUEUES} queues x 4 flavors x 3 resources (cpu, gpu, memory_gb), {NODES} nodes, {} running jobs \
         (the admissions of a 20k warm-up cycle), priorities 0..9, 210 request shapes",
        running.len()
    );
    println!();
    println!(
        "{:>9} | {:>10} | {:>13} | {:>11} | {:>8} | {:>7} | {:>8} | {:>10}",
        "pending", "cycle ms", "decisions/s", "us/decision", "admitted", "victims", "waiting", "runs timed"
    );
    println!("{}", "-".repeat(98));
    let mut per_decision = Vec::new();
    for (n, reps) in [(1_000usize, 30), (10_000, 10), (100_000, 3)] {
        let mut rng = Rng(0xC0FFEE ^ n as u64);
        let pending = jobs(&mut rng, &names, "job", n, &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        let snap = Snapshot { now_ms: 3_600_000, config: &compiled, nodes: &nodes, running: &running, pending: &pending, limits: &[] };
        let mut best = f64::MAX;
        let mut plan = engine::schedule(&snap);
        for _ in 0..reps {
            let t = Instant::now();
            plan = engine::schedule(&snap);
            best = best.min(t.elapsed().as_secs_f64());
        }
        let us = best * 1e6 / n as f64;
        per_decision.push((n, us));
        println!(
            "{:>9} | {:>10.2} | {:>13.0} | {:>11.3} | {:>8} | {:>7} | {:>8} | {:>10}",
            n,
            best * 1e3,
            n as f64 / best,
            us,
            plan.admissions.len(),
            plan.victims().count(),
            plan.pending.len(),
            format!("best of {reps}")
        );
    }
    let (_, at_1k) = per_decision[0];
    let (_, at_100k) = *per_decision.last().unwrap();
    println!();
    println!("cost per decision at 100k / at 1k: {:.2}x   (target <= 2x)", at_100k / at_1k);

    // Memory: what a 100k backlog costs, input snapshot and the cycle's own peak (plan included).
    let n = 100_000;
    let mut rng = Rng(0xC0FFEE ^ n as u64);
    let before = LIVE.load(Relaxed);
    let pending = jobs(&mut rng, &names, "job", n, &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    let snapshot_bytes = LIVE.load(Relaxed) - before;
    let snap = Snapshot { now_ms: 3_600_000, config: &compiled, nodes: &nodes, running: &running, pending: &pending, limits: &[] };
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let t = Instant::now();
    let plan = engine::schedule(&snap);
    let secs = t.elapsed().as_secs_f64();
    let cycle_peak = PEAK.load(Relaxed) - base;
    let plan_bytes = LIVE.load(Relaxed) - base;
    println!();
    println!("memory per pending job at 100k (counting allocator, heap bytes):");
    println!("  {:<44} {:>8.0} B", "snapshot input (PendingJob + request + id)", snapshot_bytes as f64 / n as f64);
    println!("  {:<44} {:>8.0} B", "cycle peak above input (working copy + plan)", cycle_peak as f64 / n as f64);
    println!("  {:<44} {:>8.0} B", "  of which the plan it returns", plan_bytes as f64 / n as f64);
    println!(
        "  {:<44} {:>8.0} B   (target <= 2048 B)",
        "total",
        (snapshot_bytes + cycle_peak) as f64 / n as f64
    );
    println!();
    println!(
        "100k backlog evaluated in {:.3} s (target <= 5 s); {} admitted, {} waiting with reasons",
        secs,
        plan.admissions.len(),
        plan.pending.len()
    );
    if let Some(p) = plan.pending.iter().find(|p| p.reason.contains("quota")) {
        println!("sample reason: {} #{}: {}", p.job, p.position, p.reason);
    }
    if let Some(p) = plan.pending.iter().find(|p| p.reason.contains("has no room") || p.reason.contains("has room")) {
        println!("sample reason: {} #{}: {}", p.job, p.position, p.reason);
    }
}
