//! Ray's job API on Berth, driven by Ray's own clients: the real `ray` CLI and
//! `ray.job_submission.JobSubmissionClient` from the Ray venv (`.ci/ray.sh install`, which
//! `make test` runs), against the real `berth` binary with API tokens on, through the local
//! backend (SQLite and PostgreSQL) and through the real Ray head behind Berth
//! (`BERTH_TEST_RAY_URL`, as in ray.rs).
//!
//! What is checked is what a user notices: the script reads a file of its uploaded
//! directory and the job succeeds; the CLI follows the log to the end and exits as it does
//! against Ray; a job over quota waits in Berth (Ray never sees it) and starts once room
//! frees; a preempted job reads as stopped-then-requeued; a bad token gets a clear 401.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::berth::Berth;
use common::Backend;
use serde_json::{json, Value};

const SECS: fn(u64) -> Duration = Duration::from_secs;

/// The first admin token of every server here.
const TOKEN: &str = "berth_rayapi_admin_token_for_tests_01";

/// One test at a time on the shared Ray head.
static CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The Ray venv `.ci/ray.sh` installs (`BERTH_RAY_VENV` overrides it, as there).
fn venv() -> PathBuf {
    let dir = std::env::var_os("BERTH_RAY_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/berth-ray-venv"));
    assert!(dir.join("bin/ray").is_file(), "no Ray venv at {}: run `.ci/ray.sh install` (`make test` does)", dir.display());
    dir
}

fn headers(token: &str) -> String {
    json!({ "Authorization": format!("Bearer {token}") }).to_string()
}

/// What a client process did.
struct Ran {
    code: i32,
    /// stdout and stderr.
    out: String,
}

/// Runs `program args` with `env`, killed if it runs past `timeout` (then the test fails,
/// showing what it printed).
async fn run(program: PathBuf, args: &[&str], env: &[(&str, String)], timeout: Duration) -> Ran {
    let mut cmd = tokio::process::Command::new(&program);
    cmd.args(args).env_remove("RAY_ADDRESS").env("RAY_USAGE_STATS_ENABLED", "0").kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let output = tokio::time::timeout(timeout, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{} {args:?} did not exit within {timeout:?}", program.display()))
        .unwrap();
    let out = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    Ran { code: output.status.code().unwrap_or(-1), out }
}

/// The `ray` CLI: `ray job ARGS --address <berth>`, with `token` in `RAY_JOB_HEADERS`.
async fn ray_job(b: &Berth, token: Option<&str>, args: &[&str], timeout: Duration) -> Ran {
    let mut all = vec!["job", args[0], "--address", &b.url];
    all.extend(&args[1..]);
    let env: Vec<(&str, String)> = token.map(|t| ("RAY_JOB_HEADERS", headers(t))).into_iter().collect();
    run(venv().join("bin/ray"), &all, &env, timeout).await
}

/// Runs a Python script with Ray's client against `b` (`BERTH_URL`, `BERTH_TOKEN` in its
/// environment); the JSON object it prints last.
async fn python(b: &Berth, script: &str, timeout: Duration) -> Value {
    let env = [("BERTH_URL", b.url.clone()), ("BERTH_TOKEN", TOKEN.to_string())];
    let ran = run(venv().join("bin/python"), &["-c", &format!("{PY_PRELUDE}\n{script}")], &env, timeout).await;
    assert_eq!(ran.code, 0, "the client script failed:\n{}", ran.out);
    let last = ran.out.lines().rev().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("no JSON printed:\n{}", ran.out));
    serde_json::from_str(last).unwrap()
}

