//! Ray's own client through Berth's Ray API vs straight to the head: `n` no-op jobs (1 CPU
//! each, all with one working directory, which the client uploads once) submitted with
//! `JobSubmissionClient.submit_job`, what `ray job submit` calls, from one Python process
//! (a CLI process per job would measure Python's start-up, not the two servers).
//!
//! * **direct**: the client keeps as many jobs in flight as Berth does here (1-CPU jobs on the
//!   node's CPUs) and polls each every 100 ms, submitting the next as one ends;
//! * **berth**: the client submits every job to Berth at once (Berth holds them in its queue,
//!   quota = the node's CPUs, and keeps that many on Ray) and polls the list every 100 ms;
//!   Berth as it starts by default, finding ends by its status poll;
//! * **berth+report**: the same through a Berth with `--ray-callback-url`, whose runs report
//!   their own end.
//!
//! The three take turns in two rounds of `n/2` jobs each (the order reverses), each round
//! starting once Ray's report shows the cluster idle; times are sums over the rounds, from
//! just before the first submission to the last end (Ray's `end_time` for direct, Berth's
//! `finished_at` for Berth). Berth's added latency per job is what it adds around Ray's own
//! handling: from its admission to Ray receiving the run, plus from Ray's end of the run to
//! Berth marking the job ended; and the submit call's time, both ways.
//!
//! Both runners reach the head through a [`Tap`], a pass-through that notes when each job
//! submission reached it and when Ray answered. That splits "admission to Ray receiving the
//! run" into Berth's part (admission to its submission leaving Berth) and Ray's handling of
//! the submission, which a direct client waits for just the same and is shown both ways.

use std::sync::{Arc, Mutex};

use super::*;

/// The driver: `MODE URL N CAP WORKDIR TAG DEADLINE_S`; prints one JSON object.
const DRIVER: &str = r#"
import json, sys, time
from ray.job_submission import JobSubmissionClient
mode, url, n, cap, wd, tag, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6], float(sys.argv[7])
c = JobSubmissionClient(url)
final = ("SUCCEEDED", "FAILED", "STOPPED")
submit_ms, status = [], {}
def submit(i):
    s = time.time()
    sid = c.submit_job(entrypoint="true", submission_id=f"{tag}-{i}", runtime_env={"working_dir": wd}, entrypoint_num_cpus=1)
    submit_ms.append((time.time() - s) * 1000)
    return sid
t0 = time.time() * 1000
deadline = time.time() + limit
if mode == "direct":
    todo, open_ = list(range(n)), set()
    while (todo or open_) and time.time() < deadline:
        while todo and len(open_) < cap:
            open_.add(submit(todo.pop(0)))
        time.sleep(0.1)
        for sid in list(open_):
            st = c.get_job_status(sid).value
            if st in final:
                status[sid] = st
                open_.discard(sid)
else:
    ids = {submit(i) for i in range(n)}
    while len(status) < n and time.time() < deadline:
        time.sleep(0.1)
        for j in c.list_jobs():
            if j.submission_id in ids and j.status.value in final:
                status[j.submission_id] = j.status.value
never = [f"{tag}-{i}" for i in range(n) if f"{tag}-{i}" not in status]
for sid in never:
    try:
        c.stop_job(sid)
    except Exception:
        pass
print(json.dumps({"t0": t0, "submit_ms": submit_ms, "status": status, "never": never}))
"#;

/// What one round of one runner gave.
#[derive(Default)]
struct Round {
    /// From the first submission to the last end, in seconds.
    wall: f64,
    succeeded: usize,
    never: usize,
    submit_ms: Vec<f64>,
    /// Berth's added latency per job (Berth rounds only), ms: from its admission to Ray
    /// receiving the run, and from Ray's end of it to Berth's.
    dispatch_ms: Vec<f64>,
    completion_ms: Vec<f64>,
    /// Berth rounds: from its admission to its submission reaching the tap, ms.
    handoff_ms: Vec<f64>,
    /// Ray's handling of each submission (the tap's request to its answer), ms.
    ray_submit_ms: Vec<f64>,
}

/// A pass-through in front of the Ray head: every request goes on unchanged, and for each
/// job submission (`POST /api/jobs/`) it notes the submission id, when the request arrived
/// and when Ray's answer did (ms since the epoch).
struct Tap {
    url: String,
    seen: Arc<Mutex<HashMap<String, (f64, f64)>>>,
}

