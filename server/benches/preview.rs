//! The what-if preview at a day's scale: 50,000 recorded jobs over 50 queues (half of them
//! preempting), on 100 nodes, replayed under the active config and a draft that halves the ten
//! busiest queues' quotas and drops the catch-all rule. Target: ≤ 5 s and ≤ 200 MB for the whole preview (load from the database,
//! both replays, the report).
//!
//! The record is made by replaying the workload once under the active config and writing
//! what happened (with up to 1.5 s of loop latency) into a fresh database; that setup is not
//! measured. Prints a table: preview time (and the load alone), heap peak above the baseline
//! measured with a counting allocator, and the process's peak RSS. SQLite always,
//! PostgreSQL when BERTH_BENCH_PG_URL names an admin URL. Run: `cargo bench -p berth-server
//! --bench preview`.

mod support;
use support::{fresh_db, Counting, Rng, LIVE, PEAK};

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use app::config::parse::{parse, Format};
use app::config::SchedulerConfig;
use app::jobs::{FlavorUse, JobRequest, JobState, ResourceRequest};
use server::engine::sim::{self, Arrival, Submit};
use server::engine::{self, Labels, Node, Resources};
use server::services::preview::{self, Control, Sources, Span};
use server::store::jobs::{JobRow, JobStore};
use server::services::config::ConfigService;
use server::store::config::{ApplyMeta, ConfigStore};

#[global_allocator]
static GLOBAL: Counting = Counting;

const QUEUES: usize = 50;
/// Queues from this one on preempt lower priority (the quieter half).
const PREEMPTING_FROM: usize = 25;
const JOBS_IN_WINDOW: i64 = 50_000;
const DAY_MS: i64 = 86_400_000;
/// The record starts an hour before the window, so jobs are running and waiting at its start.
const LEAD_MS: i64 = 3_600_000;

/// 50 queues; each has a GPU pool flavor (cpu 96, gpu 8) and a CPU pool flavor (cpu 64);
/// q25–q49 preempt lower priority; rule `team=tNN` → `qNN`, priorities 0..=100; a catch-all
/// to q49.
fn active_yaml() -> String {
    let mut y = String::from(
        "resource_flavors:\n  - name: gpu-pool\n    selector: [{key: pool, operator: in, values: [gpu]}]\n  - name: cpu-pool\n    selector: [{key: pool, operator: in, values: [cpu]}]\nresource_queues:\n",
    );
    for q in 0..QUEUES {
        let preemption = if q >= PREEMPTING_FROM { "lower_priority" } else { "never" };
        y.push_str(&format!(
            "  - name: q{q:02}\n    preemption: {{within_resource_queue: {preemption}}}\n    resource_groups:\n      - covered_resources: [cpu, gpu]\n        flavors:\n          - {{name: gpu-pool, resources: [{{name: cpu, nominal_quota: 96}}, {{name: gpu, nominal_quota: 8}}]}}\n          - {{name: cpu-pool, resources: [{{name: cpu, nominal_quota: 64}}, {{name: gpu, nominal_quota: 0}}]}}\n"
        ));
    }
    y.push_str("scheduling_rules:\n");
    for q in 0..QUEUES {
        y.push_str(&format!(
            "  - resource_queue: q{q:02}\n    selector: [{{key: team, operator: in, values: [t{q:02}]}}]\n    priority_policy: {{default: 10, min: 0, max: 100, on_violation: reject}}\n"
        ));
    }
    y.push_str("  - resource_queue: q49\n");
    y
}

