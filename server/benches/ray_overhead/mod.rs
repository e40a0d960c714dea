//! Berth's overhead on top of Ray: the same no-op jobs (1 CPU each) run three ways on the
//! `.ci/ray.sh` head, which is restarted before each so all start from an empty job history:
//!
//! 1. **direct flood**: every job POSTed to Ray's Jobs API at once, as a script without a
//!    scheduler would; Ray fails the ones its supervisors cannot start in time;
//! 2. **direct, N in flight**: a client that keeps N jobs submitted and polls each (as Berth
//!    does: every 100 ms, from 500 ms after its submission), N being what Berth keeps in
//!    flight here (1-CPU jobs on the node's CPUs, within `--ray-max-in-flight`): the fair
//!    baseline, and the one the time ratio is against;
//! 3. **berth**: the jobs submitted to Berth (one queue with the node's CPUs as quota,
//!    defaults otherwise).
//!
//! Times run from just before the first submission to the end of the last job: Ray's
//! `end_time` for the direct runs (no client lag counted), Berth's `finished_at` for Berth
//! (its own polling lag included). "Slot gap" is the median time from a job's end to the
//! submission of the job that takes its place (Ray's records), once all slots are busy.

use super::*;

/// Status polls of the direct client: Berth's default interval and first-poll delay.
const POLL: Duration = Duration::from_millis(100);
const FIRST_POLL: Duration = Duration::from_millis(500);

/// Berth's default `--ray-max-in-flight`.
const BERTH_CAP: usize = 20;

/// One way of running the jobs, measured.
struct Run {
    runner: String,
    in_flight: String,
    /// Seconds to the end of the last job.
    wall: f64,
    succeeded: usize,
    /// Failed jobs by Ray's `error_type` (or Berth's reason).
    failed: BTreeMap<String, usize>,
    /// Head-node PSS peak, MB.
    peak: f64,
    /// Median slot gap, ms (`None` when no job waited for a slot).
    gap_ms: Option<f64>,
}

/// Epoch milliseconds now.
fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

/// Ray's records of the submissions whose id starts with `prefix`.
async fn ray_jobs(http: &reqwest::Client, url: &str, prefix: &str) -> Vec<Value> {
    let jobs: Value = http.get(format!("{url}/api/jobs/")).send().await.unwrap().json().await.unwrap_or(Value::Null);
    jobs.as_array().map(|a| a.iter().filter(|j| j["submission_id"].as_str().is_some_and(|s| s.starts_with(prefix))).cloned().collect()).unwrap_or_default()
}

fn terminal(status: &str) -> bool {
    matches!(status, "SUCCEEDED" | "FAILED" | "STOPPED")
}

/// Median time (ms) from the k-th end to the (k + slots)-th submission, from Ray's records.
fn slot_gap(jobs: &[Value], slots: usize) -> Option<f64> {
    let mut starts: Vec<i64> = jobs.iter().filter_map(|j| j["start_time"].as_i64()).collect();
    let mut ends: Vec<i64> = jobs.iter().filter_map(|j| j["end_time"].as_i64()).collect();
    starts.sort_unstable();
    ends.sort_unstable();
    let mut gaps: Vec<f64> = starts.iter().skip(slots).zip(&ends).map(|(s, e)| (s - e) as f64).collect();
    gaps.sort_by(f64::total_cmp);
    (!gaps.is_empty()).then(|| percentile(&gaps, 0.5))
}

/// Counts Ray's outcomes: succeeded, and failures by error type.
fn outcomes(jobs: &[Value]) -> (usize, BTreeMap<String, usize>) {
    let mut failed = BTreeMap::new();
    let mut succeeded = 0;
    for j in jobs {
        match j["status"].as_str() {
            Some("SUCCEEDED") => succeeded += 1,
            other => *failed.entry(j["error_type"].as_str().unwrap_or(other.unwrap_or("?")).to_string()).or_insert(0) += 1,
        }
    }
    (succeeded, failed)
}