impl Tap {
    async fn start(ray: &str) -> Tap {
        use axum::body::{Body, Bytes};
        use axum::http::{HeaderMap, Method, StatusCode, Uri};
        let seen = Arc::new(Mutex::new(HashMap::new()));
        let (ray, http, log) = (ray.trim_end_matches('/').to_string(), ray_client(), seen.clone());
        let pass = move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let (ray, http, log) = (ray.clone(), http.clone(), log.clone());
            async move {
                let arrived = now_ms() as f64;
                let path = uri.path_and_query().map_or("/", |p| p.as_str());
                let submission = (method == Method::POST && uri.path() == "/api/jobs/")
                    .then(|| serde_json::from_slice::<Value>(&body).ok())
                    .flatten()
                    .and_then(|v| v["submission_id"].as_str().map(String::from));
                let mut req = http.request(method, format!("{ray}{path}")).body(body);
                for (name, value) in &headers {
                    if !matches!(name.as_str(), "host" | "content-length" | "connection" | "transfer-encoding") {
                        req = req.header(name, value);
                    }
                }
                let Ok(resp) = req.send().await else { return (StatusCode::BAD_GATEWAY, HeaderMap::new(), Body::empty()) };
                let status = resp.status();
                let mut back = HeaderMap::new();
                if let Some(kind) = resp.headers().get("content-type") {
                    back.insert("content-type", kind.clone());
                }
                let bytes = resp.bytes().await.unwrap_or_default();
                if let Some(id) = submission {
                    log.lock().unwrap().insert(id, (arrived, now_ms() as f64));
                }
                (status, back, Body::from(bytes))
            }
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new().fallback(pass);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Tap { url, seen }
    }

    /// When the submission `id` reached the tap and when Ray answered it, ms.
    fn submission(&self, id: &str) -> Option<(f64, f64)> {
        self.seen.lock().unwrap().get(id).copied()
    }
}

/// The Ray venv `.ci/ray.sh` installs.
fn python() -> PathBuf {
    let venv = std::env::var_os("BERTH_RAY_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/berth-ray-venv"));
    venv.join("bin/python")
}

