//! Berth's overhead on top of Ray: the same no-op jobs (1 CPU each) run four ways on the
//! `.ci/ray.sh` head:
//!
//! 1. **direct flood** (fresh head): every job POSTed to Ray's Jobs API at once, as a
//!    script without a scheduler would; Ray runs as many as its CPUs allow and fails the
//!    ones still waiting after `RAY_JOB_START_TIMEOUT_SECONDS` (60 s in .ci/ray.sh);
//! 2. **berth** (fresh head): the same jobs all submitted to Berth at once (one queue with
//!    the node's CPUs as quota, defaults otherwise; Berth deletes each ended job from Ray
//!    once it has saved its log): with the flood, the head-memory comparison, both
//!    starting from an empty job history;
//! 3. **direct, N in flight**: a client that keeps N jobs submitted and polls each (as Berth
//!    does: every 100 ms, from 500 ms after its submission), N being what Berth keeps in
//!    flight here (1-CPU jobs on the node's CPUs, within `--ray-max-in-flight`): the fair
//!    baseline, and the one the time ratio is against;
//! 4. **berth** again, taking turns with 3.
//!
//! 3 and 4 take turns on one fresh head, in chunks (8 of 25 jobs; who goes first
//! alternates), each chunk starting once Ray's usage report shows the cluster idle, and
//! their times are the sums over the chunks: on a shared machine whose load drifts,
//! back-to-back runs differ more than Berth's overhead. (Their memory peaks are shown too,
//! but that head has seen twice the jobs by the end.) A time runs from just
//! before the first submission to the end of the last job: Ray's `end_time` for the direct
//! runs (no client lag counted), Berth's `finished_at` for Berth (its own polling lag
//! included). "Slot gap" is the median time from a job's end to the
//! submission of the job that takes its place (Ray's records), once all slots are busy;
//! "job in Ray" the median from submission to end as Ray recorded them, which shows how
//! loaded the machine was during each run.
//!
//! `BERTH_BENCH_RAY_ONLY=paced` runs 3 and 4 alone (the time ratio), and
//! `BERTH_BENCH_RAY_ARGS` adds server flags to Berth's runs (e.g. `--ray-nodes-ms 5000`), for
//! comparing settings. The CPU column is the machine's busy CPU time per job while each
//! runner's chunks ran (Berth's server included), and that of Ray's dashboard process.
//!
//! `BERTH_BENCH_RAY_UNGATED=1` adds a flood of jobs that ask Ray for no resources (what a
//! script that sets none sends): Ray starts all their supervisors at once (about 100 MB
//! each), which is where a flood costs memory. Off by default: 200 of them need several GB;
//! it is given up (its open jobs counted as aborted) when the machine has less than 3 GB
//! available.

use super::*;

/// Status polls of the direct client: Berth's default interval and first-poll delay.
const POLL: Duration = Duration::from_millis(100);
const FIRST_POLL: Duration = Duration::from_millis(500);

/// Berth's default `--ray-max-in-flight`.
const BERTH_CAP: usize = 20;

/// CPU seconds so far: the whole machine's busy time (`/proc/stat`) and Ray's dashboard
/// process's (the one that serves every Jobs API request and runs Ray's job manager).
fn cpu_counters() -> (f64, f64) {
    let machine = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
        let f: Vec<f64> = s.lines().next()?.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
        // user nice system idle iowait irq softirq steal: busy is all but idle and iowait.
        Some((f.iter().sum::<f64>() - f.get(3)? - f.get(4)?) / 100.0)
    });
    let mut dashboard = 0.0;
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) else { continue };
            if !String::from_utf8_lossy(&cmd).contains("dashboard/dashboard.py") {
                continue;
            }
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            let f: Vec<&str> = stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
            dashboard += f.get(11).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0) / 100.0
                + f.get(12).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
        }
    }
    (machine.unwrap_or(0.0), dashboard)
}

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
    /// Median submission-to-end in Ray, s.
    in_ray: f64,
    /// CPU seconds per job while this runner ran: the machine's and the dashboard's.
    cpu: Option<(f64, f64)>,
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

