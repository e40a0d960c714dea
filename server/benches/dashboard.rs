//! The jobs list at scale: 100,000 jobs in the database (cloned with
//! `benches/data/seed_100k_jobs.sql` from one real job), then the real server answers
//! `GET /api/v1/jobs` pages with each filter, deep cursor pages, and the server-rendered
//! `/jobs` dashboard page. Prints p50/p95 per query; the target is p95 <= 50 ms per API page
//! and the page rendered in under a second (the browser side is end2end/tests/bench.test.mjs).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use sqlx::Connection;

const BIN: &str = env!("CARGO_BIN_EXE_berth");
const SEED: &str = include_str!("data/seed_100k_jobs.sql");
/// Requests per measured query.
const ROUNDS: usize = 40;

fn serve(dir: &std::path::Path, port: u16) -> Child {
    Command::new(BIN)
        .args(["serve", "--anonymous", "--addr", &format!("127.0.0.1:{port}")])
        .args(["--database-url", &format!("sqlite://{}/berth.db", dir.display())])
        .args(["--data-dir", &format!("{}/data", dir.display())])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("berth serve starts")
}

async fn ready(http: &reqwest::Client, url: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !http.get(format!("{url}/readyz")).send().await.is_ok_and(|r| r.status().is_success()) {
        assert!(Instant::now() < deadline, "server did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// p50 and p95 in ms of `ROUNDS` GETs of `path`, after one warm-up; and the first answer.
async fn measure(http: &reqwest::Client, url: &str, path: &str) -> (f64, f64, String) {
    let first = http.get(format!("{url}{path}")).send().await.unwrap().text().await.unwrap();
    let mut times = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let r = http.get(format!("{url}{path}")).send().await.unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.status());
        r.bytes().await.unwrap();
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    (percentile(&times, 0.5), percentile(&times, 0.95), first)
}

#[tokio::main]
async fn main() {
    let dir = std::env::temp_dir().join(format!("berth-bench-dashboard-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();

    // One real job, so the clones carry a real spec and placement.
    let mut child = serve(&dir, port);
    ready(&http, &url).await;
    let r = http.post(format!("{url}/api/v1/jobs")).json(&serde_json::json!({"entrypoint": "true", "resources": {"cpu": 1}})).send().await.unwrap();
    let id = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    while http.get(format!("{url}/api/v1/jobs/{id}")).send().await.unwrap().json::<Value>().await.unwrap()["state"] != "succeeded" {
        assert!(Instant::now() < deadline, "the template job did not finish");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    let _ = child.wait();

    let t = Instant::now();
    let mut db = sqlx::SqliteConnection::connect(&format!("sqlite://{}/berth.db", dir.display())).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(SEED)).execute(&mut db).await.unwrap();
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM jobs").fetch_one(&mut db).await.unwrap();
    db.close().await.unwrap();
    let seeded = t.elapsed().as_secs_f64();

    let mut child = serve(&dir, port);
    ready(&http, &url).await;
    println!("\n## jobs list with {n} jobs in SQLite (seeded in {seeded:.1} s); {ROUNDS} requests each, 50 jobs per page");
    println!("{:<58} | {:>8} | {:>8} | {:>6}", "request", "p50 ms", "p95 ms", "rows");
    println!("{}", "-".repeat(90));
    let mut worst: f64 = 0.0;
    let api = [
        ("newest page", "/api/v1/jobs?max_items=50".to_string()),
        ("page 1,000 deep (cursor)", "/api/v1/jobs?max_items=50&cursor=50000".to_string()),
        ("state=failed", "/api/v1/jobs?max_items=50&state=failed".to_string()),
        ("state=failed, deep", "/api/v1/jobs?max_items=50&state=failed&cursor=20000".to_string()),
        ("queue=q4", "/api/v1/jobs?max_items=50&queue=q4".to_string()),
        ("label team=t3", "/api/v1/jobs?max_items=50&label=team%3Dt3".to_string()),
        ("submitter=user-7", "/api/v1/jobs?max_items=50&submitter=user-7".to_string()),
        ("submitted in the last day", "/api/v1/jobs?max_items=50&since=24h".to_string()),
        ("search q=bench-4242 (substring of id or name)", "/api/v1/jobs?max_items=50&q=bench-4242".to_string()),
        ("state=running (none match)", "/api/v1/jobs?max_items=50&state=running".to_string()),
    ];
    for (label, path) in &api {
        let (p50, p95, body) = measure(&http, &url, path).await;
        let rows = serde_json::from_str::<Value>(&body).ok().and_then(|v| v["jobs"].as_array().map(|a| a.len())).unwrap_or(0);
        worst = worst.max(p95);
        println!("{label:<58} | {p50:>8.2} | {p95:>8.2} | {rows:>6}");
    }
    println!("worst API p95: {worst:.2} ms (target <= 50 ms)");
    for (label, path) in [("dashboard /jobs (server-rendered HTML)", "/jobs"), ("dashboard /jobs?label=team%3Dt3&state=failed", "/jobs?label=team%3Dt3&state=failed")] {
        let (p50, p95, body) = measure(&http, &url, path).await;
        let rows = body.matches("data-testid=\"job-row\"").count();
        println!("{label:<58} | {p50:>8.2} | {p95:>8.2} | {rows:>6}");
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