/// A client, and `wait(id, statuses, needle)`: polls `get_job_info` until the status is one
/// of `statuses` and the message contains `needle`, within 90 s.
const PY_PRELUDE: &str = r#"
import json, os, time
from ray.job_submission import JobSubmissionClient, JobStatus
c = JobSubmissionClient(os.environ["BERTH_URL"], headers={"Authorization": "Bearer " + os.environ["BERTH_TOKEN"]})
def wait(sid, statuses, needle="", timeout=90):
    deadline = time.monotonic() + timeout
    while True:
        info = c.get_job_info(sid)
        if str(info.status.value) in statuses and needle in (info.message or ""):
            return {"status": info.status.value, "message": info.message}
        if time.monotonic() > deadline:
            raise SystemExit(f"{sid} never reached {statuses} with {needle!r}: {info}")
        time.sleep(0.1)
"#;

/// A directory to upload: `data.txt`, and `script.py` which prints it.
fn workdir(b: &Berth) -> PathBuf {
    let dir = b.dir.join("project");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("data.txt"), "hello from the uploaded dir\n").unwrap();
    std::fs::write(dir.join("script.py"), "print('read:', open('data.txt').read().strip())\n").unwrap();
    dir
}

async fn cli_and_berth_see_the_same_jobs(backend: Backend) {
    let b = Berth::start_authenticated(backend, TOKEN, &["--local-cpus", "4"]).await;
    let dir = workdir(&b);
    let dir = dir.to_str().unwrap();

    // Submit with a working dir; the CLI uploads it, follows the log, exits 0.
    let ran = ray_job(&b, Some(TOKEN), &["submit", "--working-dir", dir, "--submission-id", "cli-ok", "--", "python", "script.py"], SECS(60)).await;
    assert_eq!(ran.code, 0, "{}", ran.out);
    assert!(ran.out.contains("read: hello from the uploaded dir"), "the script read its uploaded file:\n{}", ran.out);
    assert!(ran.out.contains("Job 'cli-ok' succeeded"), "{}", ran.out);

    // The same job in Berth: by its submission id, searchable, in the events.
    let job = b.job("cli-ok").await;
    assert_eq!((job["state"].as_str(), job["submission_id"].as_str(), job["name"].as_str()), (Some("succeeded"), Some("cli-ok"), Some("cli-ok")), "{job:#}");
    assert!(job["runtime_env"]["working_dir"].as_str().unwrap().starts_with("gcs://_ray_pkg_"), "{job:#}");
    let id = job["id"].as_str().unwrap().to_string();
    let (_, found) = b.get("/api/v1/jobs?q=cli-o").await;
    assert_eq!(found["jobs"][0]["id"], json!(id), "{found:#}");
    let submitted = b.events(&format!("job={id}&kind=submitted")).await;
    assert!(submitted[0]["message"].as_str().unwrap().contains("as submission cli-ok"), "{submitted:#?}");

    // status, logs, list.
    let status = ray_job(&b, Some(TOKEN), &["status", "cli-ok"], SECS(30)).await;
    assert!(status.code == 0 && status.out.contains("Job 'cli-ok' succeeded"), "{}", status.out);
    let logs = ray_job(&b, Some(TOKEN), &["logs", "cli-ok"], SECS(30)).await;
    assert!(logs.out.contains("read: hello from the uploaded dir"), "{}", logs.out);
    let list = ray_job(&b, Some(TOKEN), &["list"], SECS(30)).await;
    assert!(list.out.contains("submission_id='cli-ok'") && list.out.contains("status=<JobStatus.SUCCEEDED"), "{}", list.out);

    // A failing entrypoint: the CLI says so and exits 1, as against Ray.
    let ran = ray_job(&b, Some(TOKEN), &["submit", "--submission-id", "cli-fail", "--", "sh", "-c", "echo going down; exit 3"], SECS(60)).await;
    assert_eq!(ran.code, 1, "{}", ran.out);
    assert!(ran.out.contains("going down") && ran.out.contains("Job 'cli-fail' failed") && ran.out.contains("exit code 3"), "{}", ran.out);

    // Stop: STOPPED in Ray's terms, cancelled in Berth's.
    let ran = ray_job(&b, Some(TOKEN), &["submit", "--no-wait", "--submission-id", "cli-stop", "--", "sleep", "300"], SECS(30)).await;
    assert_eq!(ran.code, 0, "{}", ran.out);
    b.wait_state("cli-stop", &["running"], SECS(30)).await;
    let ran = ray_job(&b, Some(TOKEN), &["stop", "cli-stop"], SECS(60)).await;
    assert!(ran.code == 0 && ran.out.contains("Job 'cli-stop' was stopped"), "{}", ran.out);
    assert_eq!(b.job("cli-stop").await["state"], "cancelled");

    // Delete: gone from Ray's view, kept in Berth's history.
    let ran = ray_job(&b, Some(TOKEN), &["delete", "cli-fail"], SECS(30)).await;
    assert!(ran.code == 0 && ran.out.contains("deleted successfully"), "{}", ran.out);
    let ran = ray_job(&b, Some(TOKEN), &["status", "cli-fail"], SECS(30)).await;
    assert!(ran.code != 0 && ran.out.contains("404") && ran.out.contains("Job cli-fail does not exist"), "{}", ran.out);
    assert_eq!(b.job("cli-fail").await["state"], "failed");

    // A job submitted through Berth's own API reads back through Ray's.
    let native = b.submit(json!({"entrypoint": "echo native", "labels": {"team": "ml"}})).await;
    b.wait_state(&native, &["succeeded"], SECS(30)).await;
    let (status, ray_view) = b.get(&format!("/api/jobs/{native}")).await;
    assert_eq!(status, 200, "{ray_view}");
    assert_eq!((ray_view["status"].as_str(), ray_view["submission_id"].as_str()), (Some("SUCCEEDED"), Some(native.as_str())), "{ray_view:#}");
    assert_eq!(ray_view["metadata"]["team"], "ml");
    let logs = ray_job(&b, Some(TOKEN), &["logs", &native], SECS(30)).await;
    assert!(logs.out.contains("native"), "{}", logs.out);

    // Tokens: a bad one and none are told apart, with what to do.
    let ran = ray_job(&b, Some("not-a-token"), &["list"], SECS(30)).await;
    assert_ne!(ran.code, 0);
    assert!(ran.out.contains("Authentication required: Berth: the API token is not valid"), "{}", ran.out);
    assert!(ran.out.contains("RAY_JOB_HEADERS"), "{}", ran.out);
    let ran = ray_job(&b, None, &["list"], SECS(30)).await;
    assert!(ran.out.contains("Authentication required: Berth: no API token was sent"), "{}", ran.out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cli_and_berth_see_the_same_jobs_sqlite() {
    cli_and_berth_see_the_same_jobs(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cli_and_berth_see_the_same_jobs_postgres() {
    cli_and_berth_see_the_same_jobs(Backend::Postgres).await;
}

/// A local flavor, one queue with a quota of one CPU that preempts lower priorities; jobs
/// whose `team` metadata is `urgent` get priority 9, the others 1.
const ONE_CPU: &str = r#"
resource_flavors:
  - name: local
resource_queues:
  - name: q
    preemption: {within_resource_queue: lower_priority}
    resource_groups:
      - covered_resources: [cpu, gpu, memory_gb]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 1}]}]
