//! Replicas on PostgreSQL (docs/operations.md, "Several replicas"): three `berth serve`
//! (this bench's build) on one fresh PostgreSQL database, the local backend, default lease
//! (3 s). Prints one table:
//!
//! * failover: the leader is killed (SIGKILL) 10 times while jobs keep arriving; the time
//!   from each kill to the next admission any replica records, p50 and p99 (target p99
//!   <= 5 s), the killed replica restarted each time;
//! * submit latency at 100 submissions/s for 10 s, through a follower and through the
//!   leader, p50 and p99, each from an idle start (the jobs of the one before have ended).
//!
//! Needs `BERTH_BENCH_PG_URL` (an admin URL; `make bench` sets it); skipped without it.
//! `BERTH_BENCH_QUICK=1` does 3 kills and 2 s of submissions (a smoke run, not figures).

mod support;

use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};

fn bin() -> String {
    std::env::var("BERTH_BENCH_BIN").ok().filter(|b| !b.is_empty()).unwrap_or_else(|| env!("CARGO_BIN_EXE_berth").to_string())
}

fn quick() -> bool {
    std::env::var("BERTH_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0")
}

const CONFIG: &str = r#"
resource_flavors:
  - name: local
    selector:
      - {key: backend, operator: in, values: [local]}
resource_queues:
  - name: bench
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 8}]}]
scheduling_rules:
  - resource_queue: bench
"#;

/// One replica: a child process on a port, sharing the data dir.
struct Replica {
    name: String,
    port: u16,
    child: Option<Child>,
    db: String,
    dir: std::path::PathBuf,
}

