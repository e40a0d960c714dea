//! Jobs on real Slurm clusters: the real `berth` binary with `--no-local --slurm
//! hpc=SLURM_CONF`, the single-node clusters `.ci/slurm.sh start` runs (`berthtest`, node
//! n1: 16 CPUs, 64000 MB, 4 GPUs `gpu:a100`, features a100,spot, partitions cpu and gpu;
//! `berthcpu`: 8 CPUs, no GPUs, feature spot). `make test` starts them and sets
//! BERTH_TEST_SLURM to their slurm.conf paths (`GPU_CONF:CPU_CONF`); without it each test
//! says it is skipped and why, and checks nothing.
//!
//! The tests share the one cluster, so they take turns (a lock), start from an empty Slurm
//! queue, and check what Slurm itself saw with its own commands.

mod common;

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use common::berth::{eventually, Berth};
use common::{wait_until, Backend};
use serde_json::json;

const SECS: fn(u64) -> Duration = Duration::from_secs;

/// One test at a time on the shared cluster (each Berth counts its 16 CPUs as its own).
static CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The slurm.conf paths of BERTH_TEST_SLURM (`GPU_CONF:CPU_CONF`), or `None` after saying
/// why the test is skipped.
fn slurm_confs(test: &str) -> Option<Vec<String>> {
    match std::env::var("BERTH_TEST_SLURM") {
        Ok(confs) if !confs.trim().is_empty() => Some(confs.trim().split(':').map(str::to_string).collect()),
        _ => {
            eprintln!("SKIPPED {test}: BERTH_TEST_SLURM is not set; it names the slurm.conf of the test clusters (`BERTH_TEST_SLURM=$(.ci/slurm.sh start)`)");
            None
        }
    }
}

/// The GPU test cluster's slurm.conf, or `None` after saying why the test is skipped.
fn slurm_conf(test: &str) -> Option<String> {
    slurm_confs(test).map(|c| c[0].clone())
}

/// A Slurm command against the test cluster; its standard output (panics on failure).
fn slurm(conf: &str, program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).env("SLURM_CONF", conf).env_remove("SLURM_JWT").output().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Puts the node back in service if a failed test left it drained, cancels everything in
/// the test cluster's queue and waits until nothing holds the node.
async fn empty_queue(conf: &str) {
    // Refused (and harmless) when the node is in service.
    let _ = Command::new("scontrol").args(["update", "nodename=n1", "state=resume"]).env("SLURM_CONF", conf).env_remove("SLURM_JWT").output();
    let ids = slurm(conf, "squeue", &["-h", "-o", "%i"]);
    let ids: Vec<&str> = ids.split_whitespace().collect();
    if !ids.is_empty() {
        slurm(conf, "scancel", &ids);
    }
    wait_until("an empty Slurm queue", SECS(30), async || {
        let left = slurm(conf, "squeue", &["-h", "-t", "PD,R,CG,CF,S", "-o", "%i %T"]);
        if left.trim().is_empty() { Ok(()) } else { Err(left) }
    })
    .await;
}

/// A flavor on the Slurm node by a feature label, one queue `q` (cpu quota `cpu_quota`,
/// e.g. `, nominal_quota: 1`), one catch-all rule.
fn config(feature: &str, cpu_quota: &str, preemption: &str) -> String {
    format!(
        r#"
resource_flavors:
  - name: slurm-{feature}
    selector:
      - {{key: feature.{feature}, operator: in, values: ["true"]}}
resource_queues:
  - name: q
    preemption: {{within_resource_queue: {preemption}}}
    resource_groups:
      - covered_resources: [cpu, gpu, memory_gb]
        flavors: [{{name: slurm-{feature}, resources: [{{name: cpu{cpu_quota}}}]}}]
scheduling_rules:
  - resource_queue: q
    priority_policy: {{default: 0, min: 0, max: 100, on_violation: reject}}
"#
    )
}

/// A server whose only backend is the test cluster, as `hpc`.
async fn berth_on(conf: &str, cpu_quota: &str, preemption: &str, extra: &[&str]) -> Berth {
    let cluster = format!("hpc={conf}");
    let mut args = vec!["--no-local", "--slurm", &cluster, "--slurm-poll-ms", "100"];
    args.extend_from_slice(extra);
    let b = Berth::start(Backend::Sqlite, &args).await;
    b.apply(&config("a100", cpu_quota, preemption)).await;
    b
}