/// Halves q00–q09's quotas and drops the catch-all.
fn draft_yaml(active: &str) -> String {
    let mut out = String::new();
    let mut queue = usize::MAX;
    let without_catch_all = active.strip_suffix("  - resource_queue: q49\n").unwrap_or(active);
    for line in without_catch_all.lines() {
        if let Some(rest) = line.strip_prefix("  - name: q") {
            queue = rest.parse().unwrap_or(usize::MAX);
        }
        if queue < 10 && line.contains("nominal_quota") {
            out.push_str(&line.replace("nominal_quota: 96", "nominal_quota: 48").replace("nominal_quota: 64", "nominal_quota: 32").replace("nominal_quota: 8}", "nominal_quota: 4}"));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

fn config(text: &str) -> SchedulerConfig {
    parse(text, Format::Yaml).expect("bench config parses")
}

fn nodes() -> Vec<Node> {
    (0..100)
        .map(|i| {
            let gpu = i < 50;
            let mut labels = Labels::new();
            labels.insert("pool".into(), if gpu { "gpu" } else { "cpu" }.into());
            Node {
                id: format!("node-{i:03}").into(),
                backend: "local".into(),
                labels,
                capacity: if gpu { Resources::units(&[("cpu", 96), ("gpu", 8)]) } else { Resources::units(&[("cpu", 64)]) },
                used_outside: Resources::default(),
            }
        })
        .collect()
}

/// One generated job: its request and the arrival the recording replay uses.
struct Gen {
    team: usize,
    priority: Option<i64>,
    cpu: i64,
    gpu: i64,
    at_ms: i64,
    runtime_ms: i64,
}

/// Queue weights fall off like 1/(1 + q/4): the first queues are busy, the last quiet.
fn workload(window_from_ms: i64) -> Vec<Gen> {
    let mut rng = Rng(0x005e_ed0f_da7a);
    let weights: Vec<f64> = (0..QUEUES).map(|q| 1.0 / (1.0 + q as f64 / 4.0)).collect();
    let total: f64 = weights.iter().sum();
    let n = JOBS_IN_WINDOW + JOBS_IN_WINDOW * LEAD_MS / DAY_MS;
    let span = DAY_MS + LEAD_MS;
    (0..n)
        .map(|k| {
            let mut pick = (rng.below(1_000_000) as f64 / 1e6) * total;
            let mut team = 0;
            while team + 1 < QUEUES && pick >= weights[team] {
                pick -= weights[team];
                team += 1;
            }
            let gpu = if rng.below(4) == 0 { 1 + rng.below(4) as i64 } else { 0 };
            let cpu = 1 + rng.below(8) as i64;
            // Mostly minutes, sometimes an hour or two.
            let runtime_ms = match rng.below(10) {
                0 => 1_800_000 + rng.below(5_400_000) as i64,
                1..=3 => 300_000 + rng.below(900_000) as i64,
                _ => 30_000 + rng.below(270_000) as i64,
            };
            let priority = match rng.below(20) {
                0 => Some(150), // above every rule's maximum: rejected
                1..=4 => Some(50),
                _ => None,
            };
            Gen { team, priority, cpu, gpu, at_ms: window_from_ms - LEAD_MS + k * span / n, runtime_ms }
        })
        .collect()
}

/// What happened under the active config, as rows: the recording (setup, not measured).
fn recorded(active: &SchedulerConfig, nodes: &[Node], jobs: &[Gen], now_ms: i64) -> Vec<JobRow> {
    let compiled = engine::compile(active).unwrap();
    let arrivals: Vec<Arrival> = jobs
        .iter()
        .enumerate()
        .map(|(i, g)| Arrival {
            id: format!("j-{i:06}").into(),
            at_ms: g.at_ms,
            submit: Submit::Labels { labels: Labels::from([("team".into(), format!("t{:02}", g.team))]), priority: g.priority },
            request: Resources::units(&[("cpu", g.cpu), ("gpu", g.gpu)]),
            runtime_ms: g.runtime_ms,
            withdraw_at_ms: None,
        })
        .collect();
    let report = sim::run(&compiled, nodes, &arrivals, &sim::Options { until_ms: Some(now_ms), ..sim::Options::default() });
    let mut rng = Rng(42);
    let us = |ms: i64| ms * 1000;
    report
        .jobs
        .iter()
        .zip(jobs)
        .enumerate()
        .map(|(i, (j, g))| {
            let latency = rng.below(1500) as i64;
            let admitted = j.last_admitted_ms.filter(|&a| a + latency <= now_ms).map(|a| a + latency);
            let finished = admitted.map(|a| a + g.runtime_ms).filter(|&f| f <= now_ms);
            let state = match (&j.rejected, admitted, finished) {
                (Some(_), _, _) => JobState::Rejected,
                (None, None, _) => JobState::Pending,
                (None, Some(_), None) => JobState::Running,
                (None, Some(_), Some(_)) => JobState::Succeeded,
            };
            let spec = JobRequest {
                entrypoint: "python train.py --epochs 10".into(),
                labels: [("team".to_string(), format!("t{:02}", g.team))].into(),
                priority: g.priority,
                resources: ResourceRequest { cpu: Some(g.cpu as f64), gpu: (g.gpu > 0).then_some(g.gpu as f64), ..Default::default() },
                ..Default::default()
            };
            JobRow {
                state,
                queue: j.queue.as_ref().map(|q| q.to_string()),
                runs: i64::from(admitted.is_some()),
                // The recording replay does not keep placements: GPU jobs on the GPU pool,
                // the others on the CPU pool, spread over its nodes.
                flavors: match admitted {
                    Some(_) if g.gpu > 0 => vec![FlavorUse { flavor: "gpu-pool".into(), resources: vec!["cpu".into(), "gpu".into()] }],
                    Some(_) => vec![FlavorUse { flavor: "cpu-pool".into(), resources: vec!["cpu".into()] }],
                    None => Vec::new(),
                },
                node: admitted.map(|_| format!("node-{:03}", if g.gpu > 0 { i % 50 } else { 50 + i % 50 })),
                backend: admitted.map(|_| "local".into()),
                admitted_at_us: admitted.map(us),
                started_at_us: admitted.map(us),
                finished_at_us: if state == JobState::Rejected { Some(us(g.at_ms)) } else { finished.map(us) },
                exit_code: finished.map(|_| 0),
                reason: j.rejected.clone(),
                ..JobRow::submitted(j.id.to_string(), "train".into(), "bench".into(), spec, j.priority, 2, us(g.at_ms))
            }
        })
        .collect()
}

/// Peak resident set of this process so far, in MB (Linux).
fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = status.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// User + system CPU seconds of this process so far (Linux).
fn cpu_s() -> f64 {
    support::cpu_seconds("self", false).unwrap_or(0.0)
}

struct Row {
    db: &'static str,
    case: &'static str,
    ms: f64,
    cpu_s: f64,
    heap_mb: f64,
    note: String,
}

async fn measure(db: &'static str, case: &'static str, src: &Sources, draft: &SchedulerConfig, span: Span, now_us: i64) -> Row {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let (t, cpu0) = (Instant::now(), cpu_s());
    let report = preview::preview(src, draft, span, now_us, Arc::new(Control::default())).await.expect("preview");
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let cpu_s = cpu_s() - cpu0;
    let heap_mb = (PEAK.load(Relaxed) - base) as f64 / 1e6;
    let changed: u64 = report.change_counts.iter().map(|c| c.count).sum();
    let note = format!(
        "{} jobs, {} running + {} waiting at start; {} changed; fidelity MAE {:.1} s",
        report.jobs,
        report.running_at_start,
        report.pending_at_start,
        changed,
        report.fidelity.wait_mae_s.unwrap_or(0.0)
    );
    Row { db, case, ms, cpu_s, heap_mb, note }
}

#[tokio::main]
async fn main() {
    let now_ms = 1_800_000_000_000i64;
    let span = Span { from_us: (now_ms - DAY_MS) * 1000, to_us: now_ms * 1000 };
    let active_text = active_yaml();
    let (active, draft) = (config(&active_text), config(&draft_yaml(&active_text)));
    let nodes = nodes();
    let jobs = workload(now_ms - DAY_MS);
    let t = Instant::now();
    let rows = recorded(&active, &nodes, &jobs, now_ms);
    let record_s = t.elapsed().as_secs_f64();
    drop(jobs);
    let mut table = Vec::new();
    for kind in ["sqlite", "postgres"] {
        let Some(db) = fresh_db(kind, "preview").await else { continue };
        let config = Arc::new(ConfigService::start(ConfigStore::new(db.clone())).await.unwrap());
        config.apply(&server::services::auth::Caller::anonymous(), &active, &ApplyMeta::default()).await.unwrap();
        let store = JobStore::new(db.clone());
        let t = Instant::now();
        for chunk in rows.chunks(2000) {
            store.insert(None, chunk, &[]).await.unwrap();
            let pairs: Vec<(&JobRow, bool)> = chunk.iter().map(|r| (r, false)).collect();
            store.update(0, &pairs, &[]).await.unwrap();
        }
        let fill_s = t.elapsed().as_secs_f64();
        println!("{kind}: recorded {} jobs in {fill_s:.1} s (setup)", rows.len());
        let src = Sources { config, store: store.clone(), nodes: Arc::new(nodes.clone()), limits: Arc::default() };
        let base = LIVE.load(Relaxed);
        PEAK.store(base, Relaxed);
        let (t, cpu0) = (Instant::now(), cpu_s());
        let mut n = 0u64;
        store.for_each_in_window(span.from_us, span.to_us, |_| n += 1).await.unwrap();
        table.push(Row {
            db: kind,
            case: "load the window only",
            ms: t.elapsed().as_secs_f64() * 1e3,
            cpu_s: cpu_s() - cpu0,
            heap_mb: (PEAK.load(Relaxed) - base) as f64 / 1e6,
            note: format!("{n} rows streamed"),
        });
        table.push(measure(kind, "preview: draft (2 replays)", &src, &draft, span, now_ms * 1000).await);
        table.push(measure(kind, "preview: identical (1 replay)", &src, &active, span, now_ms * 1000).await);
    }
    println!("recording replay (setup): {record_s:.2} s");
    println!();
    println!("What-if preview: {JOBS_IN_WINDOW} recorded jobs in 24 h over {QUEUES} queues, 100 nodes; draft halves 10 queues' quotas and drops the catch-all");
    println!();
    println!("{:<9} | {:<30} | {:>9} | {:>7} | {:>13} | {:>6} | notes", "database", "case", "time", "CPU", "heap peak", "target");
    println!("{}", "-".repeat(130));
    for r in &table {
        let ok = r.ms <= 5000.0 && r.heap_mb <= 200.0;
        println!("{:<9} | {:<30} | {:>6.0} ms | {:>5.1} s | {:>10.1} MB | {:>6} | {}", r.db, r.case, r.ms, r.cpu_s, r.heap_mb, if ok { "ok" } else { "NO" }, r.note);
    }
    if let Some(rss) = peak_rss_mb() {
        println!();
        println!("process peak RSS {rss:.0} MB (includes the setup: the generated record and the recording replay)");
        println!("time is wall time; CPU is user + system of both replay threads (on a shared machine, wall can exceed CPU / threads)");
    }
    support::remove_fresh_dirs();
}