impl Replica {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    async fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join(format!("{}.log", self.name))).unwrap();
        let child = Command::new(bin())
            .args(["serve", "--anonymous", "--addr", &format!("127.0.0.1:{}", self.port), "--database-url", &self.db])
            .args(["--data-dir", &format!("{}/data", self.dir.display()), "--replica-name", &self.name, "--local-cpus", "64", "--tick-ms", "100"])
            .env("RUST_LOG", "warn")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("berth serve starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !reqwest::get(format!("{}/readyz", self.url())).await.is_ok_and(|r| r.status().is_success()) {
            assert!(Instant::now() < deadline, "{} did not become ready", self.name);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    async fn leads(&self) -> bool {
        let Ok(r) = reqwest::Client::new().get(format!("{}/readyz", self.url())).timeout(Duration::from_secs(1)).send().await else { return false };
        r.text().await.is_ok_and(|t| t.contains("(this replica)"))
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn leader(rs: &[Replica]) -> usize {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        for (i, r) in rs.iter().enumerate() {
            if r.child.is_some() && r.leads().await {
                return i;
            }
        }
        assert!(Instant::now() < deadline, "no replica leads");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn job(n: u64) -> Value {
    json!({ "name": format!("b{n}"), "entrypoint": "sleep 0.05", "resources": { "cpu": 1 } })
}

/// Keeps jobs arriving at every replica that answers, until `stop`.
fn trickle(urls: Vec<String>, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().unwrap();
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let url = &urls[n as usize % urls.len()];
            let _ = http.post(format!("{url}/api/v1/jobs")).json(&job(n)).send().await;
            n += 1;
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
    })
}

/// The first admission after `after` a live replica records.
async fn next_admission(rs: &[Replica], after: SystemTime) -> Duration {
    let since = chrono::DateTime::<chrono::Utc>::from(after).to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let http = reqwest::Client::builder().timeout(Duration::from_secs(1)).build().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        for r in rs.iter().filter(|r| r.child.is_some()) {
            let Ok(resp) = http.get(format!("{}/api/v1/events?kind=admitted&max_items=1&since={since}", r.url())).send().await else { continue };
            let Ok(page) = resp.json::<Value>().await else { continue };
            if let Some(at) = page["events"][0]["at"].as_str() {
                let at: chrono::DateTime<chrono::Utc> = at.parse().unwrap();
                return SystemTime::from(at).duration_since(after).unwrap_or_default();
            }
        }
        assert!(Instant::now() < deadline, "no admission after a kill");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Submissions to `url` at `rate` per second for `secs`: each one's latency.
async fn submit_latency(url: &str, rate: u64, secs: u64) -> Vec<Duration> {
    let http = reqwest::Client::new();
    let every = Duration::from_micros(1_000_000 / rate);
    let mut set = tokio::task::JoinSet::new();
    let start = tokio::time::Instant::now();
    for n in 0..rate * secs {
        tokio::time::sleep_until(start + every * n as u32).await;
        let (http, url) = (http.clone(), url.to_string());
        set.spawn(async move {
            let t = Instant::now();
            let r = http.post(format!("{url}/api/v1/jobs")).json(&json!({ "name": "lat", "entrypoint": "true", "resources": { "cpu": 1 } })).send().await.unwrap();
            assert_eq!(r.status().as_u16(), 201);
            t.elapsed()
        });
    }
    set.join_all().await
}

/// Waits until no job is pending, admitted or running: each phase starts on an idle leader.
async fn drain(url: &str) {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let page: Value = reqwest::get(format!("{url}/api/v1/jobs?state=pending,admitted,running&max_items=1")).await.unwrap().json().await.unwrap();
        if page["jobs"].as_array().is_some_and(Vec::is_empty) {
            return;
        }
        assert!(Instant::now() < deadline, "jobs did not drain");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn pct(xs: &mut [Duration], p: f64) -> f64 {
    xs.sort();
    let i = ((xs.len() as f64 - 1.0) * p).round() as usize;
    xs[i].as_secs_f64()
}

#[tokio::main]
async fn main() {
    let Some(db) = support::fresh_db_url("postgres", "replicas").await else {
        println!("replicas: skipped: BERTH_BENCH_PG_URL is not set");
        return;
    };
    let dir = std::env::temp_dir().join(format!("berth-bench-replicas-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut rs: Vec<Replica> = Vec::new();
    for i in 0..3 {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut r = Replica { name: format!("r{i}"), port, child: None, db: db.clone(), dir: dir.clone() };
        r.spawn().await;
        rs.push(r);
    }
    let http = reqwest::Client::new();
    let applied = http.post(format!("{}/api/v1/scheduler/config", rs[0].url())).header("content-type", "application/yaml").body(CONFIG).send().await.unwrap();
    assert_eq!(applied.status().as_u16(), 200);

    // Failover.
    let kills = if quick() { 3 } else { 10 };
    let stop = Arc::new(AtomicBool::new(false));
    let feeding = trickle(rs.iter().map(Replica::url).collect(), stop.clone());
    let mut waits = Vec::new();
    for _ in 0..kills {
        let l = leader(&rs).await;
        tokio::time::sleep(Duration::from_millis(500)).await; // jobs are flowing under it
        let at = SystemTime::now();
        rs[l].kill();
        waits.push(next_admission(&rs, at).await);
        rs[l].spawn().await;
    }
    stop.store(true, Ordering::Relaxed);
    let _ = feeding.await;

    // Submit latency through a follower and through the leader.
    let secs = if quick() { 2 } else { 10 };
    let l = leader(&rs).await;
    let f = (l + 1) % rs.len();
    drain(&rs[l].url()).await;
    let mut via_follower = submit_latency(&rs[f].url(), 100, secs).await;
    drain(&rs[l].url()).await;
    let mut via_leader = submit_latency(&rs[l].url(), 100, secs).await;

    println!("\nreplicas: 3 on PostgreSQL, lease 3 s, local backend");
    println!("{:<44} | {:>9} | {:>9} | {:>12}", "metric", "p50", "p99", "target");
    println!("{}", "-".repeat(84));
    let p99 = pct(&mut waits, 0.99);
    println!("{:<44} | {:>7.2} s | {:>7.2} s | {:>12}", format!("failover: kill -> next admission ({kills} kills)"), pct(&mut waits, 0.5), p99, format!("p99<=5 s {}", if p99 <= 5.0 { "yes" } else { "NO" }));
    let row = |name: &str, xs: &mut Vec<Duration>| {
        println!("{:<44} | {:>6.1} ms | {:>6.1} ms | {:>12}", name, pct(xs, 0.5) * 1e3, pct(xs, 0.99) * 1e3, "");
    };
    row(&format!("submit via a follower (100/s, {secs} s)"), &mut via_follower);
    row(&format!("submit via the leader (100/s, {secs} s)"), &mut via_leader);
    drop(rs);
    let _ = std::process::Command::new("pkill").arg("-KILL").arg("-f").arg(dir.display().to_string()).status();
    let _ = std::fs::remove_dir_all(&dir);
}
