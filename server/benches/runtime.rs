//! The runtime end to end: the real `berth` binary (bench profile), the local backend, real
//! processes, SQLite. Prints one table per scenario:
//!
//! * latency: submit-to-start at 50 submissions/s for 60 s;
//! * throughput: 1,000 `true` jobs through 2 slots, beside `xargs -P 2` and GNU `parallel -j 2`,
//!   in 5 interleaved rounds (medians);
//! * kueue: Kueue's scheduler baseline (15,000 jobs, 5 cohorts x 6 queues, borrowing limit 100,
//!   reclaim any) in real time with a no-op runner, as Kueue measures it (`serve --simulate`:
//!   each job "runs" for its runtime, no process), on a host declaring 600 CPUs, beside
//!   Kueue's measured means (target: half of each, usage at least Kueue's);
//! * kueue_processes: the same with each job a real local process `sleep`ing for its runtime;
//! * kueue_large, kueue_large_processes: Kueue's large-scale scenario the same two ways
//!   (50,000 jobs, 10 cohorts x 100 queues, a host declaring 20,000 CPUs);
//! * idle: 100,000 pending jobs that cannot fit: server CPU and database writes while idle;
//! * ray: 200 no-op jobs through Berth vs straight to Ray's Jobs API, flooded and with the
//!   same number in flight as Berth (needs `BERTH_BENCH_RAY_URL`, which `make bench` sets
//!   with .ci/ray.sh; see `ray_overhead/`);
//! * ray_api: 100 no-op jobs with a working dir from Ray's own `JobSubmissionClient`,
//!   straight to the head vs through Berth's Ray API (the same head and venv; see
//!   `ray_overhead/front_door.rs`);
//! * slurm: 200 `true` jobs through Berth vs a plain `sbatch` loop with the same number in
//!   flight (needs `BERTH_BENCH_SLURM`, which `make bench` sets with .ci/slurm.sh; see
//!   `slurm_overhead.rs`).
//!
//! `BERTH_BENCH_RUNTIME=latency,throughput` picks scenarios (default: all);
//! `BERTH_BENCH_QUICK=1` shortens them (for a smoke run, not for figures);
//! `BERTH_BENCH_LOG=debug` sets the server's `RUST_LOG` and keeps its log beside its directory.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use support::{KueueScenario, KUEUE_BASELINE, KUEUE_LARGE_SCALE};

mod ray_overhead;
mod slurm_overhead;
mod support;

/// The `berth` built with this bench, or `BERTH_BENCH_BIN` (an older build, to compare).
fn bin() -> String {
    std::env::var("BERTH_BENCH_BIN").ok().filter(|b| !b.is_empty()).unwrap_or_else(|| env!("CARGO_BIN_EXE_berth").to_string())
}

