//! Jobs on a real Ray head: the real `berth` binary with `--no-local --ray ray=URL`, the
//! single-node head `.ci/ray.sh start` runs (4 CPUs, 2 GPUs, 2 `accel`, label pool=test).
//! `make test` starts it and sets BERTH_TEST_RAY_URL; without it these tests fail, saying so.
//!
//! The tests share the one cluster, so they take turns (a lock), and each checks what Ray
//! itself saw through its REST API.

mod common;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::berth::{eventually, Berth};
use common::{wait_until, Backend};
use serde_json::{json, Value};

const SECS: fn(u64) -> Duration = Duration::from_secs;

/// One test at a time on the shared cluster (each Berth counts its 4 CPUs as its own).
static CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn ray_url() -> String {
    std::env::var("BERTH_TEST_RAY_URL")
        .expect("BERTH_TEST_RAY_URL is not set: the Ray tests need a Ray head (`make test` starts one with .ci/ray.sh start)")
        .trim_end_matches('/')
        .to_string()
}

/// One flavor on the Ray node by its label, one queue `q` (cpu quota `cpu_quota`, e.g.
/// `, nominal_quota: 1`, others unlimited; `preemption` is `never` or `lower_priority`),
/// one catch-all rule.
fn config(selector_pool: &str, cpu_quota: &str, preemption: &str) -> String {
    format!(
        r#"
resource_flavors:
  - name: ray-test
    selector:
      - {{key: pool, operator: in, values: [{selector_pool}]}}
resource_queues:
  - name: q
    preemption: {{within_resource_queue: {preemption}}}
    resource_groups:
      - covered_resources: [cpu, gpu, accel, memory_gb]
        flavors: [{{name: ray-test, resources: [{{name: cpu{cpu_quota}}}]}}]
scheduling_rules:
  - resource_queue: q
    priority_policy: {{default: 0, min: 0, max: 100, on_violation: reject}}
"#
    )
}

/// A server whose only backend is the test cluster (through `url`, default the real one).
async fn berth_on(url: &str, cpu_quota: &str, preemption: &str) -> Berth {
    let b = Berth::start(Backend::Sqlite, &["--no-local", "--ray", &format!("ray={url}"), "--ray-poll-ms", "200"]).await;
    b.apply(&config("test", cpu_quota, preemption)).await;
    b
}

/// Ray's record of a submission, `None` when it does not know it.
async fn ray_job(submission: &str) -> Option<Value> {
    let r = reqwest::get(format!("{}/api/jobs/{submission}", ray_url())).await.unwrap();
    if r.status().as_u16() == 404 {
        return None;
    }
    r.json().await.ok()
}

/// Ray's record of a submission: from Ray, or once Berth has deleted the ended job from
/// Ray, the copy of Ray's record Berth kept (`data/runs/{submission}/ray.json`).
async fn ray_record(b: &Berth, submission: &str) -> Option<Value> {
    if let Some(job) = ray_job(submission).await {
        return Some(job);
    }
    let kept = std::fs::read_to_string(b.dir.join("data/runs").join(submission).join("ray.json")).ok()?;
    serde_json::from_str(&kept).ok()
}