/// The Slurm job id of a job's `run`, once Berth has submitted it.
fn slurm_id(b: &Berth, job: &str, run: u32) -> Option<String> {
    let path = b.dir.join("data/slurm/hpc").join(format!("{job}-r{run}")).join("slurm_job_id");
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// Slurm's record of a job (`scontrol show job -o` as key → value), `None` once purged.
fn slurm_record(conf: &str, id: &str) -> Option<HashMap<String, String>> {
    let out = Command::new("scontrol").args(["show", "job", id, "-o"]).env("SLURM_CONF", conf).env_remove("SLURM_JWT").output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut kv = HashMap::new();
    for word in text.split_whitespace() {
        if let Some((k, v)) = word.split_once('=') {
            kv.entry(k.to_string()).or_insert_with(|| v.to_string());
        }
    }
    Some(kv)
}

/// Polls until Slurm's record of job `id` has a `JobState` among `states`; the record.
async fn wait_slurm(conf: &str, id: &str, states: &[&str], timeout: Duration) -> HashMap<String, String> {
    wait_until(&format!("Slurm job {id} in {states:?}"), timeout, async || match slurm_record(conf, id) {
        Some(r) if states.contains(&r.get("JobState").map(String::as_str).unwrap_or("")) => Ok(r),
        other => Err(format!("{:?}", other.and_then(|r| r.get("JobState").cloned()))),
    })
    .await
}

/// Polls until Berth has submitted run `run` of `job` to Slurm; its Slurm id.
async fn wait_submitted(b: &Berth, job: &str, run: u32) -> String {
    wait_until(&format!("run {run} of {job} in Slurm"), SECS(30), async || slurm_id(b, job, run).ok_or_else(|| "no job id file yet".to_string())).await
}

/// Whether a process whose command line contains `marker` runs on this host.
fn running(marker: &str) -> bool {
    let out = Command::new("pgrep").arg("-f").arg(marker).output().unwrap();
    !out.stdout.is_empty()
}

/// A number no other test run uses, for process markers (`sleep 4242<n>`).
fn marker() -> u64 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos() as u64;
    424_200_000 + (u64::from(std::process::id()) * 7919 + nanos) % 99_999
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_runs_on_slurm_with_its_request_logs_and_exit_code() {
    let Some(conf) = slurm_conf("a_job_runs_on_slurm_with_its_request_logs_and_exit_code") else { return };
    let _turn = CLUSTER.lock().await;
    empty_queue(&conf).await;
    let b = berth_on(&conf, "", "lower_priority", &[]).await;
    // The Slurm node, with Berth's names for its resources and its partitions and features
    // as labels.
    let (_, nodes) = b.get("/api/v1/nodes").await;
    let node = nodes["nodes"].as_array().and_then(|n| n.first()).cloned().unwrap_or_else(|| panic!("no Slurm node: {nodes}"));
    assert_eq!(node["id"], "hpc:n1", "{node}");
    assert_eq!(node["backend"], "hpc", "{node}");
    assert_eq!(node["capacity"], json!({"cpu": 16.0, "gpu": 4.0, "memory_gb": 62.5}), "{node}");
    for (k, v) in [("backend", "slurm"), ("partition.cpu", "true"), ("partition.gpu", "true"), ("feature.a100", "true"), ("feature.spot", "true"), ("gpu.type", "a100")] {
        assert_eq!(node["labels"][k], v, "label {k}: {node}");
    }
    assert_eq!(node["flavors"], json!(["slurm-a100"]), "{node}");

    let id = b
        .submit(json!({
            "entrypoint": "echo hello-from-slurm $GREETING; echo gpus=$CUDA_VISIBLE_DEVICES; echo on-stderr >&2",
            "resources": {"cpu": 2, "gpu": 1, "memory_gb": 0.5},
            "runtime_env": {"env_vars": {"GREETING": "it's me"}},
        }))
        .await;
    let done = b.wait_state(&id, &["succeeded"], SECS(60)).await;
    assert_eq!(done["exit_code"], 0, "{done:#}");
    assert_eq!(done["node"], "hpc:n1", "{done:#}");
    let (status, out) = b.get_text(&format!("/api/v1/jobs/{id}/logs")).await;
    assert_eq!(status, 200, "{out}");
    assert!(out.contains("hello-from-slurm it's me") && out.contains("gpus=0"), "{out}");
    let (_, err) = b.get_text(&format!("/api/v1/jobs/{id}/logs?stream=stderr")).await;
    assert!(err.contains("on-stderr") && !out.contains("on-stderr"), "stderr: {err}");
    // What Slurm received: Berth's run as the job name, the request as options, the flavor's
    // feature as a constraint.
    let sid = slurm_id(&b, &id, 1).expect("a Slurm job id");
    let rec = slurm_record(&conf, &sid).expect("Slurm still knows the job");
    assert_eq!(rec["JobName"], format!("{id}-r1"));
    assert_eq!(rec["JobState"], "COMPLETED");
    assert_eq!(rec["NumCPUs"], "2");
    assert_eq!(rec["TresPerNode"], "gres:gpu:1");
    assert_eq!(rec["Features"], "a100");
    assert_eq!(rec["Requeue"], "0", "Berth, not Slurm, decides whether a run runs again");
    assert!(rec["TRES"].contains("mem=512M"), "{rec:?}");
    assert_eq!(rec["Comment"], format!("berth-job:{id}"));

    // A failing job carries its exit code; one killed by a signal says which.
    let id = b.submit(json!({"entrypoint": "echo failing; exit 3", "resources": {"cpu": 1}})).await;
    let failed = b.wait_state(&id, &["failed"], SECS(60)).await;
    assert_eq!(failed["exit_code"], 3, "{failed:#}");
    assert_eq!(failed["reason"], "exited with code 3", "{failed:#}");
    let id = b.submit(json!({"entrypoint": "kill -9 $$", "resources": {"cpu": 1}})).await;
    let killed = b.wait_state(&id, &["failed"], SECS(60)).await;
    assert_eq!(killed["reason"], "killed by signal 9", "{killed:#}");
    // What a batch job cannot honour is refused at submit, naming the key.
    let (status, refused) = b.post("/api/v1/jobs", &json!({"entrypoint": "true", "resources": {"cpu": 1}, "runtime_env": {"pip": ["requests"]}})).await;
    assert_eq!(status, 422, "{refused}");
    assert!(refused.to_string().contains("runtime_env.pip: the Slurm backend cannot honour it"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_stops_the_whole_process_tree_of_a_slurm_job() {
    let Some(conf) = slurm_conf("cancel_stops_the_whole_process_tree_of_a_slurm_job") else { return };
    let _turn = CLUSTER.lock().await;
    empty_queue(&conf).await;
    let b = berth_on(&conf, "", "lower_priority", &[]).await;
    let m = marker();
    // A child, a grandchild in its own session re-parented to init (what proctrack/linuxproc
    // alone misses), and the script itself.
    let cmd = format!("sleep {m}1 & setsid sh -c 'sleep {m}2 &'; sleep {m}3");
    let id = b.submit(json!({"entrypoint": cmd, "resources": {"cpu": 1}})).await;
    b.wait_state(&id, &["running"], SECS(30)).await;
    let sid = wait_submitted(&b, &id, 1).await;
    wait_slurm(&conf, &sid, &["RUNNING"], SECS(30)).await;
    for p in 1..=3 {
        assert!(eventually(SECS(30), || running(&format!("sleep {m}{p}"))).await, "process {p} of the tree never started");
    }
    let (status, body) = b.post(&format!("/api/v1/jobs/{id}/cancel"), &json!({})).await;
    assert_eq!(status, 200, "{body}");
    let rec = wait_slurm(&conf, &sid, &["CANCELLED"], SECS(30)).await;
    assert_eq!(rec["JobName"], format!("{id}-r1"));
    for p in 1..=3 {
        assert!(eventually(SECS(30), || !running(&format!("sleep {m}{p}"))).await, "process {p} of the tree outlived the cancel");
    }
    let job = b.job(&id).await;
    assert_eq!(job["state"], "cancelled", "{job:#}");
    assert_eq!(job["runs"], 1, "{job:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_past_its_timeout_is_timed_out_and_its_slurm_job_cancelled() {
    let Some(conf) = slurm_conf("a_job_past_its_timeout_is_timed_out_and_its_slurm_job_cancelled") else { return };
    let _turn = CLUSTER.lock().await;
    empty_queue(&conf).await;
    let b = berth_on(&conf, "", "lower_priority", &[]).await;
    let m = marker();
    let id = b.submit(json!({"entrypoint": format!("sleep {m}"), "resources": {"cpu": 1}, "timeout_s": 3, "max_retries": 2})).await;
    let sid = wait_submitted(&b, &id, 1).await;
    // Slurm got the timeout as its time limit, in whole minutes.
    let rec = wait_slurm(&conf, &sid, &["RUNNING"], SECS(30)).await;
    assert_eq!(rec["TimeLimit"], "00:01:00");
    let job = b.wait_state(&id, &["timed_out"], SECS(30)).await;
    assert_eq!(job["runs"], 1, "a timeout is not retried: {job:#}");
    assert!(job["reason"].as_str().unwrap_or_default().contains("timeout of 3 s"), "{job:#}");
    wait_slurm(&conf, &sid, &["CANCELLED"], SECS(30)).await;
    assert!(eventually(SECS(30), || !running(&format!("sleep {m}"))).await, "the job's process outlived its timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn work_berth_did_not_submit_counts_as_used_outside_berth() {
    let Some(conf) = slurm_conf("work_berth_did_not_submit_counts_as_used_outside_berth") else { return };
    let _turn = CLUSTER.lock().await;
    empty_queue(&conf).await;
    let b = berth_on(&conf, "", "lower_priority", &["--slurm-nodes-ms", "500"]).await;
    // Someone else's job takes 12 of the node's 16 CPUs, straight through sbatch.
    let m = marker();
    let theirs = slurm(&conf, "sbatch", &["--parsable", "-c", "12", "-J", "not-berth", "-o", "/dev/null", "--wrap", &format!("sleep {m}")]);
    let theirs = theirs.trim().split(';').next().unwrap().to_string();
    wait_slurm(&conf, &theirs, &["RUNNING"], SECS(30)).await;
    let node = wait_until("Berth sees the outside job", SECS(30), async || {
        let (_, nodes) = b.get("/api/v1/nodes").await;
        let n = nodes["nodes"][0].clone();
        if n["used_outside"]["cpu"] == json!(12.0) { Ok(n) } else { Err(n.to_string()) }
    })
    .await;
    assert_eq!(node["free"]["cpu"], json!(4.0), "{node}");
    // Berth's own job beside it does not count as outside.
    let small = b.submit(json!({"entrypoint": format!("sleep {m}1"), "resources": {"cpu": 2}})).await;
    let small_sid = wait_submitted(&b, &small, 1).await;
    wait_slurm(&conf, &small_sid, &["RUNNING"], SECS(30)).await;
    // A job needing 8 CPUs waits in Berth (not in Slurm's queue) while that job holds them.
    let big = b.submit(json!({"entrypoint": "echo big", "resources": {"cpu": 8}})).await;
    let waiting = wait_until("the big job waiting with a reason", SECS(30), async || {
        let j = b.job(&big).await;
        if j["state"] == "pending" && j["reason"].as_str().is_some_and(|r| !r.is_empty()) { Ok(j) } else { Err(j.to_string()) }
    })
    .await;
    let (_, nodes) = b.get("/api/v1/nodes").await;
    assert_eq!(nodes["nodes"][0]["used_outside"]["cpu"], json!(12.0), "Berth's own 2 CPUs are not outside: {nodes}");
    assert!(slurm_id(&b, &big, 1).is_none(), "sent to Slurm while the node had no room: {waiting:#}");
    // Once the outside job ends, Berth admits it.
    slurm(&conf, "scancel", &[&theirs]);
    let done = b.wait_state(&big, &["succeeded"], SECS(60)).await;
    assert_eq!(done["runs"], 1, "{done:#}");
    b.post(&format!("/api/v1/jobs/{small}/cancel"), &json!({})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn berth_killed_and_restarted_adopts_running_slurm_jobs_and_records_the_ended_one() {
    let Some(conf) = slurm_conf("berth_killed_and_restarted_adopts_running_slurm_jobs_and_records_the_ended_one") else { return };
    let _turn = CLUSTER.lock().await;
    empty_queue(&conf).await;
    let mut b = berth_on(&conf, "", "lower_priority", &[]).await;
    // Each job waits for its own file, then exits with its own code.
    let gate = |name: &str, code: i32| format!("while [ ! -e {}/{name} ]; do sleep 0.1; done; echo {name} done; exit {code}", b.dir.display());
    let ended = b.submit(json!({"entrypoint": gate("go-a", 4), "resources": {"cpu": 1}})).await;
    let running_on = b.submit(json!({"entrypoint": gate("go-b", 0), "resources": {"cpu": 1}})).await;
    let (sa, sb) = (wait_submitted(&b, &ended, 1).await, wait_submitted(&b, &running_on, 1).await);
    wait_slurm(&conf, &sa, &["RUNNING"], SECS(30)).await;
    wait_slurm(&conf, &sb, &["RUNNING"], SECS(30)).await;
    b.wait_state(&ended, &["running"], SECS(30)).await;
    b.wait_state(&running_on, &["running"], SECS(30)).await;

    b.kill9();
    // One job ends while Berth is away; the other keeps running.
    b.file("go-a", "");
    wait_slurm(&conf, &sa, &["FAILED"], SECS(30)).await;
    b.spawn().await;
    let a = b.wait_state(&ended, &["failed"], SECS(30)).await;
    assert_eq!(a["exit_code"], 4, "the outcome of the run that ended meanwhile: {a:#}");
    let still = b.job(&running_on).await;
    assert_eq!(still["state"], "running", "{still:#}");
    b.file("go-b", "");
    let done = b.wait_state(&running_on, &["succeeded"], SECS(60)).await;
    let (_, logs) = b.get_text(&format!("/api/v1/jobs/{running_on}/logs")).await;
    assert!(logs.contains("go-b done"), "{logs}");
    // Each job ran once: nothing was submitted again after the restart.
    for (job, j) in [(&ended, &a), (&running_on, &done)] {
        assert_eq!(j["runs"], 1, "{j:#}");
        let named = slurm(&conf, "squeue", &["-h", "-t", "all", "-n", &format!("{job}-r1,{job}-r2"), "-o", "%i"]);
        assert_eq!(named.split_whitespace().count(), 1, "Slurm jobs of {job}: {named}");
    }
}

/// Slow (about 70 s): Slurm counts time limits in whole minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slurm_ending_a_job_at_its_time_limit_while_berth_is_away_is_a_timeout() {
    let Some(conf) = slurm_conf("slurm_ending_a_job_at_its_time_limit_while_berth_is_away_is_a_timeout") else { return };
    let _turn = CLUSTER.lock().await;
    empty_queue(&conf).await;
    let mut b = berth_on(&conf, "", "lower_priority", &[]).await;
    let m = marker();
    let id = b.submit(json!({"entrypoint": format!("sleep {m}"), "resources": {"cpu": 1}, "timeout_s": 60, "max_retries": 1})).await;
    let sid = wait_submitted(&b, &id, 1).await;
    wait_slurm(&conf, &sid, &["RUNNING"], SECS(30)).await;
    b.wait_state(&id, &["running"], SECS(30)).await;
    // Berth goes away; Slurm alone stops the job at its time limit.
    b.kill9();
    let rec = wait_slurm(&conf, &sid, &["TIMEOUT"], SECS(120)).await;
    assert_eq!(rec["Reason"], "TimeLimit", "{rec:?}");
    assert!(eventually(SECS(30), || !running(&format!("sleep {m}"))).await, "the job's process outlived Slurm's time limit");
    b.spawn().await;
    let job = b.wait_state(&id, &["timed_out"], SECS(30)).await;
    assert!(job["reason"].as_str().unwrap_or_default().contains("Slurm's time limit"), "{job:#}");
    assert_eq!(job["runs"], 1, "a timeout is not retried: {job:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quota_and_priority_decide_what_slurm_receives_and_when() {
    let Some(conf) = slurm_conf("quota_and_priority_decide_what_slurm_receives_and_when") else { return };
    let _turn = CLUSTER.lock().await;
    empty_queue(&conf).await;
    let b = berth_on(&conf, ", nominal_quota: 1", "never", &[]).await;
    let job = |p: i64, cmd: &str| json!({"entrypoint": cmd, "priority": p, "resources": {"cpu": 1}});
    let first = b.submit(job(0, &format!("while [ ! -e {}/go ]; do sleep 0.1; done", b.dir.display()))).await;
    let first_sid = wait_submitted(&b, &first, 1).await;
    wait_slurm(&conf, &first_sid, &["RUNNING"], SECS(30)).await;
    // Submitted low to high while the quota of 1 CPU is held: none reaches Slurm yet.
    let mut ids = Vec::new();
    for p in [1, 3, 2, 5] {
        ids.push((p, b.submit(job(p, "true")).await));
    }
    wait_until("the four jobs waiting in Berth", SECS(30), async || {
        for (_, id) in &ids {
            let j = b.job(id).await;
            if j["state"] != "pending" || j["reason"].as_str().unwrap_or_default().is_empty() {
                return Err(j.to_string());
            }
        }
        Ok(())
    })
    .await;
    assert!(ids.iter().all(|(_, id)| slurm_id(&b, id, 1).is_none()), "Slurm received a job beyond the quota");
    b.file("go", "");
    let mut all: Vec<String> = ids.iter().map(|(_, id)| id.clone()).collect();
    all.push(first);
    let ended = b.wait_all_ended(&all, SECS(120)).await;
    assert!(ended.iter().all(|j| j["state"] == "succeeded"), "{ended:#?}");
    // Slurm received them by priority (its job ids grow with each submission), each after
    // the one before had ended (the quota is 1 CPU).
    let mut received: Vec<(u64, i64, HashMap<String, String>)> = ids
        .iter()
        .map(|(p, id)| {
            let sid = slurm_id(&b, id, 1).expect("submitted");
            (sid.parse().unwrap(), *p, slurm_record(&conf, &sid).expect("Slurm knows it"))
        })
        .collect();
    received.sort_by_key(|r| r.0);
    let order: Vec<i64> = received.iter().map(|r| r.1).collect();
    assert_eq!(order, [5, 3, 2, 1], "the order Slurm received them in");
    for w in received.windows(2) {
        assert!(w[1].2["SubmitTime"] >= w[0].2["EndTime"], "two jobs of a 1-CPU quota overlapped in Slurm: {:?} / {:?}", w[0].2, w[1].2);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn preemption_cancels_the_slurm_job_and_requeues_it_in_berth() {
    let Some(conf) = slurm_conf("preemption_cancels_the_slurm_job_and_requeues_it_in_berth") else { return };
    let _turn = CLUSTER.lock().await;
    empty_queue(&conf).await;
    let b = berth_on(&conf, ", nominal_quota: 1", "lower_priority", &[]).await;
    let m = marker();
    // The first run sleeps (a marker to find its process), a later one ends at once.
    let low = b.submit(json!({"entrypoint": format!("if [ \"$BERTH_RUN\" = 1 ]; then sleep {m}; fi; echo low-done"), "priority": 1, "resources": {"cpu": 1}})).await;
    let low1 = wait_submitted(&b, &low, 1).await;
    wait_slurm(&conf, &low1, &["RUNNING"], SECS(30)).await;
    assert!(eventually(SECS(30), || running(&format!("sleep {m}"))).await, "the low job's process runs");
    let high = b.submit(json!({"entrypoint": "echo high-done", "priority": 9, "resources": {"cpu": 1}})).await;
    // The victim's Slurm job is cancelled, its process gone; it comes back as run 2, a new
    // Slurm job.
    wait_slurm(&conf, &low1, &["CANCELLED"], SECS(30)).await;
    assert!(eventually(SECS(30), || !running(&format!("sleep {m}"))).await, "the preempted process is gone");
    b.wait_state(&high, &["succeeded"], SECS(60)).await;
    let done = b.wait_state(&low, &["succeeded"], SECS(60)).await;
    assert_eq!(done["runs"], 2, "{done:#}");
    let low2 = slurm_id(&b, &low, 2).expect("run 2 submitted");
    assert_ne!(low1, low2);
    assert_eq!(wait_slurm(&conf, &low2, &["COMPLETED"], SECS(10)).await["JobName"], format!("{low}-r2"));
    let preempted = b.events("kind=preempted").await;
    assert_eq!(preempted.len(), 1, "{preempted:#?}");
    assert_eq!(preempted[0]["job_id"], json!(low));
}

/// The running slurmctld's pid (from the test cluster's pid file).
fn slurmctld_pid(conf: &str) -> Option<i32> {
    let dir = std::path::Path::new(conf).parent()?.parent()?;
    std::fs::read_to_string(dir.join("run/slurmctld.pid")).ok()?.trim().parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slurmctld_stopped_mid_run_and_restarted_loses_nothing() {
    let Some(conf) = slurm_conf("slurmctld_stopped_mid_run_and_restarted_loses_nothing") else { return };
    let _turn = CLUSTER.lock().await;
    empty_queue(&conf).await;
    let b = berth_on(&conf, "", "lower_priority", &["--slurm-nodes-ms", "500"]).await;
    let gate = format!("while [ ! -e {}/go ]; do sleep 0.1; done; echo through; exit 5", b.dir.display());
    let during = b.submit(json!({"entrypoint": gate, "resources": {"cpu": 1}})).await;
    let sid = wait_submitted(&b, &during, 1).await;
    wait_slurm(&conf, &sid, &["RUNNING"], SECS(30)).await;
    // The controller goes away (its state saved); the job ends while it is away.
    let pid = slurmctld_pid(&conf).expect("slurmctld pid file");
    assert!(Command::new("kill").arg(pid.to_string()).status().unwrap().success());
    assert!(eventually(SECS(30), || !common::berth::alive(pid)).await, "slurmctld did not stop");
    b.file("go", "");
    // A job submitted meanwhile waits in Berth: no retry spent.
    let after = b.submit(json!({"entrypoint": "echo after", "resources": {"cpu": 1}, "max_retries": 0})).await;
    let waiting = wait_until("the new job waiting for Slurm", SECS(60), async || {
        let j = b.job(&after).await;
        if j["state"] == "pending" && j["reason"].as_str().unwrap_or_default().contains("unavailable") { Ok(j) } else { Err(j.to_string()) }
    })
    .await;
    assert_eq!(waiting["retries"], 0, "{waiting:#}");
    // The controller comes back with its saved state.
    let started = Command::new("slurmctld").args(["-f", &conf]).env("SLURM_CONF", &conf).env_remove("SLURM_JWT").current_dir("/tmp").status().unwrap();
    assert!(started.success(), "slurmctld restarts");
    let first = b.wait_state(&during, &["failed"], SECS(90)).await;
    assert_eq!(first["exit_code"], 5, "{first:#}");
    assert_eq!(first["runs"], 1, "{first:#}");
    let second = b.wait_state(&after, &["succeeded"], SECS(90)).await;
    assert_eq!(second["runs"], 1, "{second:#}");
    let (_, logs) = b.get_text(&format!("/api/v1/jobs/{during}/logs")).await;
    assert!(logs.contains("through"), "{logs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_queue_feeds_local_and_two_slurm_clusters_by_its_flavors() {
    let Some(confs) = slurm_confs("one_queue_feeds_local_and_two_slurm_clusters_by_its_flavors") else { return };
    let [gpus, cpus] = &confs[..] else { panic!("BERTH_TEST_SLURM must name two slurm.conf files, GPU_CONF:CPU_CONF (.ci/slurm.sh start), got {confs:?}") };
    let _turn = CLUSTER.lock().await;
    empty_queue(gpus).await;
    empty_queue(cpus).await;
    let (a, c) = (format!("gpus={gpus}"), format!("cpus={cpus}"));
    let b = Berth::start(Backend::Sqlite, &["--local-cpus", "1", "--local-gpus", "0", "--slurm", &a, "--slurm", &c, "--slurm-poll-ms", "100"]).await;
    // Each cluster's node says which cluster it is.
    let (_, nodes) = b.get("/api/v1/nodes").await;
    let mut by_id: Vec<(String, String, String)> = nodes["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap().to_string(), n["backend"].as_str().unwrap().to_string(), n["labels"]["slurm.cluster"].as_str().unwrap_or("").to_string()))
        .collect();
    by_id.sort();
    assert_eq!(by_id.len(), 3, "{nodes}");
    assert_eq!((by_id[0].0.as_str(), by_id[0].1.as_str(), by_id[0].2.as_str()), ("cpus:n1", "cpus", "cpus"), "{nodes}");
    assert_eq!((by_id[1].0.as_str(), by_id[1].1.as_str(), by_id[1].2.as_str()), ("gpus:n1", "gpus", "gpus"), "{nodes}");
    assert_eq!(by_id[2].1, "local", "{nodes}");
    // One queue: the CPU cluster first (1 CPU of quota), then this host (1), then the GPU
    // cluster, the only one with GPUs.
    b.apply(
        r#"
resource_flavors:
  - name: batch
    selector: [{key: slurm.cluster, operator: in, values: [cpus]}]
  - name: here
    selector: [{key: backend, operator: in, values: [local]}]
  - name: gpu
    selector: [{key: feature.a100, operator: in, values: ["true"]}]
resource_queues:
  - name: q
    resource_groups:
      - covered_resources: [cpu, gpu, memory_gb]
        flavors:
          - {name: batch, resources: [{name: cpu, nominal_quota: 1}]}
          - {name: here, resources: [{name: cpu, nominal_quota: 1}]}
          - {name: gpu, resources: [{name: cpu}]}
scheduling_rules:
  - resource_queue: q
    priority_policy: {default: 0, min: 0, max: 100, on_violation: reject}
"#,
    )
    .await;
    let gate = format!("while [ ! -e {}/go ]; do sleep 0.1; done; echo on $SLURM_CLUSTER_NAME", b.dir.display());
    let gpu_job = b.submit(json!({"entrypoint": "echo gpus=$CUDA_VISIBLE_DEVICES", "resources": {"cpu": 1, "gpu": 1}})).await;
    let done = b.wait_state(&gpu_job, &["succeeded"], SECS(60)).await;
    assert_eq!(done["node"], "gpus:n1", "a GPU job lands only where there are GPUs: {done:#}");
    let mut placed = Vec::new();
    for _ in 0..3 {
        let id = b.submit(json!({"entrypoint": gate, "resources": {"cpu": 1}})).await;
        placed.push(b.wait_state(&id, &["running"], SECS(60)).await);
    }
    let nodes: Vec<&str> = placed.iter().map(|j| j["node"].as_str().unwrap_or("")).collect();
    assert_eq!(nodes[0], "cpus:n1", "{placed:#?}");
    assert!(!nodes[1].contains(':'), "the second CPU job runs on this host: {placed:#?}");
    assert_eq!(nodes[2], "gpus:n1", "{placed:#?}");
    b.file("go", "");
    let ids: Vec<String> = placed.iter().map(|j| j["id"].as_str().unwrap().to_string()).collect();
    let ended = b.wait_all_ended(&ids, SECS(60)).await;
    assert!(ended.iter().all(|j| j["state"] == "succeeded"), "{ended:#?}");
    // Each Slurm cluster ran the job Berth placed there.
    let on = |conf: &str, id: &str, backend: &str| -> String {
        let sid = std::fs::read_to_string(b.dir.join("data/slurm").join(backend).join(format!("{id}-r1/slurm_job_id"))).unwrap();
        slurm_record(conf, sid.trim()).expect("Slurm knows it")["JobName"].clone()
    };
    assert_eq!(on(cpus, &ids[0], "cpus"), format!("{}-r1", ids[0]));
    assert_eq!(on(gpus, &ids[2], "gpus"), format!("{}-r1", ids[2]));
    let (_, log) = b.get_text(&format!("/api/v1/jobs/{}/logs", ids[0])).await;
    assert!(log.contains("on berthcpu"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slurms_queue_holds_only_the_runs_berth_admitted_up_to_the_in_flight_cap() {
    let Some(conf) = slurm_conf("slurms_queue_holds_only_the_runs_berth_admitted_up_to_the_in_flight_cap") else { return };
    let _turn = CLUSTER.lock().await;
    empty_queue(&conf).await;
    let b = berth_on(&conf, "", "lower_priority", &["--slurm-max-in-flight", "2"]).await;
    let gate = format!("while [ ! -e {}/go ]; do sleep 0.1; done", b.dir.display());
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(b.submit(json!({"entrypoint": gate, "resources": {"cpu": 1}})).await);
    }
    // Two in Slurm, three waiting in Berth saying why, with room for all on the node.
    let waiting = wait_until("two running, three held back by the cap", SECS(30), async || {
        let mut running = 0;
        let mut held = Vec::new();
        for id in &ids {
            let j = b.job(id).await;
            match j["state"].as_str() {
                Some("running") => running += 1,
                Some("pending") if j["reason"].as_str().unwrap_or_default().contains("in flight") => held.push(j),
                _ => {}
            }
        }
        if running == 2 && held.len() == 3 { Ok(held) } else { Err(format!("{running} running, {} held", held.len())) }
    })
    .await;
    assert!(waiting[0]["reason"].as_str().unwrap().contains("hpc"), "{:#}", waiting[0]);
    let queued = slurm(&conf, "squeue", &["-h", "-o", "%j"]);
    assert_eq!(queued.split_whitespace().count(), 2, "Slurm's queue: {queued}");
    b.file("go", "");
    let ended = b.wait_all_ended(&ids, SECS(60)).await;
    assert!(ended.iter().all(|j| j["state"] == "succeeded" && j["runs"] == 1), "{ended:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_for_a_drained_node_waits_for_it_and_one_no_node_could_take_is_refused() {
    let Some(conf) = slurm_conf("a_job_for_a_drained_node_waits_for_it_and_one_no_node_could_take_is_refused") else { return };
    let _turn = CLUSTER.lock().await;
    empty_queue(&conf).await;
    let b = berth_on(&conf, "", "lower_priority", &["--slurm-nodes-ms", "500"]).await;
    slurm(&conf, "scontrol", &["update", "nodename=n1", "state=drain", "reason=berth-test"]);
    // The node is gone from Berth's nodes while drained...
    let undrain = || slurm(&conf, "scontrol", &["update", "nodename=n1", "state=resume"]);
    let gone = wait_until("the drained node gone from Berth's nodes", SECS(30), async || {
        let (_, nodes) = b.get("/api/v1/nodes").await;
        if nodes["nodes"].as_array().is_some_and(Vec::is_empty) { Ok(()) } else { Err(nodes.to_string()) }
    });
    gone.await;
    // ...but a job it could take is accepted, and waits saying why.
    let (status, job) = b.post("/api/v1/jobs", &json!({"entrypoint": "echo after-drain", "resources": {"cpu": 1}})).await;
    if status != 201 {
        undrain();
        panic!("refused while the node was drained: {status} {job}");
    }
    let id = job["id"].as_str().unwrap().to_string();
    let waiting = wait_until("the job waiting for the drained node", SECS(30), async || {
        let j = b.job(&id).await;
        if j["state"] == "pending" && j["reason"].as_str().unwrap_or_default().contains("no node matches") { Ok(j) } else { Err(j.to_string()) }
    })
    .await;
    assert!(slurm_id(&b, &id, 1).is_none(), "sent to Slurm while drained: {waiting:#}");
    // A job no node could ever take (more CPUs than the node has) is refused at once.
    let (status, too_big) = b.post("/api/v1/jobs", &json!({"entrypoint": "true", "resources": {"cpu": 64}})).await;
    assert_eq!(status, 422, "{too_big}");
    assert!(too_big.to_string().contains("hpc:n1"), "the reason names the biggest node: {too_big}");
    // A flavor on a feature no node has refuses its jobs, saying so.
    b.apply(&config("h100", "", "lower_priority")).await;
    let (status, no_feature) = b.post("/api/v1/jobs", &json!({"entrypoint": "true", "resources": {"cpu": 1}})).await;
    assert_eq!(status, 422, "{no_feature}");
    assert!(no_feature.to_string().contains("no node matches"), "{no_feature}");
    b.apply(&config("a100", "", "lower_priority")).await;
    // Back in service: the waiting job runs.
    undrain();
    let done = b.wait_state(&id, &["succeeded"], SECS(60)).await;
    assert_eq!(done["runs"], 1, "{done:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_queue_feeds_this_host_ray_and_slurm_by_its_flavors() {
    let test = "one_queue_feeds_this_host_ray_and_slurm_by_its_flavors";
    let Some(conf) = slurm_conf(test) else { return };
    let Some(ray) = std::env::var("BERTH_TEST_RAY_URL").ok().filter(|u| !u.trim().is_empty()) else {
        eprintln!("SKIPPED {test}: BERTH_TEST_RAY_URL is not set; it names a Ray head's dashboard (`BERTH_TEST_RAY_URL=$(.ci/ray.sh start)`)");
        return;
    };
    let _turn = CLUSTER.lock().await;
    empty_queue(&conf).await;
    let (slurm_arg, ray_arg) = (format!("hpc={conf}"), format!("ray={}", ray.trim_end_matches('/')));
    let b = Berth::start(Backend::Sqlite, &["--local-cpus", "1", "--slurm", &slurm_arg, "--ray", &ray_arg, "--slurm-poll-ms", "100", "--ray-poll-ms", "200"]).await;
    // One queue, three flavors in order, 1 CPU of quota each: Slurm, then Ray (the test head
    // is labelled pool=test), then this host.
    b.apply(
        r#"
resource_flavors:
  - name: slurm
    selector: [{key: slurm.cluster, operator: in, values: [hpc]}]
  - name: ray
    selector: [{key: pool, operator: in, values: [test]}]
  - name: here
    selector: [{key: backend, operator: in, values: [local]}]
resource_queues:
  - name: q
    resource_groups:
      - covered_resources: [cpu, gpu, memory_gb]
        flavors:
          - {name: slurm, resources: [{name: cpu, nominal_quota: 1}]}
          - {name: ray, resources: [{name: cpu, nominal_quota: 1}]}
          - {name: here, resources: [{name: cpu, nominal_quota: 1}]}
scheduling_rules:
  - resource_queue: q
    priority_policy: {default: 0, min: 0, max: 100, on_violation: reject}
"#,
    )
    .await;
    let gate = format!("while [ ! -e {}/go ]; do sleep 0.1; done; echo through", b.dir.display());
    let mut placed = Vec::new();
    for _ in 0..3 {
        let id = b.submit(json!({"entrypoint": gate, "resources": {"cpu": 1}})).await;
        placed.push(b.wait_state(&id, &["running"], SECS(60)).await);
    }
    let backends: Vec<String> = placed
        .iter()
        .map(|j| {
            let node = j["node"].as_str().unwrap_or("");
            node.split_once(':').map_or("local", |(b, _)| b).to_string()
        })
        .collect();
    assert_eq!(backends, ["hpc", "ray", "local"], "{placed:#?}");
    b.file("go", "");
    let ids: Vec<String> = placed.iter().map(|j| j["id"].as_str().unwrap().to_string()).collect();
    let ended = b.wait_all_ended(&ids, SECS(90)).await;
    assert!(ended.iter().all(|j| j["state"] == "succeeded"), "{ended:#?}");
    for id in &ids {
        let (_, log) = b.get_text(&format!("/api/v1/jobs/{id}/logs")).await;
        assert!(log.contains("through"), "{id}: {log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slurm_node_failure_fails_the_run_with_that_reason_and_berth_retries_it() {
    let Some(conf) = slurm_conf("a_slurm_node_failure_fails_the_run_with_that_reason_and_berth_retries_it") else { return };
    let _turn = CLUSTER.lock().await;
    empty_queue(&conf).await;
    let b = berth_on(&conf, "", "lower_priority", &[]).await;
    let m = marker();
    let id = b.submit(json!({"entrypoint": format!("if [ \"$BERTH_RUN\" = 1 ]; then sleep {m}; fi; echo second-run"), "resources": {"cpu": 1}, "max_retries": 1})).await;
    let sid = wait_submitted(&b, &id, 1).await;
    wait_slurm(&conf, &sid, &["RUNNING"], SECS(30)).await;
    // The node goes down under the job (slurmd re-registers it at once: ReturnToService=2).
    slurm(&conf, "scontrol", &["update", "nodename=n1", "state=down", "reason=berth-test"]);
    let rec = wait_slurm(&conf, &sid, &["NODE_FAIL"], SECS(30)).await;
    assert_eq!(rec["JobName"], format!("{id}-r1"));
    let done = b.wait_state(&id, &["succeeded"], SECS(90)).await;
    assert_eq!(done["runs"], 2, "{done:#}");
    let retried = b.events(&format!("job={id}&kind=retried")).await;
    assert_eq!(retried.len(), 1, "{retried:#?}");
    let why = retried[0]["message"].as_str().unwrap_or_default();
    assert!(why.contains("its Slurm node failed (NODE_FAIL on n1)"), "{why}");
    assert!(eventually(SECS(30), || !running(&format!("sleep {m}"))).await, "the failed run's process lives on");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stage_runs_on_slurm_within_its_concurrency_with_its_outputs() {
    let Some(conf) = slurm_conf("a_stage_runs_on_slurm_within_its_concurrency_with_its_outputs") else { return };
    let _turn = CLUSTER.lock().await;
    empty_queue(&conf).await;
    let b = berth_on(&conf, "", "lower_priority", &[]).await;
    let jobs: Vec<serde_json::Value> = (0..5)
        .map(|i| json!({"name": format!("part{i}"), "entrypoint": format!("sleep 0.5; echo {i} > out.txt"), "resources": {"cpu": 1}, "outputs": ["out.txt"]}))
        .collect();
    let (status, created) = b.post("/api/v1/stages", &json!({"name": "sweep", "jobs": jobs, "parallelism": {"max_concurrent": 2}})).await;
    assert_eq!(status, 201, "{created}");
    let stage = created["stage_id"].as_str().unwrap().to_string();
    let ids: Vec<String> = created["job_ids"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
    let ended = b.wait_all_ended(&ids, SECS(90)).await;
    assert!(ended.iter().all(|j| j["state"] == "succeeded" && j["node"] == "hpc:n1"), "{ended:#?}");
    // Never more than 2 at once, by Slurm's own start and end times of each task's job.
    let spans: Vec<(String, String)> = ids
        .iter()
        .map(|id| {
            let rec = slurm_record(&conf, &slurm_id(&b, id, 1).expect("submitted")).expect("Slurm knows it");
            (rec["StartTime"].clone(), rec["EndTime"].clone())
        })
        .collect();
    for (start, _) in &spans {
        // Whole seconds: a job that ends in the second another starts is not counted.
        let at_once = spans.iter().filter(|(s, e)| s <= start && e > start).count();
        assert!(at_once <= 2, "{at_once} tasks at once at {start}: {spans:?}");
    }
    let (_, results) = b.get(&format!("/api/v1/stages/{stage}/results")).await;
    assert_eq!(results["success"], true, "{results:#}");
    assert_eq!(results["artifacts"]["part3/out.txt"], "3\n", "{results:#}");
}

/// `berth jobs submit --array RANGE -- cmd` against `b` (the real CLI); the array's stage
/// and its tasks' job ids by index.
async fn submit_array(b: &Berth, range: &str, cmd: &str) -> (String, Vec<String>) {
    let out = Command::new(common::berth::berth_bin())
        .args(["--server", &b.url, "jobs", "submit", "--cpu", "1", "--workdir", &b.dir.display().to_string(), "--array", range, "--", cmd])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "jobs submit --array: {text} {}", String::from_utf8_lossy(&out.stderr));
    let stage = text.lines().rev().map(str::trim).find(|l| !l.is_empty()).unwrap_or_default().to_string();
    let (status, results) = b.get(&format!("/api/v1/stages/{stage}/results")).await;
    assert_eq!(status, 200, "{results}");
    let mut tasks: Vec<(u32, String)> = results["job_statuses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            let name = j["name"].as_str().unwrap();
            let index = name.rsplit_once('[').and_then(|(_, i)| i.trim_end_matches(']').parse().ok()).expect("a task name ends in [index]");
            (index, j["job_id"].as_str().unwrap().to_string())
        })
        .collect();
    tasks.sort();
    (stage, tasks.into_iter().map(|(_, id)| id).collect())
}

/// The final records of `ids`, in their order, once all have ended.
async fn ended_in_order(b: &Berth, ids: &[String]) -> Vec<serde_json::Value> {
    b.wait_all_ended(ids, SECS(60)).await;
    let mut out = Vec::new();
    for id in ids {
        out.push(b.job(id).await);
    }
    out
}

/// Every job Slurm has (any state, one row per array task) as (`%i`, `%j`).
fn slurm_jobs(conf: &str) -> Vec<(String, String)> {
    let text = slurm(conf, "squeue", &["-h", "-r", "-t", "all", "-o", "%i %j"]);
    text.lines().filter_map(|l| l.split_once(' ')).map(|(i, j)| (i.to_string(), j.trim().to_string())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_array_goes_to_slurm_as_one_job_array_and_each_task_stays_its_own_berth_job() {
    let Some(conf) = slurm_conf("an_array_goes_to_slurm_as_one_job_array_and_each_task_stays_its_own_berth_job") else { return };
    let _turn = CLUSTER.lock().await;
    empty_queue(&conf).await;
    let b = berth_on(&conf, "", "lower_priority", &["--slurm-arrays"]).await;
    // Each task waits for its own file; task 2 fails.
    let cmd = format!(
        "echo idx=$BERTH_ARRAY_INDEX slurm=$SLURM_ARRAY_TASK_ID count=$SLURM_ARRAY_TASK_COUNT; echo err-$BERTH_ARRAY_INDEX >&2; \
         while [ ! -e {}/go-$BERTH_ARRAY_INDEX ]; do sleep 0.1; done; [ $BERTH_ARRAY_INDEX = 2 ] && exit 5; exit 0",
        b.dir.display()
    );
    let (_, ids) = submit_array(&b, "0-3", &cmd).await;
    for id in &ids {
        b.wait_state(id, &["running"], SECS(60)).await;
    }
    // One Slurm job array: every task's id is ARRAYID_INDEX of the same array.
    let sids: Vec<String> = ids.iter().map(|id| slurm_id(&b, id, 1).expect("submitted")).collect();
    let array = sids[0].split_once('_').map(|(a, _)| a.to_string()).unwrap_or_else(|| panic!("not an array task: {sids:?}"));
    assert_eq!(sids, (0..4).map(|i| format!("{array}_{i}")).collect::<Vec<_>>());
    for sid in &sids {
        let rec = wait_slurm(&conf, sid, &["RUNNING"], SECS(30)).await;
        assert_eq!(rec["ArrayJobId"], array, "{rec:?}");
    }
    let ours: Vec<(String, String)> = slurm_jobs(&conf).into_iter().filter(|(i, _)| i.starts_with(&format!("{array}_"))).collect();
    assert_eq!(ours.len(), 4, "{ours:?}");
    // Cancelling one task cancels only its Slurm task.
    let (status, body) = b.post(&format!("/api/v1/jobs/{}/cancel", ids[1]), &json!({})).await;
    assert_eq!(status, 200, "{body}");
    wait_slurm(&conf, &sids[1], &["CANCELLED"], SECS(30)).await;
    for i in [0, 2, 3] {
        assert_eq!(slurm_record(&conf, &sids[i]).expect("known")["JobState"], "RUNNING", "task {i}");
        assert_eq!(b.job(&ids[i]).await["state"], "running", "task {i}");
    }
    for i in [0, 2, 3] {
        b.file(&format!("go-{i}"), "");
    }
    let ended = ended_in_order(&b, &ids).await;
    let states: Vec<(&str, i64)> = ended.iter().map(|j| (j["state"].as_str().unwrap_or(""), j["exit_code"].as_i64().unwrap_or(-1))).collect();
    assert_eq!(states, [("succeeded", 0), ("cancelled", -1), ("failed", 5), ("succeeded", 0)], "{ended:#?}");
    assert_eq!(ended[2]["reason"], "exited with code 5", "{:#}", ended[2]);
    // Each task's own logs, with Berth's index (also as Slurm's variables).
    for i in [0usize, 2, 3] {
        let (_, out) = b.get_text(&format!("/api/v1/jobs/{}/logs", ids[i])).await;
        assert_eq!(out.trim(), format!("idx={i} slurm={i} count=4"), "task {i}");
        let (_, err) = b.get_text(&format!("/api/v1/jobs/{}/logs?stream=stderr", ids[i])).await;
        assert_eq!(err.trim(), format!("err-{i}"), "task {i}");
    }
    assert_eq!(wait_slurm(&conf, &sids[2], &["FAILED"], SECS(10)).await["ExitCode"], "5:0");
    // Runs that are not array tasks still go alone, under their own name.
    let lone = b.submit(json!({"entrypoint": "echo alone", "resources": {"cpu": 1}})).await;
    b.wait_state(&lone, &["succeeded"], SECS(60)).await;
    let lone_sid = slurm_id(&b, &lone, 1).expect("submitted");
    assert!(!lone_sid.contains('_'), "{lone_sid}");
    assert_eq!(slurm_record(&conf, &lone_sid).expect("known")["JobName"], format!("{lone}-r1"));
    // Without --slurm-arrays each task is a batch job of its own, with the same index.
    drop(b);
    let b = berth_on(&conf, "", "lower_priority", &[]).await;
    let (_, ids) = submit_array(&b, "5-6", "echo idx=$BERTH_ARRAY_INDEX slurm=$SLURM_ARRAY_TASK_ID").await;
    let ended = ended_in_order(&b, &ids).await;
    for (j, i) in ended.iter().zip([5, 6]) {
        assert_eq!(j["state"], "succeeded", "{j:#}");
        let sid = slurm_id(&b, j["id"].as_str().unwrap(), 1).expect("submitted");
        assert!(!sid.contains('_'), "{sid}");
        let (_, out) = b.get_text(&format!("/api/v1/jobs/{}/logs", j["id"].as_str().unwrap())).await;
        assert_eq!(out.trim(), format!("idx={i} slurm={i}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn berth_killed_mid_array_adopts_each_task_and_starts_none_twice() {
    let Some(conf) = slurm_conf("berth_killed_mid_array_adopts_each_task_and_starts_none_twice") else { return };
    let _turn = CLUSTER.lock().await;
    empty_queue(&conf).await;
    let mut b = berth_on(&conf, "", "lower_priority", &["--slurm-arrays"]).await;
    let cmd = format!("while [ ! -e {}/go-$BERTH_ARRAY_INDEX ]; do sleep 0.1; done; echo done-$BERTH_ARRAY_INDEX; exit $BERTH_ARRAY_INDEX", b.dir.display());
    let (_, ids) = submit_array(&b, "0-2", &cmd).await;
    for id in &ids {
        b.wait_state(id, &["running"], SECS(60)).await;
    }
    let sids: Vec<String> = ids.iter().map(|id| slurm_id(&b, id, 1).expect("submitted")).collect();
    for sid in &sids {
        wait_slurm(&conf, sid, &["RUNNING"], SECS(30)).await;
    }
    b.kill9();
    // Task 1 ends (code 1) while Berth is away; the others keep running.
    b.file("go-1", "");
    wait_slurm(&conf, &sids[1], &["FAILED"], SECS(30)).await;
    b.spawn().await;
    let one = b.wait_state(&ids[1], &["failed"], SECS(30)).await;
    assert_eq!(one["exit_code"], 1, "the outcome of the task that ended meanwhile: {one:#}");
    for i in [0, 2] {
        assert_eq!(b.job(&ids[i]).await["state"], "running", "task {i}");
    }
    b.file("go-0", "");
    b.file("go-2", "");
    let ended = ended_in_order(&b, &ids).await;
    let codes: Vec<i64> = ended.iter().map(|j| j["exit_code"].as_i64().unwrap_or(-1)).collect();
    assert_eq!(codes, [0, 1, 2], "{ended:#?}");
    assert!(ended.iter().all(|j| j["runs"] == 1), "{ended:#?}");
    let (_, log) = b.get_text(&format!("/api/v1/jobs/{}/logs", ids[2])).await;
    assert_eq!(log.trim(), "done-2");
    // Slurm ran each task once: the array's three tasks and nothing else of these jobs.
    let array = sids[0].split_once('_').unwrap().0.to_string();
    let named = ids.iter().map(|id| format!("{id}-r")).collect::<Vec<_>>();
    let related: Vec<(String, String)> = slurm_jobs(&conf).into_iter().filter(|(i, j)| i.starts_with(&format!("{array}_")) || named.iter().any(|n| j.starts_with(n))).collect();
    assert_eq!(related.len(), 3, "{related:?}");
}
