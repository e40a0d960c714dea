//! Config store latency: apply and list (50 rows) at 10 and 10,000 stored versions, on SQLite
//! and PostgreSQL, through the service layer (validation and JSON included). Prints a table.
//!
//! `make bench` runs it; PostgreSQL is measured when BERTH_BENCH_PG_URL names an admin URL.

mod support;
use support::fresh_db;

use std::time::Instant;

use app::config::parse::parse_auto;
use app::config::SchedulerConfig;
use server::store::Db;
use server::services::config::ConfigService;
use server::store::config::{ApplyMeta, ConfigStore};

const SEED: &str = include_str!("../../app/src/config/testdata/seed_example.yaml");
const APPLY_SAMPLES: usize = 100;
const LIST_SAMPLES: usize = 200;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

fn stats(mut samples: Vec<f64>) -> (f64, f64) {
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (percentile(&samples, 0.5), percentile(&samples, 0.95))
}

/// Fills the store with `n` versions in one transaction (setup, not measured).
async fn fill(db: &Db, config: &SchedulerConfig, n: i64) {
    let json = serde_json::to_string(config).unwrap();
    let mut tx = db.pool.begin().await.unwrap();
    for v in 1..=n {
        sqlx::query("INSERT INTO config_versions (version, created_at_us, creator_id, message, config_json) VALUES ($1, $2, $3, $4, $5)")
            .bind(v)
            .bind(chrono::Utc::now().timestamp_micros())
            .bind("bench")
            .bind(format!("version {v}"))
            .bind(&json)
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    sqlx::query("UPDATE config_head SET active_version = $1 WHERE id = 1").bind(n).execute(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
}

async fn measure(db: Db, config: &SchedulerConfig) -> ((f64, f64), (f64, f64)) {
    let service = ConfigService::start(ConfigStore::new(db)).await.unwrap();
    let meta = ApplyMeta { message: Some("bench".into()), ..ApplyMeta::default() };
    let caller = server::services::auth::Caller::anonymous();
    let mut applies = Vec::with_capacity(APPLY_SAMPLES);
    for _ in 0..APPLY_SAMPLES {
        let t = Instant::now();
        service.apply(&caller, config, &meta).await.unwrap();
        applies.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let mut lists = Vec::with_capacity(LIST_SAMPLES);
    for i in 0..LIST_SAMPLES {
        // Alternate the first page and a page deep in the history.
        let cursor = (i % 2 == 1).then(|| "60".to_string());
        let t = Instant::now();
        let page = service.list(Some(50), cursor.as_deref()).await.unwrap();
        lists.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(!page.versions.is_empty());
    }
    (stats(applies), stats(lists))
}

#[tokio::main]
async fn main() {
    let config = parse_auto(SEED).expect("seed parses");
    println!("config store latency (service layer; {APPLY_SAMPLES} applies, {LIST_SAMPLES} lists of 50 rows)");
    println!("{:<10} {:>9}  {:>12} {:>12}  {:>12} {:>12}", "database", "versions", "apply p50", "apply p95", "list p50", "list p95");
    for kind in ["sqlite", "postgres"] {
        let mut rows = Vec::new();
        for n in [10_i64, 10_000] {
            let Some(db) = fresh_db(kind, &format!("store_{n}")).await else {
                println!("{kind:<10} skipped: BERTH_BENCH_PG_URL is not set");
                break;
            };
            fill(&db, &config, n).await;
            let ((ap50, ap95), (lp50, lp95)) = measure(db, &config).await;
            println!("{kind:<10} {n:>9}  {ap50:>9.2} ms {ap95:>9.2} ms  {lp50:>9.2} ms {lp95:>9.2} ms");
            rows.push((ap95, lp95));
        }
        if let [(a10, l10), (a10k, l10k)] = rows[..] {
            println!("{kind:<10} p95 ratio 10,000 / 10 versions: apply {:.2}x, list {:.2}x", a10k / a10, l10k / l10);
        }
    }
    support::remove_fresh_dirs();
}
