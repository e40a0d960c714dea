//! Accounting latency: `JobStore::usage` (what `GET /api/v1/usage` runs) over 100,000 ended
//! jobs, grouped by user, queue and label, on SQLite and PostgreSQL. Prints a table; the
//! bar (issue 27) is p95 <= 200 ms.
//!
//! `make bench` runs it; PostgreSQL is measured when BERTH_BENCH_PG_URL names an admin URL.

mod support;
use support::fresh_db;

use std::collections::BTreeMap;
use std::time::Instant;

use app::jobs::{JobRequest, JobState, ResourceRequest, UsageGroup};
use server::store::jobs::{JobRow, JobStore};

const JOBS: usize = 100_000;
const SAMPLES: usize = 30;

/// `JOBS` ended jobs over the last 30 days: 50 users, 8 queues, 12 teams, mixed states
/// and requests (setup, not measured).
async fn fill(store: &JobStore, now: i64) {
    let states = [JobState::Succeeded, JobState::Succeeded, JobState::Succeeded, JobState::Failed, JobState::Cancelled, JobState::TimedOut];
    let rows: Vec<JobRow> = (0..JOBS)
        .map(|i| {
            let spec = JobRequest {
                entrypoint: "python train.py".into(),
                labels: BTreeMap::from([("team".to_string(), format!("team-{}", i % 12))]),
                resources: ResourceRequest { cpu: Some((1 + i % 8) as f64), gpu: (i % 5 == 0).then_some(1.0), memory_gb: Some(4.0), ..Default::default() },
                ..Default::default()
            };
            let at = now - 30 * 86_400_000_000 + (i as i64) * 25_000_000;
            let mut row = JobRow::submitted(format!("j-bench{i:07}"), "train".into(), format!("user-{}", i % 50), spec, 0, 1, at);
            row.queue = Some(format!("queue-{}", i % 8));
            row.state = states[i % states.len()];
            row.admitted_at_us = Some(at + (i as i64 % 600) * 1_000_000);
            row.started_at_us = row.admitted_at_us.map(|t| t + 200_000);
            row.finished_at_us = row.started_at_us.map(|t| t + 60_000_000 + (i as i64 % 3600) * 1_000_000);
            row.runs = 1 + (i % 20 == 0) as i64;
            row
        })
        .collect();
    // Stored as submitted, then updated to their end, as the loop writes them.
    for chunk in rows.chunks(5_000) {
        store.insert(None, chunk, &[]).await.expect("insert");
        let ended: Vec<(&JobRow, bool)> = chunk.iter().map(|r| (r, false)).collect();
        store.update(now, &ended, &[]).await.expect("update");
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main]
async fn main() {
    println!("usage summary latency over {JOBS} ended jobs (JobStore::usage, {SAMPLES} runs each; bar: p95 <= 200 ms)");
    println!("{:<10} {:<12} {:>6} {:>12} {:>12}", "database", "by", "groups", "p50", "p95");
    for kind in ["sqlite", "postgres"] {
        let Some(db) = fresh_db(kind, "usage").await else {
            println!("{kind:<10} skipped: BERTH_BENCH_PG_URL is not set");
            continue;
        };
        let store = JobStore::new(db);
        let now = chrono::Utc::now().timestamp_micros();
        fill(&store, now).await;
        for by in [UsageGroup::User, UsageGroup::Queue, UsageGroup::Label("team".into())] {
            let mut times = Vec::with_capacity(SAMPLES);
            let mut groups = 0;
            for _ in 0..SAMPLES {
                let t = Instant::now();
                let rows = store.usage(&by, now - 31 * 86_400_000_000, now + 1).await.expect("usage");
                times.push(t.elapsed().as_secs_f64() * 1e3);
                groups = rows.len();
                assert_eq!(rows.iter().flat_map(|r| r.jobs.values()).sum::<u64>() as usize, JOBS, "every job counted once");
            }
            times.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let (p50, p95) = (percentile(&times, 0.5), percentile(&times, 0.95));
            let verdict = if p95 <= 200.0 { "met" } else { "NOT met" };
            println!("{kind:<10} {:<12} {groups:>6} {p50:>9.1} ms {p95:>9.1} ms  {verdict}", by.name());
        }
    }
    support::remove_fresh_dirs();
}