/// Median time (ms) from the k-th end to the (k + slots)-th submission within each chunk of
/// jobs, from Ray's records.
fn slot_gap<'a>(chunks: impl IntoIterator<Item = Vec<&'a Value>>, slots: usize) -> Option<f64> {
    let mut gaps = Vec::new();
    for jobs in chunks {
        let mut starts: Vec<i64> = jobs.iter().filter_map(|j| j["start_time"].as_i64()).collect();
        let mut ends: Vec<i64> = jobs.iter().filter_map(|j| j["end_time"].as_i64()).collect();
        starts.sort_unstable();
        ends.sort_unstable();
        gaps.extend(starts.iter().skip(slots).zip(&ends).map(|(s, e)| (s - e) as f64));
    }
    gaps.sort_by(f64::total_cmp);
    (!gaps.is_empty()).then(|| percentile(&gaps, 0.5))
}

/// Median seconds from submission to end, by Ray's records.
fn in_ray(jobs: &[Value]) -> f64 {
    let mut d: Vec<f64> = jobs.iter().filter_map(|j| Some((j["end_time"].as_i64()? - j["start_time"].as_i64()?) as f64 / 1000.0)).collect();
    d.sort_by(f64::total_cmp);
    percentile(&d, 0.5)
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

/// The ungated flood is given up when the machine has less memory than this available
/// (the next phase's restart of Ray then frees it).
const MIN_AVAILABLE_MB: f64 = 3072.0;

/// `MemAvailable` of the machine, MB.
fn mem_available_mb() -> f64 {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kb = info.lines().find_map(|l| l.strip_prefix("MemAvailable:")).and_then(|l| l.trim().strip_suffix("kB")?.trim().parse::<f64>().ok());
    kb.map_or(f64::INFINITY, |kb| kb / 1024.0)
}

/// Submits `n` jobs straight to Ray at once, each asking for 1 CPU unless `ungated`; waits
/// for all to end (the whole list every 500 ms: one request, however many are pending).
/// An ungated flood is aborted when the machine's available memory falls below
/// [`MIN_AVAILABLE_MB`]; its jobs still unfinished then count as failed `aborted`.
async fn flood(url: &str, n: usize, ungated: bool) -> Run {
    let http = reqwest::Client::builder().pool_max_idle_per_host(64).build().unwrap();
    let prefix = format!("flood-{}-{}-", u8::from(ungated), std::process::id());
    let watch = PeakWatch::start();
    let t0 = now_ms();
    for i in 0..n {
        let mut body = json!({"entrypoint": "true", "submission_id": format!("{prefix}{i}")});
        if !ungated {
            body["entrypoint_num_cpus"] = json!(1);
        }
        let r = http.post(format!("{url}/api/jobs/")).json(&body).send().await.unwrap();
        assert!(r.status().is_success(), "flood submit {i}: {}", r.text().await.unwrap_or_default());
    }
    let deadline = Instant::now() + Duration::from_secs(1800);
    let mut least_free = mem_available_mb();
    let mut aborted = false;
    loop {
        let jobs = ray_jobs(&http, url, &prefix).await;
        if jobs.len() == n && jobs.iter().all(|j| terminal(j["status"].as_str().unwrap_or(""))) {
            break;
        }
        least_free = least_free.min(mem_available_mb());
        if ungated && least_free < MIN_AVAILABLE_MB {
            aborted = true;
            break;
        }
        assert!(Instant::now() < deadline, "the direct flood did not finish");
        // Often enough to catch the memory falling (supervisors start by the dozen).
        tokio::time::sleep(Duration::from_millis(if ungated { 100 } else { 500 })).await;
    }
    let peak = watch.stop();
    let jobs = ray_jobs(&http, url, &prefix).await;
    let last_end = jobs.iter().filter_map(|j| j["end_time"].as_i64()).max().unwrap_or(t0);
    let (succeeded, mut failed) = outcomes(&jobs);
    if aborted {
        let open: usize = jobs.iter().filter(|j| !terminal(j["status"].as_str().unwrap_or(""))).count();
        for j in jobs.iter().filter(|j| !terminal(j["status"].as_str().unwrap_or(""))) {
            let _ = http.post(format!("{url}/api/jobs/{}/stop", j["submission_id"].as_str().unwrap_or_default())).send().await;
        }
        failed.retain(|k, _| k != "PENDING" && k != "RUNNING");
        failed.insert(format!("aborted at {least_free:.0} MB available"), open);
    }
    Run {
        runner: if ungated { "direct flood, no CPU asked (fresh head)".into() } else { "direct flood (fresh head)".into() },
        in_flight: n.to_string(),
        wall: (last_end - t0) as f64 / 1000.0,
        succeeded,
        failed,
        peak,
        gap_ms: None,
        in_ray: in_ray(&jobs),
        cpu: None,
    }
}

/// One chunk of the direct client: jobs `ids` straight to Ray, `cap` in flight, each polled
/// as Berth polls; seconds from the first submission to Ray's end of the last.
async fn direct_chunk(http: &reqwest::Client, url: &str, prefix: &str, ids: std::ops::Range<usize>, cap: usize) -> f64 {
    let t0 = now_ms();
    let deadline = Instant::now() + Duration::from_secs(1800);
    let mut in_flight: Vec<(usize, Instant)> = Vec::new();
    let mut todo = ids.clone();
    loop {
        while in_flight.len() < cap {
            let Some(i) = todo.next() else { break };
            let body = json!({"entrypoint": "true", "submission_id": format!("{prefix}{i}"), "entrypoint_num_cpus": 1});
            let r = http.post(format!("{url}/api/jobs/")).json(&body).send().await.unwrap();
            assert!(r.status().is_success(), "direct submit {i}: {}", r.text().await.unwrap_or_default());
            in_flight.push((i, Instant::now() + FIRST_POLL));
        }
        if in_flight.is_empty() {
            break;
        }
        tokio::time::sleep(POLL).await;
        let due: Vec<usize> = in_flight.iter().filter(|(_, at)| *at <= Instant::now()).map(|(i, _)| *i).collect();
        let asked = due.iter().map(|&i| {
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
    let mine: Vec<Value> = ray_jobs(http, url, prefix).await.into_iter().filter(|j| chunk_of(j, prefix).is_some_and(|i| ids.contains(&i))).collect();
    let last_end = mine.iter().filter_map(|j| j["end_time"].as_i64()).max().unwrap_or(t0);
    (last_end - t0) as f64 / 1000.0
}

/// The index in a direct submission id `{prefix}{i}`.
fn chunk_of(job: &Value, prefix: &str) -> Option<usize> {
    job["submission_id"].as_str()?.strip_prefix(prefix)?.parse().ok()
}

/// One chunk through Berth: `k` jobs; seconds from the first submission to Berth's
/// `finished_at` of the last, and the jobs' ids.
async fn berth_chunk(server: &Server, k: usize) -> (f64, Vec<String>) {
    let t0 = Utc::now();
    let mut ids = Vec::with_capacity(k);
    for _ in 0..k {
        ids.push(server.submit(&json!({"entrypoint": "true", "resources": {"cpu": 1}})).await);
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
    let mut last = t0;
    for id in &ids {
        if let Some(t) = time(&server.get(&format!("/api/v1/jobs/{id}")).await["finished_at"]) {
            last = last.max(t);
        }
    }
    ((last - t0).num_milliseconds() as f64 / 1000.0, ids)
}

/// Waits until Ray's usage report is newer than now and shows no CPU in use, and Berth's node
/// view shows none used outside it: the chunk before is gone from every figure, so the next
/// one starts on an idle cluster (else Berth rightly holds back for the direct client's jobs
/// of the chunk before, as for any other user's, until Ray's next report).
async fn settle(http: &reqwest::Client, url: &str, server: &Server) {
    let since = Utc::now().timestamp_micros() as f64 / 1e6;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let status: Value = http.get(format!("{url}/api/cluster_status")).send().await.unwrap().json().await.unwrap_or(Value::Null);
        let report = &status["data"]["clusterStatus"];
        let fresh = report["time"].as_f64().is_some_and(|t| t > since);
        let idle = report["loadMetricsReport"]["usage"]["CPU"][0].as_f64() == Some(0.0);
        let nodes = server.get("/api/v1/nodes").await;
        let clear = nodes["nodes"].as_array().is_some_and(|a| a.iter().all(|n| n["used_outside"].as_object().is_none_or(|o| o.is_empty())));
        if fresh && idle && clear {
            return;
        }
        assert!(Instant::now() < deadline, "the cluster did not settle: {report}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Berth alone on a fresh head (as the floods run): all `n` jobs submitted to it at once;
/// the memory comparison with the floods. Also how many of its jobs Ray still lists at the
/// end (Berth deletes ended ones once it has their logs).
async fn berth_alone(url: &str, n: usize, cpus: f64, slots: usize) -> (Run, usize) {
    let server = Server::start("ray-alone", &berth_args(url).iter().map(String::as_str).collect::<Vec<_>>()).await;
    server.apply(&one_queue(cpus as u32)).await;
    let watch = PeakWatch::start();
    let (wall, ids) = berth_chunk(&server, n).await;
    let peak = watch.stop();
    let records = kept_records(&server, &ids);
    let jobs = server.all_jobs().await;
    let mut failed = BTreeMap::new();
    for j in jobs.iter().filter(|j| j["state"] != "succeeded") {
        *failed.entry(j["reason"].as_str().unwrap_or("?").chars().take(60).collect::<String>()).or_insert(0) += 1;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let left_in_ray = ray_jobs(&reqwest::Client::new(), url, "j-").await.len();
    let run = Run {
        runner: "berth (fresh head)".into(),
        in_flight: slots.to_string(),
        wall,
        succeeded: jobs.iter().filter(|j| j["state"] == "succeeded").count(),
        failed,
        peak,
        gap_ms: slot_gap([records.iter().collect()], slots),
        in_ray: in_ray(&records),
        cpu: None,
    };
    (run, left_in_ray)
}

/// Berth's flags for the runs here: `--no-local --ray ray=URL` and `BERTH_BENCH_RAY_ARGS`.
fn berth_args(url: &str) -> Vec<String> {
    let mut args = vec!["--no-local".to_string(), "--ray".into(), format!("ray={url}")];
    args.extend(std::env::var("BERTH_BENCH_RAY_ARGS").unwrap_or_default().split_whitespace().map(String::from));
    args
}

/// Ray's final records of Berth's runs, as Berth kept them (`data/runs/{job}-r1/ray.json`)
/// once it deleted the jobs from Ray.
fn kept_records<'a>(server: &Server, ids: impl IntoIterator<Item = &'a String>) -> Vec<Value> {
    ids.into_iter()
        .filter_map(|id| std::fs::read_to_string(server.dir.join(format!("data/runs/{id}-r1/ray.json"))).ok())
        .filter_map(|text| serde_json::from_str(&text).ok())
        .collect()
}

/// The direct client and Berth, `rounds` chunks each, taking turns (who goes first
/// alternates), on one head: a machine whose load drifts weighs on both alike.
async fn paced(url: &str, n: usize, cpus: f64, slots: usize, rounds: usize) -> (Run, Run, f64, f64) {
    let http = reqwest::Client::builder().pool_max_idle_per_host(64).build().unwrap();
    let prefix = format!("paced-{}-", std::process::id());
    let server = Server::start("ray", &berth_args(url).iter().map(String::as_str).collect::<Vec<_>>()).await;
    server.apply(&one_queue(cpus as u32)).await;
    let (mut direct_s, mut berth_s, mut direct_peak, mut berth_peak) = (0.0, 0.0, 0.0f64, 0.0f64);
    let mut per_job = [(0.0, 0.0); 2];
    let chunk = n / rounds;
    let mut berth_chunks: Vec<Vec<String>> = Vec::new();
    for r in 0..rounds {
        for side in [r % 2, 1 - r % 2] {
            settle(&http, url, &server).await;
            let watch = PeakWatch::start();
            let before = cpu_counters();
            if side == 0 {
                direct_s += direct_chunk(&http, url, &prefix, r * chunk..(r + 1) * chunk, slots).await;
                direct_peak = direct_peak.max(watch.stop());
            } else {
                let (s, ids) = berth_chunk(&server, chunk).await;
                berth_s += s;
                berth_chunks.push(ids);
                berth_peak = berth_peak.max(watch.stop());
            }
            let after = cpu_counters();
            per_job[side].0 += (after.0 - before.0) / chunk as f64 / rounds as f64;
            per_job[side].1 += (after.1 - before.1) / chunk as f64 / rounds as f64;
        }
    }
    let direct_jobs = ray_jobs(&http, url, &prefix).await;
    // Berth deletes its ended jobs from Ray, keeping Ray's records in its data dir.
    let berth_jobs = kept_records(&server, berth_chunks.iter().flatten());
    let (succeeded, failed) = outcomes(&direct_jobs);
    let direct = Run {
        runner: "direct, N in flight (taking turns)".into(),
        in_flight: slots.to_string(),
        wall: direct_s,
        succeeded,
        failed,
        peak: direct_peak,
        gap_ms: slot_gap((0..rounds).map(|r| direct_jobs.iter().filter(|j| chunk_of(j, &prefix).is_some_and(|i| i / chunk == r)).collect()), slots),
        in_ray: in_ray(&direct_jobs),
        cpu: Some(per_job[0]),
    };
    let jobs = server.all_jobs().await;
    let mut failed = BTreeMap::new();
    for j in jobs.iter().filter(|j| j["state"] != "succeeded") {
        *failed.entry(j["reason"].as_str().unwrap_or("?").chars().take(60).collect::<String>()).or_insert(0) += 1;
    }
    let (cpu, rss) = server.usage();
    let berth = Run {
        runner: "berth (taking turns)".into(),
        in_flight: slots.to_string(),
        wall: berth_s,
        succeeded: jobs.iter().filter(|j| j["state"] == "succeeded").count(),
        failed,
        peak: berth_peak,
        gap_ms: slot_gap(
            berth_chunks.iter().map(|ids| berth_jobs.iter().filter(|j| j["submission_id"].as_str().is_some_and(|s| ids.iter().any(|id| s == format!("{id}-r1")))).collect()),
            slots,
        ),
        in_ray: in_ray(&berth_jobs),
        cpu: Some(per_job[1]),
    };
    (direct, berth, cpu, rss)
}

/// Runs them all and prints one table.
pub async fn run(url: &str) {
    // BERTH_BENCH_RAY_JOBS overrides the count (a multiple of 25 keeps the chunks whole).
    let n = std::env::var("BERTH_BENCH_RAY_JOBS").ok().and_then(|v| v.parse::<usize>().ok()).filter(|&n| n > 0).unwrap_or(if quick() { 20 } else { 200 });
    let rounds = if quick() { 2 } else { n.div_ceil(25).max(1) };
    let http = reqwest::Client::new();
    let cpus = {
        let nodes: Value = http.get(format!("{url}/api/v0/nodes?view=summary")).send().await.unwrap().json().await.unwrap_or(Value::Null);
        let total = nodes["data"]["summary"].as_array().and_then(|a| a.first()).and_then(|n| n["raylet"]["resourcesTotal"]["CPU"].as_f64());
        total.unwrap_or(4.0)
    };
    // What Berth keeps in flight: 1-CPU jobs on the node's CPUs, within its cap.
    let slots = (cpus as usize).clamp(1, BERTH_CAP);
    let ungated = std::env::var("BERTH_BENCH_RAY_UNGATED").is_ok_and(|v| !v.is_empty() && v != "0");

    // BERTH_BENCH_RAY_ONLY=paced runs only the taking-turns comparison (the time ratio).
    let only_paced = std::env::var("BERTH_BENCH_RAY_ONLY").is_ok_and(|v| v == "paced");
    restart_ray();
    let idle = ray_pss_mb();
    let (flooded, wild, alone) = if only_paced {
        (None, None, None)
    } else {
        let flooded = flood(url, n, false).await;
        let wild = if ungated {
            restart_ray();
            Some(flood(url, n, true).await)
        } else {
            None
        };
        restart_ray();
        (Some(flooded), wild, Some(berth_alone(url, n, cpus, slots).await))
    };
    restart_ray();
    let (direct, through, cpu, rss) = paced(url, n, cpus, slots, rounds).await;

    println!("\n## Ray: {n} no-op jobs (1 CPU each) on a {cpus}-CPU head: Berth's overhead over Ray's Jobs API");
    println!(
        "{:<36} | {:>9} | {:>11} | {:>9} | {:>9} | {:>10} | {:>13} | {:>17} | failed",
        "runner", "in flight", "time", "succeeded", "slot gap", "job in Ray", "head PSS peak", "CPU/job: all, dash"
    );
    println!("{}", "-".repeat(150));
    for r in [flooded.as_ref(), wild.as_ref(), alone.as_ref().map(|a| &a.0), Some(&direct), Some(&through)].into_iter().flatten() {
        let failed: Vec<String> = r.failed.iter().map(|(why, k)| format!("{k} {why}")).collect();
        println!(
            "{:<36} | {:>9} | {:>9.1} s | {:>5} / {n} | {:>9} | {:>8.1} s | {:>10.0} MB | {:>17} | {}",
            r.runner,
            r.in_flight,
            r.wall,
            r.succeeded,
            r.gap_ms.map_or("-".into(), |g| format!("{g:.0} ms")),
            r.in_ray,
            r.peak,
            r.cpu.map_or("-".into(), |(all, dash)| format!("{all:.2} s, {dash:.2} s")),
            if failed.is_empty() { "0".into() } else { failed.join(", ") }
        );
    }
    let met = |yes: bool| if yes { "met" } else { "NOT met" };
    let all = |r: &Run| r.succeeded == n;
    let ratio = through.wall / direct.wall;
    println!(
        "time: the floods to the last end; the direct client and Berth the sum of {rounds} chunks of {} jobs each, taking turns",
        n / rounds
    );
    println!(
        "time ratio berth / direct with {slots} in flight (taking turns on one head): {ratio:.2}x (target <= 1.1x: {}{})",
        met(ratio <= 1.1),
        if all(&direct) && all(&through) { "" } else { "; NOT every job succeeded" },
    );
    if let (Some(flooded), Some((alone, left_in_ray))) = (&flooded, &alone) {
        println!(
            "head PSS peak, each on a fresh head: berth {:.0} MB vs direct flood {:.0} MB (target lower: {}){}",
            alone.peak,
            flooded.peak,
            met(alone.peak < flooded.peak),
            if all(alone) { "" } else { "; NOT every Berth job succeeded" },
        );
        if let Some(w) = &wild {
            println!("head PSS peak, fresh heads: berth {:.0} MB vs the flood asking no CPU {:.0} MB (lower: {})", alone.peak, w.peak, met(alone.peak < w.peak));
        }
        println!("Berth's jobs Ray still lists after the fresh-head run: {left_in_ray} of {n} (Berth keeps their logs and deletes them)");
    }
    println!(
        "head PSS peak, taking turns on one head ({} jobs by its end): berth {:.0} MB vs direct {:.0} MB",
        2 * n,
        through.peak,
        direct.peak
    );
    println!("CPU/job: busy CPU of the whole machine (Berth's server included) and of Ray's dashboard process while each ran, per job");
    println!("idle head PSS {idle:.0} MB; berth server {cpu:.1} s CPU, peak RSS {rss:.0} MB");
}