/// Submits `n` jobs straight to Ray, at most `cap` in flight (`None`: all at once).
async fn direct(url: &str, n: usize, cap: Option<usize>) -> Run {
    let http = reqwest::Client::builder().pool_max_idle_per_host(64).build().unwrap();
    let prefix = format!("direct-{}-{}-", cap.map_or("flood".into(), |c| c.to_string()), std::process::id());
    let submit = |i: usize| {
        let body = json!({"entrypoint": "true", "submission_id": format!("{prefix}{i}"), "entrypoint_num_cpus": 1});
        let http = http.clone();
        let url = url.to_string();
        async move {
            let r = http.post(format!("{url}/api/jobs/")).json(&body).send().await.unwrap();
            assert!(r.status().is_success(), "direct submit {i}: {}", r.text().await.unwrap_or_default());
        }
    };
    let watch = PeakWatch::start();
    let t0 = now_ms();
    let deadline = Instant::now() + Duration::from_secs(1800);
    match cap {
        None => {
            for i in 0..n {
                submit(i).await;
            }
            // The whole list every 500 ms: one request, however many jobs are pending.
            loop {
                let jobs = ray_jobs(&http, url, &prefix).await;
                if jobs.len() == n && jobs.iter().all(|j| terminal(j["status"].as_str().unwrap_or(""))) {
                    break;
                }
                assert!(Instant::now() < deadline, "the direct flood did not finish");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        Some(cap) => {
            let mut in_flight: Vec<(usize, Instant)> = Vec::new();
            let mut next = 0;
            while next < n || !in_flight.is_empty() {
                while in_flight.len() < cap && next < n {
                    submit(next).await;
                    in_flight.push((next, Instant::now() + FIRST_POLL));
                    next += 1;
                }
                tokio::time::sleep(POLL).await;
                let due: Vec<usize> = in_flight.iter().filter(|(_, at)| *at <= Instant::now()).map(|(i, _)| *i).collect();
                let asked = due.iter().map(|&i| {
                    let http = http.clone();
                    let url = format!("{url}/api/jobs/{prefix}{i}");
                    async move {
                        let v: Value = http.get(url).send().await.unwrap().json().await.unwrap_or(Value::Null);
                        (i, terminal(v["status"].as_str().unwrap_or("")))
                    }
                });
                for (i, ended) in futures_util::future::join_all(asked).await {
                    if ended {
                        in_flight.retain(|(j, _)| *j != i);
                    }
                }
                assert!(Instant::now() < deadline, "the direct client did not finish");
            }
        }
    }
    let peak = watch.stop();
    let jobs = ray_jobs(&http, url, &prefix).await;
    let last_end = jobs.iter().filter_map(|j| j["end_time"].as_i64()).max().unwrap_or(t0);
    let (succeeded, failed) = outcomes(&jobs);
    Run {
        runner: match cap {
            None => "direct flood (all POSTed at once)".into(),
            Some(_) => "direct, N in flight (fair baseline)".into(),
        },
        in_flight: cap.map_or(format!("{n}"), |c| c.to_string()),
        wall: (last_end - t0) as f64 / 1000.0,
        succeeded,
        failed,
        peak,
        gap_ms: cap.and_then(|c| slot_gap(&jobs, c)),
    }
}

/// The same jobs through a Berth server; also the server's CPU seconds and peak RSS.
async fn berth(url: &str, n: usize, cpus: f64, slots: usize) -> (Run, f64, f64) {
    let server = Server::start("ray", &["--no-local", "--ray", &format!("ray={url}")]).await;
    server.apply(&one_queue(cpus as u32)).await;
    let watch = PeakWatch::start();
    let t0 = Utc::now();
    for _ in 0..n {
        server.submit(&json!({"entrypoint": "true", "resources": {"cpu": 1}})).await;
    }
    let deadline = Instant::now() + Duration::from_secs(1800);
    loop {
        let page = server.get("/api/v1/jobs?state=pending,admitted,running&max_items=1").await;
        if page["jobs"].as_array().is_some_and(|a| a.is_empty()) {
            break;
        }
        assert!(Instant::now() < deadline, "Berth's jobs did not finish");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let peak = watch.stop();
    let jobs = server.all_jobs().await;
    let last = jobs.iter().filter_map(|j| time(&j["finished_at"])).max().unwrap_or(t0);
    let mut failed = BTreeMap::new();
    for j in jobs.iter().filter(|j| j["state"] != "succeeded") {
        *failed.entry(j["reason"].as_str().unwrap_or("?").chars().take(60).collect::<String>()).or_insert(0) += 1;
    }
    let on_ray = ray_jobs(&reqwest::Client::new(), url, "j-").await;
    let (cpu, rss) = server.usage();
    let run = Run {
        runner: format!("berth (quota {cpus} CPU, defaults)"),
        in_flight: slots.to_string(),
        wall: (last - t0).num_milliseconds() as f64 / 1000.0,
        succeeded: jobs.iter().filter(|j| j["state"] == "succeeded").count(),
        failed,
        peak,
        gap_ms: slot_gap(&on_ray, slots),
    };
    (run, cpu, rss)
}

/// Runs the three and prints one table.
pub async fn run(url: &str) {
    let n = if quick() { 20 } else { 200 };
    let http = reqwest::Client::new();
    let cpus = {
        let nodes: Value = http.get(format!("{url}/api/v0/nodes?view=summary")).send().await.unwrap().json().await.unwrap_or(Value::Null);
        let total = nodes["data"]["summary"].as_array().and_then(|a| a.first()).and_then(|n| n["raylet"]["resourcesTotal"]["CPU"].as_f64());
        total.unwrap_or(4.0)
    };
    // What Berth keeps in flight: 1-CPU jobs on the node's CPUs, within its cap.
    let slots = (cpus as usize).clamp(1, BERTH_CAP);

    restart_ray();
    let idle = ray_pss_mb();
    let flood = direct(url, n, None).await;
    restart_ray();
    let paced = direct(url, n, Some(slots)).await;
    restart_ray();
    let (through, cpu, rss) = berth(url, n, cpus, slots).await;

    println!("\n## Ray: {n} no-op jobs (1 CPU each) on a {cpus}-CPU head: Berth's overhead over Ray's Jobs API");
    println!("{:<38} | {:>9} | {:>11} | {:>9} | {:>9} | {:>13} | failed", "runner", "in flight", "to last end", "succeeded", "slot gap", "head PSS peak");
    println!("{}", "-".repeat(118));
    for r in [&flood, &paced, &through] {
        let failed: Vec<String> = r.failed.iter().map(|(why, k)| format!("{k} {why}")).collect();
        println!(
            "{:<38} | {:>9} | {:>9.1} s | {:>5} / {n} | {:>9} | {:>10.0} MB | {}",
            r.runner,
            r.in_flight,
            r.wall,
            r.succeeded,
            r.gap_ms.map_or("-".into(), |g| format!("{g:.0} ms")),
            r.peak,
            if failed.is_empty() { "0".into() } else { failed.join(", ") }
        );
    }
    let ok = |r: &Run| r.succeeded == n;
    let ratio = through.wall / paced.wall;
    let met = |yes: bool| if yes { "met" } else { "NOT met" };
    println!(
        "time ratio berth / direct with {slots} in flight: {ratio:.2}x (target <= 1.1x: {}{}); head PSS peak berth {:.0} MB vs direct flood {:.0} MB (target lower: {})",
        met(ratio <= 1.1),
        if ok(&paced) && ok(&through) { "" } else { "; NOT every job succeeded" },
        through.peak,
        flood.peak,
        met(through.peak < flood.peak),
    );
    println!("idle head PSS {idle:.0} MB; berth server {cpu:.1} s CPU, peak RSS {rss:.0} MB");
}
