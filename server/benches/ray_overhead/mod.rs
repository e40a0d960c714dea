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
//!
//! Every wait here is bounded ([`deadline_for`]): jobs still open when it passes are stopped
//! (straight through Ray, or cancelled through Berth) and shown as "never ended" in the
//! table, and the bench goes on, so one job Ray leaves RUNNING costs minutes, not the run.

use super::*;

pub mod front_door;

/// How long a wait for `jobs` no-op 1-CPU jobs on `slots` CPUs may take before the jobs still
/// open are given up on: Ray's start timeout (60 s in .ci/ray.sh), plus 5 s for each round of
/// `slots` jobs (one takes about 3 s in Ray on a busy 2-core machine), at most 5 minutes.
fn deadline_for(jobs: usize, slots: usize) -> Duration {
    Duration::from_secs((60 + 5 * jobs.div_ceil(slots.max(1)) as u64).min(300))
}

/// A client for Ray's API whose requests give up instead of hanging the bench.
fn ray_client() -> reqwest::Client {
    reqwest::Client::builder().pool_max_idle_per_host(64).timeout(Duration::from_secs(60)).build().unwrap()
}

/// The head's CPUs, as Ray's node summary reports them (4, .ci/ray.sh's, when it says nothing).
async fn head_cpus(http: &reqwest::Client, url: &str) -> f64 {
    let nodes: Value = match http.get(format!("{url}/api/v0/nodes?view=summary")).send().await {
        Ok(r) => r.json().await.unwrap_or(Value::Null),
        Err(_) => Value::Null,
    };
    let total = nodes["data"]["summary"].as_array().and_then(|a| a.first()).and_then(|n| n["raylet"]["resourcesTotal"]["CPU"].as_f64());
    total.unwrap_or(4.0)
}

/// Asks Ray to stop the submission `id` (best effort: the bench goes on either way).
async fn stop_on_ray(http: &reqwest::Client, url: &str, id: &str) {
    if let Err(e) = http.post(format!("{url}/api/jobs/{id}/stop")).send().await {
        eprintln!("could not stop {id} on Ray: {e}");
    }
}

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
    /// Jobs still open when a wait's deadline passed (then stopped), never submitted
    /// included: not counted as succeeded or failed.
    never_ended: usize,
}

/// Epoch milliseconds now.
fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

/// Ray's records of the submissions whose id starts with `prefix` (none when Ray does not
/// answer: a wait then polls again).
async fn ray_jobs(http: &reqwest::Client, url: &str, prefix: &str) -> Vec<Value> {
    let jobs: Value = match http.get(format!("{url}/api/jobs/")).send().await {
        Ok(r) => r.json().await.unwrap_or(Value::Null),
        Err(e) => {
            eprintln!("Ray's job list: {e}");
            Value::Null
        }
    };
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
/// for all to end (the whole list every 500 ms: one request, however many are pending), at
/// most [`deadline_for`] `n` jobs on `slots` CPUs; those still open then are stopped and
/// count as never ended. An ungated flood is aborted when the machine's available memory
/// falls below [`MIN_AVAILABLE_MB`]; its jobs still unfinished then count as failed `aborted`.
async fn flood(url: &str, n: usize, slots: usize, ungated: bool) -> Run {
    let http = ray_client();
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
    let deadline = Instant::now() + deadline_for(n, slots);
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
        if Instant::now() >= deadline {
            break; // the jobs still open are stopped below and shown as never ended
        }
        // Often enough to catch the memory falling (supervisors start by the dozen).
        tokio::time::sleep(Duration::from_millis(if ungated { 100 } else { 500 })).await;
    }
    let peak = watch.stop();
    let all = ray_jobs(&http, url, &prefix).await;
    let (jobs, open): (Vec<Value>, Vec<Value>) = all.into_iter().partition(|j| terminal(j["status"].as_str().unwrap_or("")));
    for j in &open {
        stop_on_ray(&http, url, j["submission_id"].as_str().unwrap_or_default()).await;
    }
    let last_end = jobs.iter().filter_map(|j| j["end_time"].as_i64()).max().unwrap_or(t0);
    let (succeeded, mut failed) = outcomes(&jobs);
    // Open when given up on, or never listed by Ray.
    let unended = n.saturating_sub(jobs.len());
    let mut never_ended = 0;
    if aborted {
        failed.insert(format!("aborted at {least_free:.0} MB available"), unended);
    } else {
        never_ended = unended;
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
        never_ended,
    }
}