scheduling_rules:
  - resource_queue: q
    selector: [{key: team, operator: in, values: [urgent]}]
    priority_policy: {default: 9}
  - resource_queue: q
    priority_policy: {default: 1}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_python_client_waits_in_berths_queue_and_reads_a_preemption_as_stopped_then_requeued() {
    let b = Berth::start_authenticated(Backend::Sqlite, TOKEN, &["--local-cpus", "4"]).await;
    b.apply(ONE_CPU).await;
    // The first run of `low` sleeps (until preempted); the next one ends at once.
    let seen = python(
        &b,
        r#"
low = c.submit_job(entrypoint='if [ "$BERTH_RUN" = 1 ]; then sleep 300; fi; echo low done', submission_id="low")
running = wait(low, {"RUNNING"})
nxt = c.submit_job(entrypoint="echo next ran", submission_id="next", metadata={"team": "ml"})
waiting = wait(nxt, {"PENDING"}, "waiting in Berth's queue q")
print(json.dumps({"running": running, "waiting": waiting}))
"#,
        SECS(120),
    )
    .await;
    assert!(seen["running"]["message"].as_str().unwrap().contains("running"), "{seen:#}");
    let waiting = seen["waiting"]["message"].as_str().unwrap();
    assert!(waiting.contains("Job has not started yet; waiting in Berth's queue q at position 1"), "{seen:#}");

    // Follow `low` with the CLI while an urgent job preempts it.
    let follow = tokio::spawn({
        let url = b.url.clone();
        async move {
            let env = [("RAY_JOB_HEADERS", headers(TOKEN))];
            run(venv().join("bin/ray"), &["job", "logs", "--follow", "low", "--address", &url], &env, SECS(180)).await
        }
    });
    let seen = python(
        &b,
        r#"
# It runs for a few seconds, so `low` visibly waits again in between.
urgent = c.submit_job(entrypoint="sleep 4; echo urgent done", submission_id="urgent", metadata={"team": "urgent"})
requeued = wait("low", {"PENDING"}, "STOPPED by Berth")
done = {sid: wait(sid, {"SUCCEEDED"}) for sid in ["urgent", "next", "low"]}
listed = [j.submission_id for j in c.list_jobs()]
# stop_job and delete_job, as Ray answers them.
c.submit_job(entrypoint="sleep 300", submission_id="to-stop")
wait("to-stop", {"RUNNING"})
stops = [c.stop_job("to-stop")]
stopped = wait("to-stop", {"STOPPED"})
stops.append(c.stop_job("to-stop"))
deleted = c.delete_job("to-stop")
try:
    c.get_job_info("to-stop")
    gone = "still there"
except RuntimeError as e:
    gone = str(e)
print(json.dumps({"requeued": requeued, "done": done, "logs": c.get_job_logs("low"), "listed": listed,
                  "stops": stops, "stopped": stopped, "deleted": deleted, "gone": gone}))
"#,
        SECS(180),
    )
    .await;
    let requeued = seen["requeued"]["message"].as_str().unwrap();
    assert!(requeued.starts_with("Run 1 was STOPPED by Berth (preempted by") && requeued.contains("and the job was requeued"), "{seen:#}");
    assert_eq!(seen["logs"], "low done\n", "{seen:#}");
    assert_eq!(seen["listed"], json!(["low", "next", "urgent"]), "{seen:#}");
    assert_eq!((&seen["stops"], &seen["stopped"]["status"], &seen["deleted"]), (&json!([true, false]), &json!("STOPPED"), &json!(true)), "{seen:#}");
    assert!(seen["gone"].as_str().unwrap().contains("404: Job to-stop does not exist"), "{seen:#}");
    let followed = follow.await.unwrap();
    assert_eq!(followed.code, 0, "{}", followed.out);
    assert!(followed.out.contains("Berth: run 2 of this job starts") && followed.out.contains("low done"), "{}", followed.out);
    assert!(followed.out.contains("Job 'low' succeeded"), "{}", followed.out);
    let low = b.job("low").await;
    assert_eq!(low["runs"], 2, "{low:#}");
    assert_eq!(b.events("kind=preempted").await.len(), 1);
}