fn quick() -> bool {
    std::env::var("BERTH_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// A `berth serve` child over a fresh SQLite file.
struct Server {
    child: Child,
    url: String,
    dir: PathBuf,
    http: reqwest::Client,
}

impl Server {
    async fn start(name: &str, extra: &[&str]) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = std::env::temp_dir().join(format!("berth-bench-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let log = std::fs::File::create(dir.join("server.log")).unwrap();
        let child = Command::new(bin())
            .args(["serve", "--anonymous", "--addr", &format!("127.0.0.1:{port}")])
            .args(["--database-url", &format!("sqlite://{}/berth.db", dir.display())])
            .args(["--data-dir", &format!("{}/data", dir.display())])
            // `{url}` in a flag is the server's own URL (e.g. `--ray-callback-url {url}`).
            .args(extra.iter().map(|a| a.replace("{url}", &format!("http://127.0.0.1:{port}"))))
            .env("RUST_LOG", std::env::var("BERTH_BENCH_LOG").unwrap_or_else(|_| "warn".into()))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("berth serve starts");
        let http = reqwest::Client::builder().pool_max_idle_per_host(64).build().unwrap();
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !http.get(format!("{url}/readyz")).send().await.is_ok_and(|r| r.status().is_success()) {
            assert!(Instant::now() < deadline, "server did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Server { child, url, dir, http }
    }

    async fn apply(&self, yaml: &str) {
        let r = self.http.post(format!("{}/api/v1/scheduler/config", self.url)).header("content-type", "application/yaml").body(yaml.to_string()).send().await.unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    }

    async fn submit(&self, body: &Value) -> String {
        let r = self.http.post(format!("{}/api/v1/jobs", self.url)).json(body).send().await.unwrap();
        let status = r.status();
        let v: Value = r.json().await.unwrap();
        assert_eq!(status.as_u16(), 201, "{v}");
        v["id"].as_str().unwrap().to_string()
    }

    async fn get(&self, path: &str) -> Value {
        self.http.get(format!("{}{path}", self.url)).send().await.unwrap().json().await.unwrap()
    }

    /// Every job, all pages.
    async fn all_jobs(&self) -> Vec<Value> {
        let mut out = Vec::new();
        let mut cursor = String::new();
        loop {
            let page = self.get(&format!("/api/v1/jobs?max_items=1000{cursor}")).await;
            out.extend(page["jobs"].as_array().unwrap().iter().cloned());
            match page["next_cursor"].as_str() {
                Some(c) => cursor = format!("&cursor={c}"),
                None => return out,
            }
        }
    }

    /// Waits until no job is pending, admitted or running, at most `timeout`: then cancels
    /// the jobs still open (the server stops their runs) and returns their ids, for the
    /// table to show as never ended. Empty when every job ended.
    async fn drain(&self, timeout: Duration) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let page = self.get("/api/v1/jobs?state=pending,admitted,running&max_items=1").await;
            if page["jobs"].as_array().is_some_and(|a| a.is_empty()) {
                return Vec::new();
            }
            if Instant::now() >= deadline {
                let open = self.jobs_where("state=pending,admitted,running").await;
                let ids: Vec<String> = open.iter().filter_map(|j| j["id"].as_str().map(String::from)).collect();
                for id in &ids {
                    let _ = self.http.post(format!("{}/api/v1/jobs/{id}/cancel", self.url)).json(&json!({})).send().await;
                }
                eprintln!("{} jobs still open after {timeout:?}: cancelled", ids.len());
                return ids;
            }
            // Finer than the server's own steps (a job here takes about 1 ms), so the wall
            // time is the scheduler's, not this poll's.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Every job matching `query` (e.g. `state=running`), all pages.
    async fn jobs_where(&self, query: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut cursor = String::new();
        loop {
            let page = self.get(&format!("/api/v1/jobs?max_items=1000&{query}{cursor}")).await;
            out.extend(page["jobs"].as_array().into_iter().flatten().cloned());
            match page["next_cursor"].as_str() {
                Some(c) => cursor = format!("&cursor={c}"),
                None => return out,
            }
        }
    }

    /// Every event, oldest first.
    async fn events(&self, query: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut cursor = String::new();
        loop {
            let page = self.get(&format!("/api/v1/events?max_items=1000&{query}{cursor}")).await;
            out.extend(page["events"].as_array().unwrap().iter().cloned());
            match page["next_cursor"].as_str() {
                Some(c) => cursor = format!("&cursor={c}"),
                None => return out,
            }
        }
    }

    /// Server CPU seconds (user + system, not its children) and peak RSS in MB.
    fn usage(&self) -> (f64, f64) {
        let pid = self.child.id();
        let cpu = support::cpu_seconds(&pid.to_string(), false).unwrap_or(0.0);
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let hwm = status.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok()).unwrap_or(0.0);
        (cpu, hwm / 1024.0)
    }

    /// CPU seconds (user + system) of the server's reaped children: the jobs themselves.
    fn children_cpu(&self) -> f64 {
        support::cpu_seconds(&self.child.id().to_string(), true).unwrap_or(0.0)
    }

    /// Bytes this server process has caused to be written to storage.
    fn write_bytes(&self) -> u64 {
        let io = std::fs::read_to_string(format!("/proc/{}/io", self.child.id())).unwrap_or_default();
        io.lines().find(|l| l.starts_with("write_bytes:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()).unwrap_or(0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = Command::new("pkill").arg("-KILL").arg("-f").arg(self.dir.display().to_string()).status();
        if std::env::var_os("BERTH_BENCH_LOG").is_some() {
            // Asked for a log level: keep the server's log for reading.
            let _ = std::fs::copy(self.dir.join("server.log"), self.dir.with_extension("log"));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn time(v: &Value) -> Option<DateTime<Utc>> {
    v.as_str().and_then(|s| DateTime::parse_from_rfc3339(s).ok()).map(|t| t.with_timezone(&Utc))
}

fn ms_between(a: &Value, b: &Value) -> Option<f64> {
    Some((time(b)? - time(a)?).num_microseconds()? as f64 / 1000.0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn one_queue(cpu: u32) -> String {
    format!(
        "resource_flavors:\n  - name: local\nresource_queues:\n  - name: default\n    resource_groups:\n      - covered_resources: [cpu]\n        flavors:\n          - name: local\n            resources: [{{name: cpu, nominal_quota: {cpu}}}]\nscheduling_rules:\n  - resource_queue: default\n"
    )
}

async fn latency() {
    let (rate, secs) = if quick() { (50, 5) } else { (50, 60) };
    let server = Server::start("latency", &["--local-cpus", "64"]).await;
    let interval = Duration::from_secs_f64(1.0 / rate as f64);
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut handles = Vec::new();
    let t0 = Instant::now();
    for _ in 0..rate * secs {
        ticker.tick().await;
        let (http, url) = (server.http.clone(), format!("{}/api/v1/jobs", server.url));
        handles.push(tokio::spawn(async move {
            let sent = Instant::now();
            let r = http.post(url).json(&json!({"entrypoint": "true", "resources": {"cpu": 1}})).send().await.unwrap();
            let v: Value = r.json().await.unwrap();
            (v["id"].as_str().unwrap().to_string(), sent.elapsed().as_secs_f64() * 1000.0)
        }));
    }
    let mut submit_rtt = Vec::new();
    for h in handles {
        submit_rtt.push(h.await.unwrap().1);
    }
    let offered = t0.elapsed().as_secs_f64();
    let never_ended = server.drain(Duration::from_secs(60)).await;
    let jobs = server.all_jobs().await;
    let mut lat: Vec<f64> = jobs.iter().filter_map(|j| ms_between(&j["submitted_at"], &j["started_at"])).collect();
    lat.sort_by(f64::total_cmp);
    submit_rtt.sort_by(f64::total_cmp);
    let (cpu, rss) = server.usage();
    println!("\n## submit-to-start latency, local backend ({} jobs at {rate}/s over {offered:.1} s)", lat.len());
    println!("{:<40} | {:>9} | {:>9} | {:>9} | {:>9}", "measure", "p50 ms", "p99 ms", "max ms", "target");
    println!("{}", "-".repeat(88));
    println!("{:<40} | {:>9.2} | {:>9.2} | {:>9.2} | {:>9}", "submitted_at -> started_at (server)", percentile(&lat, 0.5), percentile(&lat, 0.99), percentile(&lat, 1.0), "20 / 100");
    println!("{:<40} | {:>9.2} | {:>9.2} | {:>9.2} | {:>9}", "POST /api/v1/jobs round trip (client)", percentile(&submit_rtt, 0.5), percentile(&submit_rtt, 0.99), percentile(&submit_rtt, 1.0), "-");
    println!("server: {cpu:.1} s CPU, peak RSS {rss:.0} MB");
    if !never_ended.is_empty() {
        println!("NOT every job ended: {} still open 60 s after the last submission (cancelled; not in the figures)", never_ended.len());
    }
}

fn run_peer(script: &str) -> Option<f64> {
    let t = Instant::now();
    let ok = Command::new("sh").arg("-c").arg(script).stdout(Stdio::null()).stderr(Stdio::null()).status().ok()?.success();
    ok.then(|| t.elapsed().as_secs_f64())
}

/// How the throughput bench hands Berth its jobs.
#[derive(Clone, Copy)]
enum Submit {
    /// One `POST /api/v1/jobs` per job, 16 at a time.
    Each,
    /// All in one `POST /api/v1/stages` (what `berth stages submit` sends).
    Stage,
}

/// One Berth run of the throughput bench: wall seconds and the line describing it.
async fn berth_throughput(n: usize, how: Submit) -> (f64, String) {
    let server = Server::start("throughput", &["--local-cpus", "64"]).await;
    server.apply(&one_queue(2)).await;
    let job = json!({"entrypoint": "true", "resources": {"cpu": 1}});
    let (idle0, client0) = (machine_idle(), support::cpu_seconds("self", false).unwrap_or(0.0));
    let t = Instant::now();
    match how {
        Submit::Each => {
            let mut set = tokio::task::JoinSet::new();
            for _ in 0..n {
                let (http, url, job) = (server.http.clone(), format!("{}/api/v1/jobs", server.url), job.clone());
                set.spawn(async move { http.post(url).json(&job).send().await.unwrap().status() });
                while set.len() >= 16 {
                    assert!(set.join_next().await.unwrap().unwrap().is_success());
                }
            }
            while let Some(r) = set.join_next().await {
                assert!(r.unwrap().is_success());
            }
        }
        Submit::Stage => {
            let body = json!({"name": "throughput", "jobs": vec![job; n]});
            let r = server.http.post(format!("{}/api/v1/stages", server.url)).json(&body).send().await.unwrap();
            assert_eq!(r.status().as_u16(), 201, "{}", r.text().await.unwrap_or_default());
        }
    }
    let submitted = t.elapsed().as_secs_f64();
    // 1,000 no-op jobs take about 2 s (xargs) to 4 s (Berth): 300 s means something is stuck.
    let never_ended = server.drain(Duration::from_secs(300)).await;
    let wall = t.elapsed().as_secs_f64();
    let seen = Utc::now();
    let (idle, client) = (machine_idle() - idle0, support::cpu_seconds("self", false).unwrap_or(0.0) - client0);
    let (server_cpu, _) = server.usage();
    let jobs_cpu = server.children_cpu();
    let jobs = server.all_jobs().await;
    assert_eq!(jobs.len(), n);
    let not_succeeded = jobs.iter().filter(|j| j["state"] != "succeeded").count();
    let events = server.events("kind=admitted,started,finished").await;
    let peak = peak_running(&events);
    assert!(peak <= 2, "berth ran {peak} at once with a quota of 2");
    let gaps = slot_gaps(&events);
    let last_end = events.iter().filter(|e| e["kind"] == "finished").filter_map(|e| time(&e["at"])).max();
    let lag = last_end.map_or(f64::NAN, |end| (seen - end).num_microseconds().unwrap_or(0) as f64 / 1000.0);
    let mut line = format!(
        "all {n} submitted after {submitted:.2} s, never more than {peak} running (event log); server {server_cpu:.2} s CPU, \
         jobs {jobs_cpu:.2} s CPU, this bench's client {client:.2} s CPU, the machine's cores idle {idle:.2} s; the last job ended {lag:.0} ms before the bench saw every job done; per job (ms, p50/p90): finished -> next admitted {}, admitted -> started {}, started -> finished {}",
        gaps[0], gaps[1], gaps[2]
    );
    if not_succeeded > 0 {
        line += &format!("; NOT every job succeeded: {not_succeeded}, of which {} never ended (cancelled after 300 s)", never_ended.len());
    }
    (wall, line)
}

/// Seconds all cores of this machine have been idle (`/proc/stat`: idle and iowait).
fn machine_idle() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let cpu: Vec<f64> = stat.lines().next().unwrap_or_default().split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
    (cpu.get(3).unwrap_or(&0.0) + cpu.get(4).unwrap_or(&0.0)) / 100.0
}

/// The middle value (the upper one of an even count).
fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Every runner takes its turn in each round, so a slow spell of the machine hits them all;
/// the table shows each runner's median wall time and the ratio of the medians.
async fn throughput() {
    let n = if quick() { 200 } else { 1000 };
    let rounds = if quick() { 1 } else { 5 };
    let (mut each, mut stage, mut xargs, mut parallel) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut lines = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (t, line) = berth_throughput(n, Submit::Each).await;
        each.push(t);
        lines.0.push((t, line));
        let (t, line) = berth_throughput(n, Submit::Stage).await;
        stage.push(t);
        lines.1.push((t, line));
        xargs.extend(run_peer(&format!("seq {n} | xargs -P 2 -I{{}} sh -c true")));
        parallel.extend(run_peer(&format!("seq {n} | parallel -j 2 true")));
    }
    println!("\n## throughput: {n} jobs running `true`, 2 slots ({rounds} interleaved rounds, medians)");
    println!("{:<44} | {:>9} | {:>9} | {:>10} | {:>15}", "runner", "wall s", "jobs/s", "vs xargs", "per round");
    println!("{}", "-".repeat(100));
    let base = if xargs.is_empty() { f64::NAN } else { median(&xargs) };
    let row = |name: &str, walls: &[f64], per_round: bool| {
        if walls.is_empty() {
            return println!("{name:<44} | {:>9} | {:>9} | {:>10} |", "n/a", "", "(not installed)");
        }
        let s = median(walls);
        let spread = if per_round && walls.len() == xargs.len() {
            let r: Vec<f64> = walls.iter().zip(&xargs).map(|(w, x)| w / x).collect();
            format!("{:.2}-{:.2}x", r.iter().copied().fold(f64::INFINITY, f64::min), r.iter().copied().fold(0.0, f64::max))
        } else {
            String::new()
        };
        println!("{name:<44} | {s:>9.2} | {:>9.0} | {:>9.2}x | {spread:>15}", n as f64 / s, s / base);
    };
    row("berth, one POST per job (16 at a time)", &each, true);
    row("berth, one stage of all jobs", &stage, true);
    row("xargs -P 2 sh -c true", &xargs, false);
    row("GNU parallel -j 2 true", &parallel, true);
    println!("target: within 1.5x of xargs");
    let middle = |runs: &[(f64, String)]| {
        let m = median(&runs.iter().map(|r| r.0).collect::<Vec<_>>());
        runs.iter().find(|r| r.0 == m).map(|r| r.1.clone()).unwrap_or_default()
    };
    println!("berth, POST per job (median run): {}", middle(&lines.0));
    println!("berth, one stage (median run): {}", middle(&lines.1));
}

/// From the event log, p50/p90 (ms) of: a finish to the next admission, an admission to its
/// start, a start to its finish — where the time between two jobs on a slot goes.
fn slot_gaps(events: &[Value]) -> [String; 3] {
    let mut out: [Vec<f64>; 3] = Default::default();
    let mut last_finish: Option<DateTime<Utc>> = None;
    let mut admitted: HashMap<&str, DateTime<Utc>> = HashMap::new();
    let mut started: HashMap<&str, DateTime<Utc>> = HashMap::new();
    let ms = |a: DateTime<Utc>, b: DateTime<Utc>| (b - a).num_microseconds().unwrap_or(0) as f64 / 1000.0;
    for e in events {
        let (Some(job), Some(at)) = (e["job_id"].as_str(), time(&e["at"])) else { continue };
        match e["kind"].as_str() {
            Some("admitted") => {
                if let Some(f) = last_finish.take() {
                    out[0].push(ms(f, at));
                }
                admitted.insert(job, at);
            }
            Some("started") => {
                if let Some(a) = admitted.get(job) {
                    out[1].push(ms(*a, at));
                }
                started.insert(job, at);
            }
            Some("finished") => {
                if let Some(s) = started.get(job) {
                    out[2].push(ms(*s, at));
                }
                last_finish = Some(at);
            }
            _ => {}
        }
    }
    out.map(|mut v| {
        v.sort_by(f64::total_cmp);
        format!("{:.2}/{:.2}", percentile(&v, 0.5), percentile(&v, 0.9))
    })
}

/// Most jobs holding quota at once, replaying admitted/finished events.
fn peak_running(events: &[Value]) -> i64 {
    let (mut now, mut peak) = (0i64, 0i64);
    for e in events {
        match e["kind"].as_str() {
            Some("admitted") => now += 1,
            Some("finished") => now -= 1,
            _ => {}
        }
        peak = peak.max(now);
    }
    peak
}

/// The generator's queues (see [`KueueScenario`]), each taking the jobs labelled with its
/// name.
fn kueue_config(s: &KueueScenario) -> String {
    let mut y = String::from("resource_flavors:\n  - name: local\nresource_queues:\n");
    for q in 0..s.queues() {
        y += &format!(
            "  - name: cq-{q:04}\n    cohort_name: cohort-{:02}\n    preemption: {{within_resource_queue: lower_priority, reclaim_within_cohort: any}}\n    resource_groups:\n      - covered_resources: [cpu]\n        flavors: [{{name: local, resources: [{{name: cpu, nominal_quota: 20, borrowing_limit: 100}}]}}]\n",
            q / s.queues_per_cohort
        );
    }
    y += "scheduling_rules:\n";
    for q in 0..s.queues() {
        y += &format!("  - resource_queue: cq-{q:04}\n    selector: [{{key: queue, operator: in, values: [cq-{q:04}]}}]\n    priority_policy: {{min: 0, max: 1000, on_violation: reject}}\n");
    }
    y
}

/// Most submissions in flight at once: past what the server answers, arrivals queue here
/// (their time to admission counts from when the server stored them, as Kueue's counts
/// from when its API server did).
const KUEUE_IN_FLIGHT: usize = 64;

/// What runs a job of Kueue's scenarios.
#[derive(Clone, Copy, PartialEq)]
enum Runner {
    /// Nothing (`berth serve --simulate`), as Kueue's own runner: the scheduler alone.
    NoOp,
    /// A local process sleeping for the job's runtime.
    Processes,
}

/// How the jobs of Kueue's scenarios are submitted.
#[derive(Clone, Copy, PartialEq)]
enum Arrive {
    /// One POST per job, at most [`KUEUE_IN_FLIGHT`] at a time.
    EachJob,
    /// The jobs due at one instant as one stage.
    StagePerInstant,
}

async fn kueue(s: &KueueScenario, runner: Runner, arrive: Arrive) {
    let scale = if quick() { 10 } else { 1 };
    let cpus = (s.queues() * 20).to_string();
    let mut flags = vec!["--local-cpus", &cpus, "--tick-ms", "100"];
    if runner == Runner::NoOp {
        flags.push("--simulate");
    }
    let server = Server::start(&format!("kueue-{}", s.name), &flags).await;
    server.apply(&kueue_config(s)).await;
    // Every arrival at its time, as Kueue's generator makes them (after each interval):
    // (at ms, queue, class).
    let mut arrivals: Vec<(u64, usize, usize)> = Vec::new();
    for q in 0..s.queues() {
        for (c, &(_, count, every, ..)) in s.classes.iter().enumerate() {
            for k in 0..count / scale {
                arrivals.push(((k + 1) as u64 * every as u64, q, c));
            }
        }
    }
    arrivals.sort();
    let (cpu0, _) = server.usage();
    let t0 = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    let mut class_of: HashMap<String, usize> = HashMap::new();
    let mut rest = &arrivals[..];
    while let Some(&(at, ..)) = rest.first() {
        let n = match arrive {
            Arrive::EachJob => 1,
            Arrive::StagePerInstant => rest.iter().take_while(|a| a.0 == at).count(),
        };
        let (due, later) = rest.split_at(n);
        rest = later;
        if let Some(wait) = (t0 + Duration::from_millis(at)).checked_duration_since(Instant::now()) {
            tokio::time::sleep(wait).await;
        }
        let bodies: Vec<Value> = due
            .iter()
            .map(|&(_, q, c)| {
                let (class, _, _, cpu, runtime, priority) = s.classes[c];
                json!({
                    "name": format!("{class}-{q:04}"),
                    "entrypoint": format!("sleep {}", runtime as f64 / 1000.0),
                    "labels": {"queue": format!("cq-{q:04}")},
                    "priority": priority,
                    "resources": {"cpu": cpu},
                })
            })
            .collect();
        let classes: Vec<usize> = due.iter().map(|a| a.2).collect();
        while set.len() >= KUEUE_IN_FLIGHT {
            class_of.extend(set.join_next().await.expect("a submission in flight").unwrap());
        }
        let (http, url) = (server.http.clone(), server.url.clone());
        set.spawn(async move {
            let ids: Vec<String> = match arrive {
                Arrive::EachJob => {
                    let v: Value = http.post(format!("{url}/api/v1/jobs")).json(&bodies[0]).send().await.unwrap().json().await.unwrap();
                    vec![v["id"].as_str().unwrap_or_default().to_string()]
                }
                Arrive::StagePerInstant => {
                    let stage = json!({"name": format!("arrivals at {at} ms"), "jobs": bodies});
                    let v: Value = http.post(format!("{url}/api/v1/stages")).json(&stage).send().await.unwrap().json().await.unwrap();
                    v["job_ids"].as_array().map_or(Vec::new(), |ids| ids.iter().filter_map(|i| i.as_str().map(str::to_string)).collect())
                }
            };
            ids.into_iter().zip(classes).collect::<Vec<_>>()
        });
        while let Some(r) = set.try_join_next() {
            class_of.extend(r.unwrap());
        }
    }
    while let Some(r) = set.join_next().await {
        class_of.extend(r.unwrap());
    }
    let submitted_in = t0.elapsed().as_secs_f64();
    // Kueue's limit for the whole run is 425 s (the arrivals take about 60 s of it).
    let never_ended = server.drain(Duration::from_secs(600)).await;
    let wall = t0.elapsed().as_secs_f64();
    let (cpu1, rss) = server.usage();
    let jobs = server.all_jobs().await;
    let mut sum = [0.0f64; 3];
    let mut n = [0usize; 3];
    for j in &jobs {
        let Some(&c) = j["id"].as_str().and_then(|id| class_of.get(id)) else { continue };
        if let Some(ms) = ms_between(&j["submitted_at"], &j["admitted_at"]) {
            sum[c] += ms / 1000.0;
            n[c] += 1;
        }
    }
    let succeeded = jobs.iter().filter(|j| j["state"] == "succeeded").count();
    // Time-weighted usage per queue from the event log.
    let events = server.events("kind=admitted,finished,preempted").await;
    let cpu_of: HashMap<&str, f64> = jobs.iter().filter_map(|j| Some((j["id"].as_str()?, j["resources"]["cpu"].as_f64()?))).collect();
    let mut held: HashMap<String, (String, f64, DateTime<Utc>)> = HashMap::new();
    let mut area: BTreeMap<String, f64> = BTreeMap::new();
    let (mut first, mut last): (Option<DateTime<Utc>>, Option<DateTime<Utc>>) = (None, None);
    let mut preemptions = 0;
    for e in &events {
        let (Some(job), Some(at)) = (e["job_id"].as_str(), time(&e["at"])) else { continue };
        first = first.or(Some(at));
        last = Some(at);
        match e["kind"].as_str() {
            Some("admitted") => {
                held.insert(job.to_string(), (e["queue"].as_str().unwrap_or("").to_string(), cpu_of.get(job).copied().unwrap_or(0.0), at));
            }
            Some(kind) => {
                if kind == "preempted" {
                    preemptions += 1;
                }
                if let Some((q, cpu, since)) = held.remove(job) {
                    *area.entry(q).or_default() += cpu * (at - since).num_milliseconds() as f64 / 1000.0;
                }
            }
            None => {}
        }
    }
    let span = last.zip(first).map_or(1.0, |(l, f)| (l - f).num_milliseconds() as f64 / 1000.0);
    let usages: Vec<f64> = (0..s.queues()).map(|q| area.get(&format!("cq-{q:04}")).copied().unwrap_or(0.0) / (20.0 * span) * 100.0).collect();
    let min_usage = usages.iter().copied().fold(f64::MAX, f64::min);
    let avg_mcpu = (cpu1 - cpu0) / wall * 1000.0;
    println!(
        "\n## Kueue {} in real time, {}: {} jobs, {} cohorts x {} queues x 20 CPU (borrowing limit 100, reclaim any), local host declaring {cpus} CPUs{}",
        s.name,
        match runner {
            Runner::NoOp => "no-op runner (berth serve --simulate)",
            Runner::Processes => "each job a local process sleeping for its runtime",
        },
        arrivals.len(),
        s.cohorts,
        s.queues_per_cohort,
        if scale > 1 { " (QUICK: 1/10 of the jobs)" } else { "" }
    );
    // Kueue's means (rangespec.yaml; the baseline's CPU and RSS as the issue quotes them):
    // Berth's target is half of each, and at least Kueue's usage.
    support::kueue_header();
    let row = support::against_kueue;
    let (k_wall, k_tta, k_usage, k_machine) = s.kueue;
    row("wall time to finish", wall, k_wall, true, "s");
    for (c, kueue) in [(2usize, k_tta[0]), (1, k_tta[1]), (0, k_tta[2])] {
        row(&format!("avg time to admission, {}", s.classes[c].0), sum[c] / n[c].max(1) as f64, kueue, true, "s");
    }
    row("minimum queue usage (time-weighted)", min_usage, k_usage, false, "%");
    match k_machine {
        Some((k_cpu, k_rss)) => {
            row("server CPU (average over the run)", avg_mcpu, k_cpu, true, "m");
            row("server peak RSS", rss, k_rss, true, "MB");
        }
        None => println!("server CPU (average over the run) {avg_mcpu:.1} m, peak RSS {rss:.1} MB (Kueue publishes neither for this scenario)"),
    }
    let last_arrival = arrivals.last().map_or(0, |a| a.0) as f64 / 1000.0;
    println!(
        "submitted in {submitted_in:.1} s (the arrivals span {last_arrival:.1} s; {}, at most {KUEUE_IN_FLIGHT} requests in flight); succeeded {succeeded} of {}, preemptions {preemptions}",
        match arrive {
            Arrive::EachJob => "one POST per job",
            Arrive::StagePerInstant => "the jobs due at one instant as one stage",
        },
        jobs.len()
    );
    if !never_ended.is_empty() {
        println!("NOT every job ended: {} still open 600 s after the last arrival (cancelled; the wall time is then the wait's)", never_ended.len());
    }
}

async fn idle() {
    let total = if quick() { 20_000 } else { 100_000 };
    let server = Server::start("idle", &["--local-cpus", "64"]).await;
    server.apply(&one_queue(1)).await;
    let blocker = server.submit(&json!({"entrypoint": "sleep 3600", "resources": {"cpu": 1}})).await;
    let t = Instant::now();
    let per_stage = 10_000;
    for s in 0..total / per_stage {
        let jobs: Vec<Value> = (0..per_stage).map(|i| json!({"name": format!("w{s}-{i}"), "entrypoint": "true", "resources": {"cpu": 1}})).collect();
        let r = server.http.post(format!("{}/api/v1/stages", server.url)).json(&json!({"name": format!("batch{s}"), "jobs": jobs})).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 201, "{}", r.text().await.unwrap());
    }
    let load = t.elapsed().as_secs_f64();
    // Let the loop take them in and settle (at most 300 s; the table says if not all came).
    let deadline = Instant::now() + Duration::from_secs(300);
    let arrived = loop {
        let q = server.get("/api/v1/queues/default").await;
        let pending = q["pending_count"].as_u64().unwrap_or(0);
        if pending == total as u64 || Instant::now() >= deadline {
            break pending;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    tokio::time::sleep(Duration::from_secs(5)).await;
    let db = server.dir.join("berth.db");
    let pool = sqlx::sqlite::SqlitePoolOptions::new().max_connections(1).connect(&format!("sqlite://{}?mode=ro", db.display())).await.unwrap();
    let probe = |pool: sqlx::SqlitePool| async move {
        let jobs: (i64, i64) = sqlx::query_as("SELECT COALESCE(MAX(updated_at_us), 0), COUNT(*) FROM jobs").fetch_one(&pool).await.unwrap();
        let events: (i64,) = sqlx::query_as("SELECT COUNT(*) FROM events").fetch_one(&pool).await.unwrap();
        let samples: (i64,) = sqlx::query_as("SELECT COUNT(*) FROM resource_samples").fetch_one(&pool).await.unwrap();
        (jobs.0, jobs.1, events.0, samples.0)
    };
    let window = if quick() { 10 } else { 30 };
    let before = probe(pool.clone()).await;
    let (cpu0, _) = server.usage();
    let w0 = server.write_bytes();
    tokio::time::sleep(Duration::from_secs(window)).await;
    let (cpu1, rss) = server.usage();
    let w1 = server.write_bytes();
    let after = probe(pool.clone()).await;
    let pct = (cpu1 - cpu0) / window as f64 * 100.0;
    println!("\n## idle: {total} pending jobs that cannot fit (quota 1 CPU held by {blocker}), {window} s window");
    println!("{:<44} | {:>14} | {:>10}", "measure", "value", "target");
    println!("{}", "-".repeat(76));
    println!("{:<44} | {:>12.2} % | {:>10}", "server CPU (% of one core)", pct, "<= 1 %");
    println!("{:<44} | {:>14} | {:>10}", "job rows written (max updated_at changed)", if after.0 == before.0 { "none".to_string() } else { "YES".to_string() }, "none");
    println!("{:<44} | {:>14} | {:>10}", "events written", after.2 - before.2, "0");
    println!("{:<44} | {:>14} | {:>10}", "resource samples written (periodic)", after.3 - before.3, "-");
    println!("{:<44} | {:>12} B | {:>10}", "bytes written to storage by the server", w1.saturating_sub(w0), "-");
    println!("loading {total} jobs as stages of {per_stage}: {load:.1} s; server peak RSS {rss:.0} MB");
    if arrived != total as u64 {
        println!("NOT every job arrived: the queue showed {arrived} of {total} pending 300 s after loading; measured anyway");
    }
}

/// Proportional set size (MB) of every process of the Ray installation (its venv in the
/// command line, or a `ray::` worker title): the head node's memory.
fn ray_pss_mb() -> f64 {
    let mut kb = 0u64;
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0.0 };
    for entry in dir.flatten() {
        let path = entry.path();
        let Ok(cmd) = std::fs::read(path.join("cmdline")) else { continue };
        let cmd = String::from_utf8_lossy(&cmd);
        if !(cmd.contains("berth-ray-venv") || cmd.starts_with("ray::") || cmd.contains("/ray/")) {
            continue;
        }
        let rollup = std::fs::read_to_string(path.join("smaps_rollup")).unwrap_or_default();
        kb += rollup.lines().find(|l| l.starts_with("Pss:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()).unwrap_or(0);
    }
    kb as f64 / 1024.0
}

/// Samples [`ray_pss_mb`] every 250 ms until dropped; the peak.
struct PeakWatch(std::sync::Arc<std::sync::atomic::AtomicU64>, tokio::task::JoinHandle<()>);

impl PeakWatch {
    fn start() -> PeakWatch {
        let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let p = peak.clone();
        let task = tokio::spawn(async move {
            loop {
                let mb = tokio::task::spawn_blocking(ray_pss_mb).await.unwrap_or(0.0) as u64;
                p.fetch_max(mb, std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        });
        PeakWatch(peak, task)
    }

    fn stop(self) -> f64 {
        self.1.abort();
        self.0.load(std::sync::atomic::Ordering::Relaxed) as f64
    }
}

fn restart_ray() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/ray.sh");
    for arg in ["stop", "start"] {
        let ok = Command::new(&script).arg(arg).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
        assert!(ok, ".ci/ray.sh {arg} failed");
    }
}

/// Runs one scenario as a task of its own: when it panics (a failed check, a server that did
/// not start), says so and returns false, and the scenarios after it still print their tables.
async fn scenario(name: &str, run: impl std::future::Future<Output = ()> + Send + 'static) -> bool {
    match tokio::spawn(run).await {
        Ok(()) => true,
        Err(e) => {
            let why = match e.try_into_panic() {
                Ok(p) => p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default(),
                Err(e) => e.to_string(),
            };
            println!("\n## {name}: FAILED, no table: {why}");
            false
        }
    }
}

#[tokio::main]
async fn main() {
    let want = std::env::var("BERTH_BENCH_RUNTIME").unwrap_or_else(|_| "latency,throughput,idle,kueue,kueue_processes,kueue_large,kueue_large_processes,ray,ray_api,slurm".into());
    let want: Vec<&str> = want.split(',').map(str::trim).collect();
    println!("binary: {}", bin());
    println!("# Berth runtime benchmarks (bench-profile binary, SQLite, local backend){}", if quick() { " — QUICK mode" } else { "" });
    let mut failed = Vec::new();
    if want.contains(&"latency") && !scenario("latency", latency()).await {
        failed.push("latency");
    }
    if want.contains(&"throughput") && !scenario("throughput", throughput()).await {
        failed.push("throughput");
    }
    if want.contains(&"idle") && !scenario("idle", idle()).await {
        failed.push("idle");
    }
    // The large-scale jobs arrive 1,000 at a time (one per queue): one stage each keeps
    // Kueue's pace, which one POST per job with 64 in flight does not.
    for (name, s, runner, arrive) in [
        ("kueue", &KUEUE_BASELINE, Runner::NoOp, Arrive::EachJob),
        ("kueue_processes", &KUEUE_BASELINE, Runner::Processes, Arrive::EachJob),
        ("kueue_large", &KUEUE_LARGE_SCALE, Runner::NoOp, Arrive::StagePerInstant),
        ("kueue_large_processes", &KUEUE_LARGE_SCALE, Runner::Processes, Arrive::StagePerInstant),
    ] {
        if want.contains(&name) && !scenario(name, kueue(s, runner, arrive)).await {
            failed.push(name);
        }
    }
    if want.contains(&"ray") {
        match std::env::var("BERTH_BENCH_RAY_URL") {
            Ok(url) => {
                let url = url.trim_end_matches('/').to_string();
                if !scenario("ray", async move { ray_overhead::run(&url).await }).await {
                    failed.push("ray");
                }
            }
            Err(_) => println!("\n## ray: skipped, BERTH_BENCH_RAY_URL is not set (`make bench` starts a head)"),
        }
    }
    if want.contains(&"ray_api") {
        match std::env::var("BERTH_BENCH_RAY_URL") {
            Ok(url) => {
                let url = url.trim_end_matches('/').to_string();
                if !scenario("ray_api", async move { ray_overhead::front_door::run(&url).await }).await {
                    failed.push("ray_api");
                }
            }
            Err(_) => println!("\n## ray_api: skipped, BERTH_BENCH_RAY_URL is not set (`make bench` starts a head)"),
        }
    }
    if want.contains(&"slurm") {
        match std::env::var("BERTH_BENCH_SLURM") {
            Ok(confs) if !confs.trim().is_empty() => {
                let conf = confs.trim().split(':').next().unwrap_or_default().to_string();
                if !scenario("slurm", async move { slurm_overhead::run(&conf).await }).await {
                    failed.push("slurm");
                }
            }
            _ => println!("\n## slurm: skipped, BERTH_BENCH_SLURM is not set (`make bench` starts the test clusters)"),
        }
    }
    if !failed.is_empty() {
        println!("\nruntime benchmarks that failed: {}", failed.join(", "));
        std::process::exit(1);
    }
}