/// One chunk of the direct client: jobs `ids` straight to Ray, `cap` in flight, each polled
/// as Berth polls; seconds from the first submission to Ray's end of the last, and how many
/// jobs never ended: after [`deadline_for`] the chunk is given up, its jobs in flight
/// stopped, the rest not submitted.
async fn direct_chunk(http: &reqwest::Client, url: &str, prefix: &str, ids: std::ops::Range<usize>, cap: usize) -> (f64, usize) {
    let t0 = now_ms();
    let deadline = Instant::now() + deadline_for(ids.len(), cap);
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
                // No answer: not ended yet, asked again next round.
                let v: Value = match http.get(url).send().await {
                    Ok(r) => r.json().await.unwrap_or(Value::Null),
                    Err(_) => Value::Null,
                };
                (i, terminal(v["status"].as_str().unwrap_or("")))
            }
        });
        for (i, ended) in futures_util::future::join_all(asked).await {
            if ended {
                in_flight.retain(|(j, _)| *j != i);
            }
        }
        if Instant::now() >= deadline {
            for (i, _) in &in_flight {
                stop_on_ray(http, url, &format!("{prefix}{i}")).await;
            }
            break;
        }
    }
    let never_ended = in_flight.len() + todo.len();
    let mine: Vec<Value> = ray_jobs(http, url, prefix).await.into_iter().filter(|j| chunk_of(j, prefix).is_some_and(|i| ids.contains(&i))).collect();
    let last_end = mine.iter().filter_map(|j| j["end_time"].as_i64()).max().unwrap_or(t0);
    ((last_end - t0) as f64 / 1000.0, never_ended)
}

/// The index in a direct submission id `{prefix}{i}`.
fn chunk_of(job: &Value, prefix: &str) -> Option<usize> {
    job["submission_id"].as_str()?.strip_prefix(prefix)?.parse().ok()
}

/// One chunk through Berth: `k` jobs on `slots` CPUs; seconds from the first submission to
/// Berth's `finished_at` of the last, the jobs' ids, and those that never ended: still open
/// after [`deadline_for`], then cancelled (Berth stops their Ray jobs).
async fn berth_chunk(server: &Server, k: usize, slots: usize) -> (f64, Vec<String>, Vec<String>) {
    let t0 = Utc::now();
    let mut ids = Vec::with_capacity(k);
    for _ in 0..k {
        ids.push(server.submit(&json!({"entrypoint": "true", "resources": {"cpu": 1}})).await);
    }
    let never_ended = server.drain(deadline_for(k, slots)).await;
    let mut last = t0;
    for id in &ids {
        if let Some(t) = time(&server.get(&format!("/api/v1/jobs/{id}")).await["finished_at"]) {
            last = last.max(t);
        }
    }
    ((last - t0).num_milliseconds() as f64 / 1000.0, ids, never_ended)
}

/// Waits until Ray's usage report is newer than now and shows no CPU in use, and Berth's node
/// view shows none used outside it: the chunk before is gone from every figure, so the next
/// one starts on an idle cluster (else Berth rightly holds back for the direct client's jobs
/// of the chunk before, as for any other user's, until Ray's next report). Whether it did
/// within 2 minutes (if not, the chunk starts anyway and the table says so).
async fn settle(http: &reqwest::Client, url: &str, server: &Server) -> bool {
    let since = Utc::now().timestamp_micros() as f64 / 1e6;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let status: Value = match http.get(format!("{url}/api/cluster_status")).send().await {
            Ok(r) => r.json().await.unwrap_or(Value::Null),
            Err(_) => Value::Null,
        };
        let report = &status["data"]["clusterStatus"];
        let fresh = report["time"].as_f64().is_some_and(|t| t > since);
        let idle = report["loadMetricsReport"]["usage"]["CPU"][0].as_f64() == Some(0.0);
        let nodes = server.get("/api/v1/nodes").await;
        let clear = nodes["nodes"].as_array().is_some_and(|a| a.iter().all(|n| n["used_outside"].as_object().is_none_or(|o| o.is_empty())));
        if fresh && idle && clear {
            return true;
        }
        if Instant::now() >= deadline {
            eprintln!("the cluster did not settle within 2 minutes: {report}");
            return false;
        }
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
    let (wall, ids, never_ended) = berth_chunk(&server, n, slots).await;
    let peak = watch.stop();
    let records = kept_records(&server, &ids);
    let jobs = server.all_jobs().await;
    let failed = failures(&jobs, &never_ended);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let left_in_ray = ray_jobs(&ray_client(), url, "j-").await.len();
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
        never_ended: never_ended.len(),
    };
    (run, left_in_ray)
}