/// Runs the driver; its JSON. Killed (the round failing) past `limit` plus a minute.
async fn drive(mode: &str, url: &str, n: usize, cap: usize, workdir: &Path, tag: &str, limit: Duration) -> Value {
    let mut cmd = tokio::process::Command::new(python());
    cmd.arg("-c").arg(DRIVER).args([mode, url, &n.to_string(), &cap.to_string(), &workdir.display().to_string(), tag, &limit.as_secs().to_string()]);
    cmd.env("RAY_USAGE_STATS_ENABLED", "0").env_remove("RAY_ADDRESS").kill_on_drop(true);
    let out = tokio::time::timeout(limit + Duration::from_secs(60), cmd.output()).await.expect("the driver ended within its limit").expect("the Ray venv's python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().rev().find(|l| l.starts_with('{'));
    serde_json::from_str(last.unwrap_or_else(|| panic!("driver {mode} printed no result: {}", String::from_utf8_lossy(&out.stderr)))).unwrap()
}

fn ms(v: &Value) -> Option<f64> {
    time(v).map(|t| t.timestamp_micros() as f64 / 1000.0)
}

async fn direct_round(http: &reqwest::Client, tap: &Tap, n: usize, cap: usize, workdir: &Path, tag: &str) -> Round {
    let url = &tap.url;
    let got = drive("direct", url, n, cap, workdir, tag, deadline_for(n, cap)).await;
    let mut round = round_of(&got);
    let mut last_end = 0.0f64;
    for i in 0..n {
        if let Some((arrived, answered)) = tap.submission(&format!("{tag}-{i}")) {
            round.ray_submit_ms.push(answered - arrived);
        }
        if let Ok(r) = http.get(format!("{url}/api/jobs/{tag}-{i}")).send().await {
            let job: Value = r.json().await.unwrap_or(Value::Null);
            last_end = last_end.max(job["end_time"].as_f64().unwrap_or(0.0));
        }
    }
    round.wall = (last_end - got["t0"].as_f64().unwrap_or(0.0)) / 1000.0;
    round
}

async fn berth_round(http: &reqwest::Client, tap: &Tap, server: &Server, n: usize, cap: usize, workdir: &Path, tag: &str) -> Round {
    let url = &tap.url;
    let got = drive("berth", &server.url, n, cap, workdir, tag, deadline_for(n, cap)).await;
    let mut round = round_of(&got);
    let mut last_end = 0.0f64;
    for i in 0..n {
        let Ok(r) = server.http.get(format!("{}/api/v1/jobs/{tag}-{i}", server.url)).send().await else { continue };
        let job: Value = r.json().await.unwrap_or(Value::Null);
        let Some(finished) = ms(&job["finished_at"]) else { continue };
        last_end = last_end.max(finished);
        let Some(admitted) = ms(&job["admitted_at"]) else { continue };
        let run = format!("{}-r1", job["id"].as_str().unwrap_or_default());
        let Ok(r) = http.get(format!("{url}/api/jobs/{run}")).send().await else { continue };
        let on_ray: Value = r.json().await.unwrap_or(Value::Null);
        let (Some(received), Some(ended)) = (on_ray["start_time"].as_f64(), on_ray["end_time"].as_f64()) else { continue };
        let Some((arrived, answered)) = tap.submission(&run) else { continue };
        round.dispatch_ms.push((received - admitted).max(0.0));
        round.completion_ms.push(finished - ended);
        round.handoff_ms.push((arrived - admitted).max(0.0));
        round.ray_submit_ms.push(answered - arrived);
    }
    round.wall = (last_end - got["t0"].as_f64().unwrap_or(0.0)) / 1000.0;
    round
}

fn round_of(got: &Value) -> Round {
    Round {
        succeeded: got["status"].as_object().map_or(0, |s| s.values().filter(|v| *v == "SUCCEEDED").count()),
        never: got["never"].as_array().map_or(0, Vec::len),
        submit_ms: got["submit_ms"].as_array().map(|a| a.iter().filter_map(Value::as_f64).collect()).unwrap_or_default(),
        ..Round::default()
    }
}

/// Each job's latency before the run plus its `completion` (Ray's end to Berth's). A report
/// can reach Berth before Ray records the end: such a job adds nothing there.
fn plus_end(before: &[f64], completion: &[f64]) -> Vec<f64> {
    before.iter().zip(completion).map(|(b, c)| b + c.max(0.0)).collect()
}

fn sorted(mut xs: Vec<f64>) -> Vec<f64> {
    xs.sort_by(f64::total_cmp);
    xs
}

pub async fn run(url: &str) {
    let n = std::env::var("BERTH_BENCH_RAY_JOBS").ok().and_then(|v| v.parse::<usize>().ok()).filter(|&n| n >= 2).unwrap_or(if quick() { 10 } else { 100 });
    let http = ray_client();
    let cpus = super::head_cpus(&http, url).await;
    let slots = (cpus as usize).clamp(1, BERTH_CAP);
    // The head as it is (not restarted: other suites may share it); each round waits for it
    // to be idle.
    // Two servers: Berth as it starts by default (ends found by its status poll) and with
    // `--ray-callback-url` (runs report their end).
    let tap = Tap::start(url).await;
    let start = |name: &'static str, report: bool| {
        let mut args = berth_args(&tap.url);
        args.push("--ray-keep-finished".into()); // so Ray's records of Berth's runs stay readable
        if report {
            args.extend(["--ray-callback-url".into(), "{url}".into()]);
        }
        async move {
            let server = Server::start(name, &args.iter().map(String::as_str).collect::<Vec<_>>()).await;
            server.apply(&one_queue(cpus as u32)).await;
            server
        }
    };
    let servers = [start("ray-api", false).await, start("ray-api-report", true).await];
    let workdir = servers[0].dir.join("workdir");
    std::fs::create_dir_all(&workdir).unwrap();
    std::fs::write(workdir.join("input.txt"), "the same working directory for every job\n").unwrap();

    let pid = std::process::id();
    let mut rounds: [Vec<Round>; 3] = Default::default();
    let mut unsettled = 0;
    for round in 0..2 {
        let k = n / 2 + if round == 0 { n % 2 } else { 0 };
        for who in if round == 0 { [0, 1, 2] } else { [2, 1, 0] } {
            unsettled += usize::from(!settle(&http, url, &servers[0]).await);
            let tag = format!("fd{pid}-{who}-{round}");
            let got = match who {
                0 => direct_round(&http, &tap, k, slots, &workdir, &tag).await,
                _ => berth_round(&http, &tap, &servers[who - 1], k, slots, &workdir, &tag).await,
            };
            rounds[who].push(got);
        }
    }

    let sum = |rs: &[Round], f: fn(&Round) -> f64| rs.iter().map(f).sum::<f64>();
    let all = |rs: &[Round], f: fn(&Round) -> Vec<f64>| sorted(rs.iter().flat_map(f).collect());
    println!("\n## Ray's job API: {n} no-op jobs with a working dir, Ray's JobSubmissionClient straight to the {cpus}-CPU head vs through Berth ({slots} in flight)");
    println!(
        "{:<14} | {:>9} | {:>9} | {:>12} | {:>12} | {:>14} | {:>14} | never ended",
        "runner", "time", "succeeded", "submit p50", "submit p99", "Ray's part p50", "Ray's part p99"
    );
    println!("{}", "-".repeat(114));
    let names = ["direct", "berth", "berth+report"];
    for (name, rs) in names.iter().zip(&rounds) {
        let (submit, ray) = (all(rs, |r| r.submit_ms.clone()), all(rs, |r| r.ray_submit_ms.clone()));
        println!(
            "{name:<14} | {:>7.1} s | {:>3} / {n:<3} | {:>9.1} ms | {:>9.1} ms | {:>11.1} ms | {:>11.1} ms | {}",
            sum(rs, |r| r.wall),
            rs.iter().map(|r| r.succeeded).sum::<usize>(),
            percentile(&submit, 0.5),
            percentile(&submit, 0.99),
            percentile(&ray, 0.5),
            percentile(&ray, 0.99),
            rs.iter().map(|r| r.never).sum::<usize>(),
        );
    }
    let met = |yes: bool| if yes { "met" } else { "NOT met" };
    println!("time: sum of 2 rounds taking turns, first submission to last end (Ray's end_time direct, Berth's finished_at through Berth)");
    println!("submit: the client's submit call (through Berth: Berth's answer); Ray's part: Ray's handling of each job submission it received, from the client direct, from Berth through Berth");
    println!("berth: ends found by Berth's status poll (the default); berth+report: `--ray-callback-url`, each run reports its end to Berth (see docs/operations.md)");
    for (name, rs) in names.iter().zip(&rounds).skip(1) {
        let ratio = sum(rs, |r| r.wall) / sum(&rounds[0], |r| r.wall);
        let added = all(rs, |r| plus_end(&r.handoff_ms, &r.completion_ms));
        let (p50, p99) = (percentile(&added, 0.5), percentile(&added, 0.99));
        let with_ray = all(rs, |r| plus_end(&r.dispatch_ms, &r.completion_ms));
        let (handoff, dispatch, completion) =
            (all(rs, |r| r.handoff_ms.clone()), all(rs, |r| r.dispatch_ms.clone()), all(rs, |r| r.completion_ms.clone()));
        println!("{name}: time ratio to direct {ratio:.2}x (target <= 1.1x: {})", met(ratio <= 1.1));
        println!(
            "  added latency per job (admission to the run leaving Berth for Ray, plus Ray's end to Berth's; {} jobs): p50 {p50:.0} ms, p99 {p99:.0} ms (target p99 <= 50 ms: {})",
            added.len(),
            met(p99 <= 50.0)
        );
        println!(
            "  admission to the run leaving Berth: p50 {:.0} ms, p99 {:.0} ms; Ray's end to Berth's: p50 {:.0} ms, p99 {:.0} ms (negative: Berth had the run's report first)",
            percentile(&handoff, 0.5),
            percentile(&handoff, 0.99),
            percentile(&completion, 0.5),
            percentile(&completion, 0.99)
        );
        println!(
            "  with Ray's handling of the submission counted too (admission to Ray's start_time): p50 {:.0} ms, p99 {:.0} ms; in all: p50 {:.0} ms, p99 {:.0} ms",
            percentile(&dispatch, 0.5),
            percentile(&dispatch, 0.99),
            percentile(&with_ray, 0.5),
            percentile(&with_ray, 0.99)
        );
    }
    if unsettled > 0 {
        println!("{unsettled} of 6 rounds started before Ray's report showed the cluster idle (it did not within 2 minutes)");
    }
}