/// Polls Ray (or Berth's copy of an ended job, see [`ray_record`]) until the submission has
/// one of `statuses`; its record.
async fn wait_ray(b: &Berth, submission: &str, statuses: &[&str], timeout: Duration) -> Value {
    let deadline = Instant::now() + timeout;
    loop {
        let job = ray_record(b, submission).await;
        if let Some(j) = &job {
            if statuses.contains(&j["status"].as_str().unwrap_or("")) {
                return j.clone();
            }
        }
        assert!(Instant::now() < deadline, "Ray job {submission} did not reach {statuses:?} in {timeout:?}: {job:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls until the job's reason contains `needle`; the job.
async fn wait_reason(b: &Berth, id: &str, needle: &str, timeout: Duration) -> Value {
    let deadline = Instant::now() + timeout;
    loop {
        let job = b.job(id).await;
        if job["reason"].as_str().unwrap_or_default().contains(needle) {
            return job;
        }
        assert!(Instant::now() < deadline, "no `{needle}` in the reason within {timeout:?}: {job:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether a process whose command line contains `marker` runs on this host.
fn running(marker: &str) -> bool {
    let out = std::process::Command::new("pgrep").arg("-f").arg(marker).output().unwrap();
    !out.stdout.is_empty()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_runs_on_ray_and_its_logs_and_failures_show_in_berth() {
    let _turn = CLUSTER.lock().await;
    let b = berth_on(&ray_url(), "", "lower_priority").await;
    // Ray's node, with Berth's names for its resources.
    let (_, nodes) = b.get("/api/v1/nodes").await;
    let node = nodes["nodes"].as_array().and_then(|n| n.first()).cloned().unwrap_or_else(|| panic!("no Ray node: {nodes}"));
    assert_eq!(node["backend"], "ray", "{node}");
    assert!(node["id"].as_str().unwrap().starts_with("ray:"), "{node}");

    let id = b
        .submit(json!({
            "entrypoint": "echo hello-from-ray; echo gpus=$CUDA_VISIBLE_DEVICES; echo on-stderr >&2",
            "resources": {"cpu": 1, "gpu": 1, "memory_gb": 0.1, "custom": {"accel": 1}},
            "runtime_env": {"env_vars": {"GREETING": "hi"}},
        }))
        .await;
    let done = b.wait_state(&id, &["succeeded"], SECS(60)).await;
    assert_eq!(done["exit_code"], 0, "{done:#}");
    let (status, logs) = b.get_text(&format!("/api/v1/jobs/{id}/logs")).await;
    assert_eq!(status, 200, "{logs}");
    assert!(logs.contains("hello-from-ray") && logs.contains("gpus=0") && logs.contains("on-stderr"), "{logs}");
    // What Ray received: Berth's id as submission id, string metadata, the label selector.
    let on_ray = ray_record(&b, &format!("{id}-r1")).await.expect("Ray knew the run");
    assert_eq!(on_ray["status"], "SUCCEEDED");
    assert_eq!(on_ray["metadata"]["berth_job_id"], json!(id), "{on_ray:#}");
    assert_eq!(on_ray["metadata"]["queue"], "q");
    assert_eq!(on_ray["metadata"]["flavor"], "ray-test");
    assert_eq!(on_ray["runtime_env"]["env_vars"]["GREETING"], "hi");

    // A failing job shows Ray's error type and message.
    let id = b.submit(json!({"entrypoint": "exit 3", "resources": {"cpu": 1}})).await;
    let failed = b.wait_state(&id, &["failed"], SECS(60)).await;
    let reason = failed["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("JOB_ENTRYPOINT_COMMAND_ERROR"), "{failed:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flavor_matching_no_ray_node_keeps_the_job_pending_with_that_reason() {
    let _turn = CLUSTER.lock().await;
    let b = berth_on(&ray_url(), ", nominal_quota: 0", "lower_priority").await;
    // Held by a zero quota while its flavor still matches the node...
    let id = b.submit(json!({"entrypoint": "echo moved", "resources": {"cpu": 1}})).await;
    b.wait_state(&id, &["pending"], SECS(5)).await;
    // ...then the flavor selects `pool=nowhere`, which no Ray node has.
    b.apply(&config("nowhere", "", "lower_priority")).await;
    // The reason comes from a cycle that decided the job under the new config.
    let job = wait_reason(&b, &id, "no node matches", SECS(10)).await;
    assert_eq!(job["state"], "pending");
    assert!(job["reason"].as_str().unwrap().contains("nowhere"), "{job:#}");
    // Not admitted (an admission is written before its run is sent to Ray), not on Ray; and
    // at the end, its only admission is under the version that selects the node again.
    let admitted = b.events(&format!("job={id}&kind=admitted")).await;
    assert!(admitted.is_empty(), "admitted while its flavor matched no node: {admitted:#?}");
    assert!(ray_job(&format!("{id}-r1")).await.is_none(), "Ray must not have received it");
    // A new job for that flavor is refused at once.
    let (status, body) = b.post("/api/v1/jobs", &json!({"entrypoint": "true", "resources": {"cpu": 1}})).await;
    assert_eq!(status, 422, "{body}");
    // Selecting the node's label again lets it run.
    let back = b.apply(&config("test", "", "lower_priority")).await;
    let done = b.wait_state(&id, &["succeeded"], SECS(60)).await;
    assert_eq!(done["runs"], 1, "{done:#}");
    let admitted = b.events(&format!("job={id}&kind=admitted")).await;
    assert_eq!(admitted.len(), 1, "{admitted:#?}");
    assert_eq!(admitted[0]["config_version"], back, "admitted only once the node was selected again: {admitted:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quota_and_priority_decide_the_order_ray_receives_jobs() {
    let _turn = CLUSTER.lock().await;
    let b = berth_on(&ray_url(), ", nominal_quota: 1", "never").await;
    let job = |p: i64, cmd: &str| json!({"entrypoint": cmd, "priority": p, "resources": {"cpu": 1}});
    let first = b.submit(job(0, "sleep 2")).await;
    b.wait_state(&first, &["running"], SECS(30)).await;
    // Submitted low to high, while the quota of 1 CPU is held.
    let mut ids = Vec::new();
    for p in [1, 3, 2, 5] {
        ids.push((p, b.submit(job(p, "true")).await));
    }
    let mut all: Vec<String> = ids.iter().map(|(_, id)| id.clone()).collect();
    all.push(first.clone());
    let ended = b.wait_all_ended(&all, SECS(120)).await;
    assert!(ended.iter().all(|j| j["state"] == "succeeded"), "{ended:#?}");
    // Ray received them by priority: 5, 3, 2, 1, each after the one before ended (quota 1).
    // (Ray's `start_time` is when it received the submission.)
    let mut starts = Vec::new();
    for (p, id) in &ids {
        let r = ray_record(&b, &format!("{id}-r1")).await.expect("on Ray");
        starts.push((r["start_time"].as_i64().unwrap(), r["end_time"].as_i64().unwrap(), *p));
    }
    starts.sort();
    let order: Vec<i64> = starts.iter().map(|s| s.2).collect();
    assert_eq!(order, [5, 3, 2, 1], "Ray start order by priority: {starts:?}");
    for w in starts.windows(2) {
        assert!(w[1].0 >= w[0].1, "two jobs of a 1-CPU quota overlapped on Ray: {starts:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn preemption_stops_the_ray_job_and_requeues_it() {
    let _turn = CLUSTER.lock().await;
    let b = berth_on(&ray_url(), ", nominal_quota: 1", "lower_priority").await;
    // The first run sleeps (a marker to find its process), a later one ends at once.
    let low = b
        .submit(json!({"entrypoint": "if [ \"$BERTH_RUN\" = 1 ]; then sleep 61.4242; fi; echo low-done", "priority": 1, "resources": {"cpu": 1}}))
        .await;
    b.wait_state(&low, &["running"], SECS(30)).await;
    wait_ray(&b, &format!("{low}-r1"), &["RUNNING"], SECS(30)).await;
    assert!(eventually(SECS(10), || running("sleep 61.4242")).await, "the low job's process runs");
    let high = b.submit(json!({"entrypoint": "echo high-done", "priority": 9, "resources": {"cpu": 1}})).await;
    // The victim's Ray job is stopped, its process tree gone; it comes back as run 2.
    wait_ray(&b, &format!("{low}-r1"), &["STOPPED"], SECS(30)).await;
    assert!(eventually(SECS(10), || !running("sleep 61.4242")).await, "the preempted process tree is gone");
    b.wait_state(&high, &["succeeded"], SECS(60)).await;
    let low_done = b.wait_state(&low, &["succeeded"], SECS(60)).await;
    assert_eq!(low_done["runs"], 2, "{low_done:#}");
    let preempted = b.events("kind=preempted").await;
    assert_eq!(preempted.len(), 1, "{preempted:#?}");
    assert_eq!(preempted[0]["job_id"], json!(low));
    wait_ray(&b, &format!("{low}-r2"), &["SUCCEEDED"], SECS(10)).await;
}

/// `--ray-callback-url`: each run reports its own end, so Berth ends the job as soon as its
/// command exits, with the command's exit code, although its status poll of Ray is slowed
/// here to once in ten minutes; Ray records the same ends. A report without the run's own
/// token changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn runs_report_their_own_end_without_waiting_for_the_poll() {
    let _turn = CLUSTER.lock().await;
    let flags = ["--no-local", "--ray", &format!("ray={}", ray_url()), "--ray-poll-ms", "600000", "--ray-callback-url", "{url}"];
    let b = Berth::start(Backend::Sqlite, &flags).await;
    b.apply(&config("test", "", "lower_priority")).await;

    let long = b.submit(json!({"entrypoint": "sleep 64.4242", "resources": {"cpu": 1}})).await;
    b.wait_state(&long, &["running"], SECS(60)).await;
    wait_ray(&b, &format!("{long}-r1"), &["RUNNING"], SECS(60)).await;
    let report = |run: String, token: Option<&str>, body: &str| {
        let mut req = reqwest::Client::new().post(format!("{}/api/v1/runs/{run}/exit", b.url)).body(body.to_string());
        if let Some(t) = token {
            req = req.header("x-berth-exit-token", t);
        }
        async move {
            let r = req.send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let (status, body) = report(format!("{long}-r1"), Some("forged"), "0").await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("not the token"), "{body}");
    assert_eq!(report(format!("{long}-r1"), None, "0").await.0, 403);
    let (status, body) = report("j-none-r1".into(), Some("x"), "0").await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = report(format!("{long}-r1"), Some("forged"), "done").await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("not an exit status"), "{body}");
    assert_eq!(b.job(&long).await["state"], "running", "forged reports left the job alone");

    let ok = b.submit(json!({"entrypoint": "echo reported-end", "resources": {"cpu": 1}})).await;
    let failing = b.submit(json!({"entrypoint": "echo failing; exit 3", "resources": {"cpu": 1}})).await;
    let done = b.wait_state(&ok, &["succeeded"], SECS(60)).await;
    assert_eq!(done["exit_code"], 0, "{done:#}");
    let failed = b.wait_state(&failing, &["failed"], SECS(60)).await;
    assert_eq!(failed["exit_code"], 3, "{failed:#}");
    let (_, logs) = b.get_text(&format!("/api/v1/jobs/{ok}/logs")).await;
    assert!(logs.contains("reported-end"), "{logs}");
    wait_ray(&b, &format!("{ok}-r1"), &["SUCCEEDED"], SECS(30)).await;
    let on_ray = wait_ray(&b, &format!("{failing}-r1"), &["FAILED"], SECS(30)).await;
    assert_eq!(on_ray["driver_exit_code"], 3, "{on_ray:#}");

    let (status, _) = b.post(&format!("/api/v1/jobs/{long}/cancel"), &json!({})).await;
    assert_eq!(status, 200);
    wait_ray(&b, &format!("{long}-r1"), &["STOPPED"], SECS(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_timeout_stops_the_ray_job() {
    let _turn = CLUSTER.lock().await;
    let b = berth_on(&ray_url(), "", "lower_priority").await;
    let id = b.submit(json!({"entrypoint": "sleep 62.4242", "timeout_s": 2, "resources": {"cpu": 1}})).await;
    let job = b.wait_state(&id, &["timed_out"], SECS(60)).await;
    assert!(job["reason"].as_str().unwrap_or_default().contains("timeout"), "{job:#}");
    wait_ray(&b, &format!("{id}-r1"), &["STOPPED"], SECS(30)).await;
    assert!(eventually(SECS(10), || !running("sleep 62.4242")).await, "the timed-out process tree is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn while_ray_is_unreachable_jobs_wait_and_run_when_it_is_back() {
    let _turn = CLUSTER.lock().await;
    let proxy = Proxy::start(&ray_url()).await;
    let b = berth_on(&proxy.url(), "", "lower_priority").await;
    let (_, nodes) = b.get("/api/v1/nodes").await;
    assert_eq!(nodes["nodes"].as_array().map(Vec::len), Some(1), "{nodes}");
    proxy.down();
    // A node refresh fails before the job comes (Berth keeps the last known node).
    assert!(
        eventually(SECS(15), || b.log().contains("Ray node list unavailable")).await,
        "no failed node refresh logged within 15 s; log:\n{}",
        b.log()
    );
    let id = b.submit(json!({"entrypoint": "echo after-the-outage", "resources": {"cpu": 1}, "max_retries": 0})).await;
    let job = wait_reason(&b, &id, "unavailable", SECS(15)).await;
    assert_eq!(job["state"], "pending", "{job:#}");
    assert!(job["reason"].as_str().unwrap().contains("retrying in"), "{job:#}");
    assert_eq!(job["retries"], 0, "waiting for a backend is not a retry: {job:#}");
    // Three attempts refused while down: still pending, still no retry counted...
    let requeued = wait_until("three start attempts refused while Ray is down", SECS(30), async || {
        let requeued = b.events(&format!("job={id}&kind=requeued")).await;
        if requeued.len() >= 3 {
            Ok(requeued)
        } else {
            Err(format!("{requeued:#?}"))
        }
    })
    .await;
    let job = b.job(&id).await;
    assert_eq!((job["state"].as_str(), job["retries"].as_i64()), (Some("pending"), Some(0)), "{job:#}");
    // ...and each attempt came only once the backoff announced by the one before had passed
    // (doubling from --retry-backoff-ms 200): backoff, not a busy loop.
    let at = |e: &Value| chrono::DateTime::parse_from_rfc3339(e["at"].as_str().unwrap()).unwrap();
    let announced = |e: &Value| -> f64 {
        let msg = e["message"].as_str().unwrap();
        msg.rsplit_once("retrying in ").and_then(|(_, s)| s.trim_end_matches(" s").parse().ok()).unwrap_or_else(|| panic!("no backoff in {msg}"))
    };
    for w in requeued.windows(2) {
        let gap = (at(&w[1]) - at(&w[0])).num_milliseconds() as f64 / 1000.0;
        assert!(gap + 0.05 >= announced(&w[0]), "an attempt {gap} s after one that announced {} s: {requeued:#?}", announced(&w[0]));
    }
    assert!(announced(&requeued[2]) > announced(&requeued[0]), "the backoff grows: {requeued:#?}");
    proxy.up().await;
    let done = b.wait_state(&id, &["succeeded"], SECS(60)).await;
    assert_eq!(done["runs"], 1, "{done:#}");
}

/// A TCP forwarder to Ray that can be taken down (connections cut, port refused) and up.
struct Proxy {
    port: u16,
    target: String,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Proxy {
    async fn start(ray: &str) -> Proxy {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let target = ray.trim_start_matches("http://").to_string();
        let p = Proxy { port, target, task: Mutex::new(None) };
        p.up().await;
        p
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    async fn up(&self) {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port)).await.unwrap();
        let target = self.target.clone();
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else { return };
                let target = target.clone();
                conns.spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        *self.task.lock().unwrap() = Some(task);
    }

    /// Aborting the task drops the listener and every connection (the JoinSet aborts them).
    fn down(&self) {
        if let Some(t) = self.task.lock().unwrap().take() {
            t.abort();
        }
    }
}

/// Runs `.ci/ray.sh ARG` (the script `make test` uses); panics unless it succeeds.
fn ray_sh(arg: &str) {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/ray.sh");
    let out = std::process::Command::new(&script).arg(arg).output().unwrap();
    assert!(out.status.success(), "{} {arg} failed: {}", script.display(), String::from_utf8_lossy(&out.stderr));
}

/// Starts Ray again if a test stopped it and did not get to start it (a failed assertion).
struct RestartRay(bool);

impl Drop for RestartRay {
    fn drop(&mut self) {
        if self.0 {
            ray_sh("start");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ray_stopped_mid_run_and_restarted_loses_no_job() {
    let _turn = CLUSTER.lock().await;
    let mut b = berth_on(&ray_url(), "", "lower_priority").await;
    // Run 1 sleeps through the outage; Ray forgets it; run 2 finishes.
    let a = b
        .submit(json!({"entrypoint": "if [ \"$BERTH_RUN\" = 1 ]; then sleep 63.4242; fi; echo a-done", "max_retries": 1, "resources": {"cpu": 1}}))
        .await;
    b.wait_state(&a, &["running"], SECS(30)).await;
    wait_ray(&b, &format!("{a}-r1"), &["RUNNING"], SECS(30)).await;

    let mut restart = RestartRay(true);
    ray_sh("stop");
    // Submitted while Ray is down: it waits.
    let c = b.submit(json!({"entrypoint": "echo c-done", "resources": {"cpu": 1}})).await;
    // Berth itself restarts during the outage too: it adopts `a` without being able to ask Ray.
    b.kill9();
    b.spawn().await;
    // Not lost and not failed. (Pending, or admitted/running when the server died between
    // deciding and writing back the refused start: Berth cannot ask Ray until it is back,
    // so it keeps watching the run.)
    let c_now = b.job(&c).await;
    assert!(["pending", "admitted", "running"].contains(&c_now["state"].as_str().unwrap()), "{c_now:#}");
    ray_sh("start");
    restart.0 = false;

    let c_done = b.wait_state(&c, &["succeeded"], SECS(90)).await;
    assert_eq!(c_done["retries"], 0, "{c_done:#}");
    let a_done = b.wait_state(&a, &["succeeded"], SECS(90)).await;
    assert_eq!(a_done["runs"], 2, "{a_done:#}");
    let retried = b.events(&format!("job={a}&kind=retried")).await;
    assert!(retried.iter().any(|e| e["message"].as_str().unwrap_or_default().contains("no longer knows")), "{retried:#?}");
    let (_, logs) = b.get_text(&format!("/api/v1/jobs/{a}/logs")).await;
    assert!(logs.contains("a-done"), "{logs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_in_flight_cap_holds_jobs_back_from_ray() {
    let _turn = CLUSTER.lock().await;
    // Unlimited quota and 4 Ray CPUs, but at most 1 run in flight on the cluster.
    let b = Berth::start(Backend::Sqlite, &["--no-local", "--ray", &format!("ray={}", ray_url()), "--ray-poll-ms", "200", "--ray-max-in-flight", "1"]).await;
    b.apply(&config("test", "", "never")).await;
    // The second job must wait for the cap, not for CPUs an earlier test's jobs still hold.
    wait_quiet(&b).await;
    let ids = vec![
        b.submit(json!({"entrypoint": "sleep 1", "resources": {"cpu": 1}})).await,
        b.submit(json!({"entrypoint": "sleep 1", "resources": {"cpu": 1}})).await,
    ];
    let second = wait_reason(&b, &ids[1], "in flight", SECS(30)).await;
    assert_eq!(second["state"], "pending", "{second:#}");
    assert!(second["reason"].as_str().unwrap_or_default().contains("cluster ray: 1 of 1 in flight"), "{second:#}");
    let ended = b.wait_all_ended(&ids, SECS(120)).await;
    assert!(ended.iter().all(|j| j["state"] == "succeeded"), "{ended:#?}");
    // Ray never held both: the second was submitted after the first ended.
    let first = ray_record(&b, &format!("{}-r1", ids[0])).await.expect("on Ray");
    let next = ray_record(&b, &format!("{}-r1", ids[1])).await.expect("on Ray");
    assert!(next["start_time"].as_i64().unwrap() >= first["end_time"].as_i64().unwrap(), "{first:#} {next:#}");
}

/// A job submitted straight to Ray's Jobs API, not through Berth; stopped when dropped.
struct OutsideJob {
    id: String,
}

impl OutsideJob {
    async fn submit(entrypoint: &str, cpus: u32) -> OutsideJob {
        let id = format!("outside-{}-{}", std::process::id(), chrono::Utc::now().timestamp_millis());
        let body = json!({"entrypoint": entrypoint, "submission_id": id, "entrypoint_num_cpus": cpus});
        let r = reqwest::Client::new().post(format!("{}/api/jobs/", ray_url())).json(&body).send().await.unwrap();
        assert!(r.status().is_success(), "submitting straight to Ray: {}", r.text().await.unwrap_or_default());
        OutsideJob { id }
    }

    async fn stop(&self) {
        let r = reqwest::Client::new().post(format!("{}/api/jobs/{}/stop", ray_url(), self.id)).send().await.unwrap();
        assert!(r.status().is_success(), "stopping {}: {}", self.id, r.status());
    }
}

impl Drop for OutsideJob {
    fn drop(&mut self) {
        // Also on a failed assertion, so the next test has the cluster to itself.
        let _ = std::process::Command::new("curl").args(["-s", "-o", "/dev/null", "-X", "POST"]).arg(format!("{}/api/jobs/{}/stop", ray_url(), self.id)).status();
    }
}

/// The Ray node as Berth's `/api/v1/nodes` shows it.
async fn ray_node(b: &Berth) -> Value {
    let (_, nodes) = b.get("/api/v1/nodes").await;
    nodes["nodes"].as_array().and_then(|n| n.first()).cloned().unwrap_or_else(|| panic!("no Ray node: {nodes}"))
}

/// Polls the node view until `pred` holds; the node.
async fn wait_node(b: &Berth, what: &str, timeout: Duration, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + timeout;
    loop {
        let node = ray_node(b).await;
        if pred(&node) {
            return node;
        }
        assert!(Instant::now() < deadline, "the node never showed {what} within {timeout:?}: {node:#}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits for a quiet cluster: an earlier test's stopped jobs may still be ending, and the
/// CPUs they hold would change why a job waits.
async fn wait_quiet(b: &Berth) {
    let cpu = |v: &Value| v["cpu"].as_f64().unwrap_or(0.0);
    wait_node(b, "Ray reporting no CPU in use", SECS(60), |n| n["reported"]["used"].is_object() && cpu(&n["reported"]["used"]) == 0.0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ray_capacity_used_by_jobs_berth_did_not_submit_is_not_admitted_onto() {
    let _turn = CLUSTER.lock().await;
    let b = berth_on(&ray_url(), "", "never").await;
    let cpu = |v: &Value| v["cpu"].as_f64().unwrap_or(0.0);
    wait_quiet(&b).await;

    // Another user takes 3 of the node's 4 CPUs, straight through Ray's API.
    let outside = OutsideJob::submit("sleep 300", 3).await;
    wait_ray(&b, &outside.id, &["RUNNING"], SECS(60)).await;
    // Berth sees it once Ray's usage report has it (Ray refreshes it about every 5 s).
    let node = wait_node(&b, "3 CPUs used outside Berth", SECS(30), |n| cpu(&n["used_outside"]) == 3.0).await;
    assert_eq!(cpu(&node["free"]), 1.0, "{node:#}");
    let node_id = node["id"].as_str().unwrap().to_string();

    // A job needing 2 CPUs waits, and says why, naming the node and its capacity.
    let big = b.submit(json!({"entrypoint": "echo big-done", "resources": {"cpu": 2}})).await;
    let job = wait_reason(&b, &big, "in use outside Berth", SECS(10)).await;
    assert_eq!(job["state"], "pending", "{job:#}");
    let reason = job["reason"].as_str().unwrap();
    assert!(reason.contains(&node_id) && reason.contains("capacity cpu 4, of which 3 in use outside Berth"), "{reason}");
    assert!(ray_job(&format!("{big}-r1")).await.is_none(), "Ray must not have received it");

    // A 1-CPU job of Berth's fits beside it; once Ray's report includes it, it is still
    // counted once (as Berth's), never also as outside work. (Right after it starts, the
    // report before it may count less outside work: the rule errs that way, see ray/usage.rs.)
    let small = b.submit(json!({"entrypoint": "sleep 20", "resources": {"cpu": 1}})).await;
    wait_ray(&b, &format!("{small}-r1"), &["RUNNING"], SECS(60)).await;
    let most = std::sync::atomic::AtomicU64::new(0);
    let node = wait_node(&b, "Ray reporting all 4 CPUs in use, 3 of them outside Berth", SECS(30), |n| {
        most.fetch_max(cpu(&n["used_outside"]) as u64, std::sync::atomic::Ordering::Relaxed);
        cpu(&n["reported"]["used"]) == 4.0 && cpu(&n["used_outside"]) == 3.0
    })
    .await;
    assert_eq!(most.into_inner(), 3, "Berth's own job was counted as outside work: {node:#}");
    assert_eq!(cpu(&node["free"]), 0.0, "{node:#}");
    assert_eq!(b.job(&big).await["state"], "pending");

    // The outside job ends: the big job is admitted beside the small one, after it.
    outside.stop().await;
    let stopped = wait_ray(&b, &outside.id, &["STOPPED"], SECS(30)).await;
    let done = b.wait_state(&big, &["succeeded"], SECS(90)).await;
    assert_eq!(done["runs"], 1, "{done:#}");
    let on_ray = ray_record(&b, &format!("{big}-r1")).await.expect("on Ray");
    assert!(on_ray["start_time"].as_i64() >= stopped["end_time"].as_i64(), "{on_ray:#} {stopped:#}");
    b.wait_state(&small, &["succeeded"], SECS(60)).await;
}

/// Polls Ray until it no longer knows the submission.
async fn wait_gone(submission: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while let Some(job) = ray_job(submission).await {
        assert!(Instant::now() < deadline, "Ray still has {submission} after {timeout:?}: {job:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Berth's log of a job (what `berth jobs logs` and the dashboard show).
async fn logs_of(b: &Berth, id: &str) -> String {
    let (status, logs) = b.get_text(&format!("/api/v1/jobs/{id}/logs")).await;
    assert_eq!(status, 200, "logs of {id}: {logs}");
    logs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ended_runs_leave_ray_and_their_logs_stay_readable_in_berth_across_restarts() {
    let _turn = CLUSTER.lock().await;
    let mut b = berth_on(&ray_url(), "", "never").await;
    let ok = b.submit(json!({"entrypoint": "echo kept-ok-line", "resources": {"cpu": 1}})).await;
    let bad = b.submit(json!({"entrypoint": "echo kept-bad-line; exit 4", "resources": {"cpu": 1}})).await;
    b.wait_state(&ok, &["succeeded"], SECS(60)).await;
    let failed = b.wait_state(&bad, &["failed"], SECS(60)).await;
    assert!(failed["reason"].as_str().unwrap_or_default().contains("JOB_ENTRYPOINT_COMMAND_ERROR"), "{failed:#}");
    // Ray forgets them once Berth has its copy; Berth still shows their logs.
    wait_gone(&format!("{ok}-r1"), SECS(30)).await;
    wait_gone(&format!("{bad}-r1"), SECS(30)).await;
    assert!(logs_of(&b, &ok).await.contains("kept-ok-line"));
    assert!(logs_of(&b, &bad).await.contains("kept-bad-line"));
    let (status, tail) = b.get_text(&format!("/api/v1/jobs/{ok}/logs?tail=1")).await;
    assert_eq!((status, tail.trim_end().lines().count()), (200, 1), "{tail}");

    // A run that ends while the server is down is adopted as ended, then leaves Ray too.
    let late = b.submit(json!({"entrypoint": "sleep 3; echo kept-late-line", "resources": {"cpu": 1}})).await;
    wait_ray(&b, &format!("{late}-r1"), &["RUNNING"], SECS(60)).await;
    b.kill9();
    let ended = wait_ray(&b, &format!("{late}-r1"), &["SUCCEEDED"], SECS(60)).await;
    assert!(ray_job(&format!("{late}-r1")).await.is_some(), "nothing deletes while Berth is down: {ended:#}");
    b.spawn().await;
    let done = b.wait_state(&late, &["succeeded"], SECS(60)).await;
    assert_eq!(done["runs"], 1, "{done:#}");
    wait_gone(&format!("{late}-r1"), SECS(30)).await;

    // Another restart: the states and logs are still there, from Berth alone.
    b.kill9();
    b.spawn().await;
    for (id, state, line) in [(&ok, "succeeded", "kept-ok-line"), (&bad, "failed", "kept-bad-line"), (&late, "succeeded", "kept-late-line")] {
        assert_eq!(b.job(id).await["state"], state, "{id}");
        assert!(logs_of(&b, id).await.contains(line), "{id}");
    }

    // Gone for good: Ray's job monitor wrote none of them back (it does, as FAILED, for a
    // job deleted before the monitor is done with it).
    for id in [&ok, &bad, &late] {
        let back = ray_job(&format!("{id}-r1")).await;
        assert!(back.is_none(), "Ray has {id}-r1 again: {back:#?}");
    }

    // `--ray-keep-finished` leaves ended jobs in Ray.
    let keep = Berth::start(Backend::Sqlite, &["--no-local", "--ray", &format!("ray={}", ray_url()), "--ray-poll-ms", "200", "--ray-keep-finished"]).await;
    keep.apply(&config("test", "", "never")).await;
    let kept = keep.submit(json!({"entrypoint": "echo stays-in-ray", "resources": {"cpu": 1}})).await;
    keep.wait_state(&kept, &["succeeded"], SECS(60)).await;
    // Proof that a deletion would have come by now: a run of `b` (which deletes) that ended
    // seconds after `kept` has left Ray.
    let control = b.submit(json!({"entrypoint": "sleep 2; echo control", "resources": {"cpu": 1}})).await;
    b.wait_state(&control, &["succeeded"], SECS(60)).await;
    wait_gone(&format!("{control}-r1"), SECS(30)).await;
    let on_ray = ray_job(&format!("{kept}-r1")).await.expect("kept in Ray");
    assert_eq!(on_ray["status"], "SUCCEEDED");
    assert!(logs_of(&keep, &kept).await.contains("stays-in-ray"));
}