/// Berth's jobs that did not succeed, by reason (the first 60 characters), leaving out
/// those that never ended (cancelled by the bench when its wait gave up).
fn failures(jobs: &[Value], never_ended: &[String]) -> BTreeMap<String, usize> {
    let mut failed = BTreeMap::new();
    for j in jobs.iter().filter(|j| j["state"] != "succeeded" && !never_ended.iter().any(|id| j["id"] == json!(id))) {
        *failed.entry(j["reason"].as_str().unwrap_or("?").chars().take(60).collect::<String>()).or_insert(0) += 1;
    }
    failed
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
async fn paced(url: &str, n: usize, cpus: f64, slots: usize, rounds: usize) -> (Run, Run, f64, f64, usize) {
    let http = ray_client();
    let prefix = format!("paced-{}-", std::process::id());
    let server = Server::start("ray", &berth_args(url).iter().map(String::as_str).collect::<Vec<_>>()).await;
    server.apply(&one_queue(cpus as u32)).await;
    let (mut direct_s, mut berth_s, mut direct_peak, mut berth_peak) = (0.0, 0.0, 0.0f64, 0.0f64);
    let mut per_job = [(0.0, 0.0); 2];
    let chunk = n / rounds;
    let mut berth_chunks: Vec<Vec<String>> = Vec::new();
    let (mut direct_open, mut berth_open, mut unsettled) = (0, Vec::new(), 0);
    for r in 0..rounds {
        for side in [r % 2, 1 - r % 2] {
            if !settle(&http, url, &server).await {
                unsettled += 1;
            }
            let watch = PeakWatch::start();
            let before = cpu_counters();
            if side == 0 {
                let (s, open) = direct_chunk(&http, url, &prefix, r * chunk..(r + 1) * chunk, slots).await;
                direct_s += s;
                direct_open += open;
                direct_peak = direct_peak.max(watch.stop());
            } else {
                let (s, ids, open) = berth_chunk(&server, chunk, slots).await;
                berth_s += s;
                berth_chunks.push(ids);
                berth_open.extend(open);
                berth_peak = berth_peak.max(watch.stop());
            }
            let after = cpu_counters();
            per_job[side].0 += (after.0 - before.0) / chunk as f64 / rounds as f64;
            per_job[side].1 += (after.1 - before.1) / chunk as f64 / rounds as f64;
        }
    }
    // The direct client's jobs it stopped at a deadline are left out (counted as never ended).
    // (Only the bench stops a direct job.)
    let direct_jobs: Vec<Value> =
        ray_jobs(&http, url, &prefix).await.into_iter().filter(|j| j["status"] != "STOPPED" && terminal(j["status"].as_str().unwrap_or(""))).collect();
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
        never_ended: direct_open,
    };
    let jobs = server.all_jobs().await;
    let failed = failures(&jobs, &berth_open);
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
        never_ended: berth_open.len(),
    };
    (direct, berth, cpu, rss, unsettled)
}

/// Runs them all and prints one table.
pub async fn run(url: &str) {
    // BERTH_BENCH_RAY_JOBS overrides the count (a multiple of 25 keeps the chunks whole).
    let n = std::env::var("BERTH_BENCH_RAY_JOBS").ok().and_then(|v| v.parse::<usize>().ok()).filter(|&n| n > 0).unwrap_or(if quick() { 20 } else { 200 });
    let rounds = if quick() { 2 } else { n.div_ceil(25).max(1) };
    let http = ray_client();
    let cpus = head_cpus(&http, url).await;
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
        let flooded = flood(url, n, slots, false).await;
        let wild = if ungated {
            restart_ray();
            Some(flood(url, n, slots, true).await)
        } else {
            None
        };
        restart_ray();
        (Some(flooded), wild, Some(berth_alone(url, n, cpus, slots).await))
    };
    restart_ray();
    let (direct, through, cpu, rss, unsettled) = paced(url, n, cpus, slots, rounds).await;

    println!("\n## Ray: {n} no-op jobs (1 CPU each) on a {cpus}-CPU head: Berth's overhead over Ray's Jobs API");
    println!(
        "{:<36} | {:>9} | {:>11} | {:>9} | {:>9} | {:>10} | {:>13} | {:>17} | failed",
        "runner", "in flight", "time", "succeeded", "slot gap", "job in Ray", "head PSS peak", "CPU/job: all, dash"
    );
    println!("{}", "-".repeat(150));
    for r in [flooded.as_ref(), wild.as_ref(), alone.as_ref().map(|a| &a.0), Some(&direct), Some(&through)].into_iter().flatten() {
        let never = (r.never_ended > 0).then(|| format!("{} never ended (stopped at the wait's deadline)", r.never_ended));
        let failed: Vec<String> = never.into_iter().chain(r.failed.iter().map(|(why, k)| format!("{k} {why}"))).collect();
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
    let rows = [flooded.as_ref(), wild.as_ref(), alone.as_ref().map(|a| &a.0), Some(&direct), Some(&through)];
    let open: usize = rows.iter().flatten().map(|r| r.never_ended).sum();
    if open > 0 {
        println!(
            "NOT every job ended: {open} were still open when their wait's deadline passed (60 s + 5 s per round of {slots} jobs, at most 300 s), \
             were stopped, and count neither as succeeded nor failed; a time then runs to the last job that ended"
        );
    }
    if unsettled > 0 {
        println!("{unsettled} of {} taking-turns chunks started before Ray's report showed the cluster idle (it did not within 2 minutes)", 2 * rounds);
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