/// A raw request to Ray's API on `b` with the admin token: status and text body.
async fn raw(b: &Berth, method: &str, path: &str, body: Option<Vec<u8>>) -> (u16, String) {
    let mut req = b.http.request(method.parse().unwrap(), format!("{}{path}", b.url));
    if let Some(body) = body {
        req = req.body(body);
    }
    let r = req.send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_gets_a_plain_answer_naming_the_field() {
    let b = Berth::start_authenticated(Backend::Sqlite, TOKEN, &["--local-cpus", "4", "--package-max-mb", "1"]).await;
    let post = |body: &str| raw(&b, "POST", "/api/jobs/", Some(body.as_bytes().to_vec()));
    for (body, status, start) in [
        (r#"{"entrypoint": "true", "entrypoint_num_cpus": "two"}"#, 400, "entrypoint_num_cpus: invalid type"),
        (r#"{"entrypoint": "true", "metadata": {"team": 3}}"#, 400, "metadata.team: invalid type"),
        (r#"{"entrypoint": "true", "colour": "red"}"#, 400, "colour: unknown field `colour`"),
        (r#"{"submission_id": "x"}"#, 400, "invalid request body: missing field `entrypoint`"),
        ("not json", 400, "invalid request body"),
        (r#"{"entrypoint": "true", "submission_id": "a/b"}"#, 422, "submission_id: only letters"),
        (r#"{"entrypoint": "true", "entrypoint_num_cpus": -1}"#, 422, "entrypoint_num_cpus: must be a number ≥ 0"),
        (r#"{"entrypoint": "true", "runtime_env": {"pip": ["requests"]}}"#, 422, "runtime_env.pip: the local backend cannot honour it"),
        (r#"{"entrypoint": "true", "runtime_env": {"working_dir": "gcs://_ray_pkg_0123.zip"}}"#, 422, "runtime_env.working_dir: package gcs://_ray_pkg_0123.zip is not stored"),
        (r#"{"entrypoint": "true", "entrypoint_label_selector": {"pool": "a"}}"#, 400, "entrypoint_label_selector: not taken by Berth"),
    ] {
        let (got, text) = post(body).await;
        assert_eq!(got, status, "{body}: {text}");
        assert!(text.starts_with(start), "{body}: {text}");
    }
    let (status, text) = post(r#"{"entrypoint": "sleep 300", "submission_id": "dup"}"#).await;
    assert_eq!(status, 200, "{text}");
    let (status, text) = post(r#"{"entrypoint": "true", "submission_id": "dup"}"#).await;
    assert_eq!((status, text.as_str()), (422, "submission_id: a job with submission_id `dup` already exists"));
    b.wait_state("dup", &["running"], SECS(30)).await;
    let (status, text) = raw(&b, "DELETE", "/api/jobs/dup", None).await;
    assert_eq!((status, text.as_str()), (422, "job dup is running, not finished: stop it first"));
    let (status, text) = raw(&b, "GET", "/api/jobs/nope", None).await;
    assert_eq!((status, text.as_str()), (404, "Job nope does not exist"));
    // Packages: the size limit, a body that is no zip, a name Ray would not make.
    let (status, text) = raw(&b, "PUT", "/api/packages/gcs/_ray_pkg_00ff.zip", Some(vec![0; 2 * 1024 * 1024])).await;
    assert_eq!(status, 413, "{text}");
    assert!(text.contains("more than the limit of 1048576 bytes"), "{text}");
    let (status, text) = raw(&b, "PUT", "/api/packages/gcs/_ray_pkg_00ff.zip", Some(b"not a zip".to_vec())).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("is not a usable zip archive: not a zip archive"), "{text}");
    let (status, text) = raw(&b, "PUT", "/api/packages/gcs/..%2Fescape.zip", Some(b"x".to_vec())).await;
    assert_eq!(status, 400, "{text}");
    let (status, _) = raw(&b, "GET", "/api/packages/gcs/_ray_pkg_00ff.zip", None).await;
    assert_eq!(status, 404);
}

/// The Ray head behind Berth: one flavor on its `pool=test` node, a queue of one CPU.
const ON_RAY: &str = r#"
resource_flavors:
  - name: ray-test
    selector:
      - {key: pool, operator: in, values: [test]}
resource_queues:
  - name: q
    resource_groups:
      - covered_resources: [cpu, gpu, accel, memory_gb]
        flavors: [{name: ray-test, resources: [{name: cpu, nominal_quota: 1}]}]
scheduling_rules:
  - resource_queue: q
"#;

fn ray_url() -> String {
    std::env::var("BERTH_TEST_RAY_URL")
        .expect("BERTH_TEST_RAY_URL is not set: the Ray tests need a Ray head (`make test` starts one with .ci/ray.sh start)")
        .trim_end_matches('/')
        .to_string()
}

/// Ray's own record of a run, `None` while it does not know it.
async fn on_ray(submission: &str) -> Option<Value> {
    let r = reqwest::get(format!("{}/api/jobs/{submission}", ray_url())).await.unwrap();
    if r.status().as_u16() == 404 {
        return None;
    }
    r.json().await.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn through_the_ray_head_the_package_reaches_ray_and_quota_holds_jobs_in_berth() {
    let _turn = CLUSTER.lock().await;
    let b = Berth::start_authenticated(Backend::Sqlite, TOKEN, &["--no-local", "--ray", &format!("ray={}", ray_url()), "--ray-poll-ms", "200", "--ray-keep-finished"]).await;
    b.apply(ON_RAY).await;
    let dir = workdir(&b);
    let ran = ray_job(&b, Some(TOKEN), &["submit", "--working-dir", dir.to_str().unwrap(), "--submission-id", "on-ray", "--", "python", "script.py"], SECS(120)).await;
    assert_eq!(ran.code, 0, "{}", ran.out);
    assert!(ran.out.contains("read: hello from the uploaded dir") && ran.out.contains("Job 'on-ray' succeeded"), "{}", ran.out);
    // Ray ran Berth's run of it with the package Berth uploaded there.
    let job = b.job("on-ray").await;
    let uri = job["runtime_env"]["working_dir"].as_str().unwrap().to_string();
    let run = on_ray(&format!("{}-r1", job["id"].as_str().unwrap())).await.expect("Ray has the run");
    assert_eq!((run["status"].as_str(), run["runtime_env"]["working_dir"].as_str()), (Some("SUCCEEDED"), Some(uri.as_str())), "{run:#}");

    // Quota of one CPU: the second job waits in Berth, and Ray never hears of it until the
    // first is stopped.
    let ran = ray_job(&b, Some(TOKEN), &["submit", "--no-wait", "--submission-id", "hold", "--", "sleep", "300"], SECS(30)).await;
    assert_eq!(ran.code, 0, "{}", ran.out);
    b.wait_state("hold", &["running"], SECS(60)).await;
    let ran = ray_job(&b, Some(TOKEN), &["submit", "--no-wait", "--submission-id", "after", "--", "echo", "after ran"], SECS(30)).await;
    assert_eq!(ran.code, 0, "{}", ran.out);
    let deadline = Instant::now() + SECS(30);
    let status = loop {
        let (_, view) = b.get("/api/jobs/after").await;
        if view["message"].as_str().unwrap_or_default().contains("waiting in Berth's queue q") {
            break view;
        }
        assert!(Instant::now() < deadline, "no waiting message: {view:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status["status"], "PENDING", "{status:#}");
    let after_id = b.job("after").await["id"].as_str().unwrap().to_string();
    assert!(on_ray(&format!("{after_id}-r1")).await.is_none(), "Ray must not have the job while Berth holds it");
    let ran = ray_job(&b, Some(TOKEN), &["stop", "hold"], SECS(60)).await;
    assert!(ran.code == 0 && ran.out.contains("Job 'hold' was stopped"), "{}", ran.out);
    let ran = ray_job(&b, Some(TOKEN), &["logs", "--follow", "after"], SECS(120)).await;
    assert!(ran.code == 0 && ran.out.contains("after ran") && ran.out.contains("Job 'after' succeeded"), "{}", ran.out);
    assert!(on_ray(&format!("{after_id}-r1")).await.is_some());
}
