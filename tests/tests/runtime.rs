//! Jobs end to end: the real `berth` binary, real local processes, on SQLite and PostgreSQL.
//! Quota is checked from the event log, process trees by pid.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::os::unix::process::CommandExt;
use std::time::Duration;

use common::berth::{alive, eventually, peak_usage, Berth};
use common::{wait_until, Backend};
use serde_json::{json, Value};

/// Queues routed by the `team` label, all covering cpu on the one local flavor:
/// `lp` (quota 2, preempts lower priority), `np` (quota 2, never preempts), `burst` (4),
/// `one` (1). No catch-all rule: a job without a known team is rejected.
const CONFIG: &str = r#"
resource_flavors:
  - name: local
    selector:
      - {key: backend, operator: in, values: [local]}
resource_queues:
  - name: lp
    preemption: {within_resource_queue: lower_priority}
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 2}]}]
  - name: np
    preemption: {within_resource_queue: never}
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 2}]}]
  - name: burst
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 4}]}]
  - name: one
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 1}]}]
scheduling_rules:
  - resource_queue: lp
    selector: [{key: team, operator: in, values: [lp]}]
    priority_policy: {default: 10, min: 0, max: 100, on_violation: reject}
  - resource_queue: np
    selector: [{key: team, operator: in, values: [np]}]
  - resource_queue: burst
    selector: [{key: team, operator: in, values: [burst]}]
  - resource_queue: one
    selector: [{key: team, operator: in, values: [one]}]
    priority_policy: {default: 0, min: 0, max: 9, on_violation: force_update}
"#;

/// A server with CONFIG applied and a local host of 64 CPUs (so quotas, not the host, bind).
async fn berth(backend: Backend) -> Berth {
    let b = Berth::start(backend, &["--local-cpus", "64"]).await;
    b.apply(CONFIG).await;
    b
}

fn job(team: &str, entrypoint: &str) -> Value {
    json!({ "entrypoint": entrypoint, "labels": { "team": team }, "resources": { "cpu": 1 } })
}

const SECS: fn(u64) -> Duration = Duration::from_secs;

/// Submits `bodies` with `width` requests in flight; the ids in submission order.
async fn submit_concurrently(b: &Berth, bodies: Vec<Value>, width: usize) -> Vec<String> {
    let mut ids = vec![String::new(); bodies.len()];
    let mut set = tokio::task::JoinSet::new();
    let mut it = bodies.into_iter().enumerate();
    loop {
        while set.len() < width {
            let Some((i, body)) = it.next() else { break };
            let (http, url) = (b.http.clone(), format!("{}/api/v1/jobs", b.url));
            set.spawn(async move {
                let r = http.post(url).json(&body).send().await.unwrap();
                assert_eq!(r.status().as_u16(), 201);
                (i, r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string())
            });
        }
        match set.join_next().await {
            Some(r) => {
                let (i, id) = r.unwrap();
                ids[i] = id;
            }
            None => return ids,
        }
    }
}

async fn routes_and_rejects_with_reasons(backend: Backend) {
    let b = berth(backend).await;
    let id = b.submit(job("np", "echo routed")).await;
    let done = b.wait_state(&id, &["succeeded"], SECS(20)).await;
    assert_eq!(done["queue"], "np");
    assert_eq!(done["rule_index"], 1);
    assert_eq!(done["exit_code"], 0);
    assert_eq!(done["flavors"][0]["flavor"], "local");
    let (_, out) = b.get_text(&format!("/api/v1/jobs/{id}/logs")).await;
    assert_eq!(out, "routed\n");
    let kinds: Vec<&str> = done["history"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["submitted", "admitted", "started", "finished"]);

    // No rule matches: 422, recorded as rejected, naming the labels.
    let (status, body) = b.post("/api/v1/jobs", &job("vision", "true")).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "rejected");
    assert!(body["error"]["message"].as_str().unwrap().contains("team=vision"), "{body}");
    let rejected_id = body["error"]["details"]["job"]["id"].as_str().unwrap().to_string();
    let stored = b.job(&rejected_id).await;
    assert_eq!(stored["state"], "rejected");
    // Priority out of bounds with `reject`.
    let mut high = job("lp", "true");
    high["priority"] = json!(500);
    let (status, body) = b.post("/api/v1/jobs", &high).await;
    assert_eq!(status, 422);
    assert!(body["error"]["message"].as_str().unwrap().contains("500"), "{body}");
    // Out of bounds with `force_update`: admitted at the bound.
    let mut clamped = job("one", "true");
    clamped["priority"] = json!(50);
    let id = b.submit(clamped).await;
    assert_eq!(b.job(&id).await["priority"], 9);
    // More than the host could ever hold.
    let mut huge = job("burst", "true");
    huge["resources"]["cpu"] = json!(1000);
    let (status, body) = b.post("/api/v1/jobs", &huge).await;
    assert_eq!(status, 422, "{body}");
    // Bad input names the field and stores nothing.
    let (status, body) = b.post("/api/v1/jobs", &json!({"entrypoint": "true", "resources": {"cpu": "two"}})).await;
    assert_eq!(status, 400);
    assert!(body["error"]["message"].as_str().unwrap().starts_with("resources.cpu"), "{body}");
    let (status, body) = b.post("/api/v1/jobs", &json!({"entrypoint": "true", "timeout_s": 1, "colour": "red"})).await;
    assert_eq!(status, 400);
    assert!(body["error"]["message"].as_str().unwrap().contains("colour"), "{body}");
    let rejected = b.events("kind=rejected").await;
    assert_eq!(rejected.len(), 3, "{rejected:#?}");
}

async fn a_burst_of_500_never_exceeds_quota(backend: Backend) {
    let b = berth(backend).await;
    let bodies: Vec<Value> = (0..500).map(|i| job("burst", &format!("echo {i}"))).collect();
    let ids = submit_concurrently(&b, bodies, 25).await;
    let jobs = b.wait_all_ended(&ids, SECS(240)).await;
    assert!(jobs.iter().all(|j| j["state"] == "succeeded"), "{:?}", jobs.iter().filter(|j| j["state"] != "succeeded").take(3).collect::<Vec<_>>());
    let events = b.events("queue=burst").await;
    let peak = peak_usage(&events, |_| 1.0);
    assert_eq!(peak.get("burst"), Some(&4.0), "peak usage must reach, and never pass, the quota of 4");
    assert_eq!(events.iter().filter(|e| e["kind"] == "admitted").count(), 500);
}

/// `sleep 300` that records its pid in the test dir.
fn sleeper(b: &Berth, team: &str, name: &str, priority: i64) -> Value {
    let pid = b.dir.join(format!("{name}.pid"));
    let mut j = job(team, &format!("echo $$ > {}; exec sleep 300", pid.display()));
    j["name"] = json!(name);
    j["priority"] = json!(priority);
    j
}

async fn pid_of(b: &Berth, name: &str) -> i32 {
    let path = b.dir.join(format!("{name}.pid"));
    assert!(eventually(SECS(10), || std::fs::read_to_string(&path).is_ok_and(|s| !s.trim().is_empty())).await, "{name} never wrote its pid");
    std::fs::read_to_string(&path).unwrap().trim().parse().unwrap()
}

async fn high_priority_preempts_only_where_allowed(backend: Backend) {
    let b = berth(backend).await;
    for team in ["lp", "np"] {
        let low1 = b.submit(sleeper(&b, team, &format!("{team}-low1"), 1)).await;
        let low2 = b.submit(sleeper(&b, team, &format!("{team}-low2"), 2)).await;
        b.wait_state(&low1, &["running"], SECS(10)).await;
        b.wait_state(&low2, &["running"], SECS(10)).await;
        let pid1 = pid_of(&b, &format!("{team}-low1")).await;
        let pid2 = pid_of(&b, &format!("{team}-low2")).await;
        let mut high = sleeper(&b, team, &format!("{team}-high"), 50);
        high["resources"]["cpu"] = json!(2);
        let high = b.submit(high).await;
        if team == "lp" {
            b.wait_state(&high, &["running"], SECS(10)).await;
            for (id, pid) in [(&low1, pid1), (&low2, pid2)] {
                let j = b.job(id).await;
                assert_eq!(j["state"], "pending", "victim back in its queue: {j}");
                assert!(j["reason"].as_str().is_some_and(|r| !r.is_empty()), "a waiting victim says why: {j}");
                assert_eq!(j["runs"], 1);
                assert!(eventually(SECS(5), || !alive(pid)).await, "victim process {pid} still alive");
            }
            let pre = b.events(&format!("kind=preempted&queue={team}")).await;
            assert_eq!(pre.len(), 2, "{pre:#?}");
            assert_eq!(pre[0]["detail"]["preemptor"], json!(high));
            assert_eq!(pre[0]["detail"]["preemptor_priority"], 50);
            let victims: Vec<&Value> = pre[0]["detail"]["victims"].as_array().unwrap().iter().map(|v| &v["job_id"]).collect();
            assert!(victims.contains(&&json!(low1)) && victims.contains(&&json!(low2)), "{pre:#?}");
            assert!(pre[0]["config_version"].as_i64().is_some());
        } else {
            // First the loop's decision on `high`: a waiting job gets its reason in the cycle
            // that considered it, the one that would have preempted for it. Only then does
            // "nothing was preempted" say anything.
            let j = wait_until(&format!("{team}-high to be decided (a reason while it waits)"), SECS(10), async || {
                let j = b.job(&high).await;
                if j["state"] != "pending" || j["reason"].as_str().is_some_and(|r| !r.is_empty()) {
                    Ok(j)
                } else {
                    Err(j.to_string())
                }
            })
            .await;
            assert_eq!(j["state"], "pending", "a `never` queue does not preempt: {j}");
            for id in [&low1, &low2] {
                let low = b.job(id).await;
                assert_eq!((low["state"].as_str(), low["runs"].as_i64()), (Some("running"), Some(1)), "{low}");
            }
            assert!(alive(pid1) && alive(pid2));
            assert!(b.events(&format!("kind=preempted&queue={team}")).await.is_empty());
        }
    }
}

async fn timeout_kills_the_whole_process_tree(backend: Backend) {
    let b = berth(backend).await;
    let child = b.dir.join("child.pid");
    let leader = b.dir.join("leader.pid");
    let mut j = job("burst", &format!("sleep 300 & echo $! > {}; echo $$ > {}; wait", child.display(), leader.display()));
    j["timeout_s"] = json!(1);
    let id = b.submit(j).await;
    b.wait_state(&id, &["running"], SECS(10)).await;
    let read = |p: &std::path::Path| std::fs::read_to_string(p).ok().and_then(|s| s.trim().parse::<i32>().ok());
    assert!(eventually(SECS(5), || read(&child).is_some() && read(&leader).is_some()).await);
    let (c, l) = (read(&child).unwrap(), read(&leader).unwrap());
    assert!(alive(c) && alive(l));
    let done = b.wait_state(&id, &["timed_out"], SECS(10)).await;
    assert!(done["reason"].as_str().unwrap().contains("timeout"), "{done}");
    assert!(eventually(SECS(5), || !alive(c) && !alive(l)).await, "orphans left: child {c} alive={}, leader {l} alive={}", alive(c), alive(l));
    // The resource history saw it running: 1 CPU of the queue's 4, queryable by time range.
    // (Samples are written at most once a second, with the peak since the last one: the
    // one with the job in it may come up to a second after the job ended.)
    let deadline = std::time::Instant::now() + SECS(5);
    let h = loop {
        let (status, h) = b.get("/api/v1/history?since=10m&queue=burst&resource=cpu").await;
        assert_eq!(status, 200, "{h}");
        let samples = h["samples"].as_array().unwrap();
        assert!(samples.iter().all(|s| s["queue"] == "burst" && s["resource"] == "cpu" && s["nominal"] == 4.0), "{h}");
        if samples.iter().any(|s| s["used"] == 1.0) || std::time::Instant::now() > deadline {
            break h;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(h["samples"].as_array().unwrap().iter().any(|s| s["used"] == 1.0), "no sample shows the job running: {h}");
    let (status, _) = b.get("/api/v1/history?since=1h&until=2h").await;
    assert_eq!(status, 400, "until before since is refused");
    let (_, none) = b.get("/api/v1/events?kind=timed_out&until=10m").await;
    assert!(none["events"].as_array().unwrap().is_empty(), "nothing timed out more than 10 minutes ago");
}

async fn cancel_pending_and_running(backend: Backend) {
    let b = berth(backend).await;
    let running = b.submit(sleeper(&b, "one", "runner", 0)).await;
    b.wait_state(&running, &["running"], SECS(10)).await;
    let pid = pid_of(&b, "runner").await;
    let pending = b.submit(sleeper(&b, "one", "waiter", 0)).await;
    assert_eq!(b.job(&pending).await["state"], "pending");
    let (status, j) = b.post(&format!("/api/v1/jobs/{pending}/cancel"), &json!({})).await;
    assert_eq!((status, j["state"].as_str()), (200, Some("cancelled")), "{j}");
    let (status, j) = b.post(&format!("/api/v1/jobs/{running}/cancel"), &json!({})).await;
    assert_eq!((status, j["state"].as_str()), (200, Some("cancelled")), "{j}");
    assert!(eventually(SECS(5), || !alive(pid)).await, "cancelled process {pid} still alive");
    assert!(!b.dir.join("waiter.pid").exists(), "the cancelled pending job never ran");
    // Cancelling again: 409; an unknown job: 404.
    assert_eq!(b.post(&format!("/api/v1/jobs/{running}/cancel"), &json!({})).await.0, 409);
    assert_eq!(b.post("/api/v1/jobs/j-nope/cancel", &json!({})).await.0, 404);
    assert_eq!(b.job(&running).await["reason"], "cancelled by anonymous");
}

async fn failed_runs_are_retried(backend: Backend) {
    let b = berth(backend).await;
    let marker = b.dir.join("marker");
    let mut flaky = job("burst", &format!("test -f {m} || {{ touch {m}; exit 1; }}", m = marker.display()));
    flaky["max_retries"] = json!(2);
    let flaky = b.submit(flaky).await;
    let mut hopeless = job("burst", "exit 7");
    hopeless["max_retries"] = json!(2);
    let hopeless = b.submit(hopeless).await;
    let ok = b.wait_state(&flaky, &["succeeded"], SECS(20)).await;
    assert_eq!((ok["runs"].as_i64(), ok["retries"].as_i64()), (Some(2), Some(1)), "{ok}");
    let bad = b.wait_state(&hopeless, &["failed"], SECS(20)).await;
    assert_eq!((bad["runs"].as_i64(), bad["retries"].as_i64(), bad["exit_code"].as_i64()), (Some(3), Some(2), Some(7)), "{bad}");
    assert_eq!(b.events(&format!("job={hopeless}&kind=retried")).await.len(), 2);
}

async fn priority_change_reorders_the_queue(backend: Backend) {
    let b = berth(backend).await;
    let gate = b.dir.join("gate");
    let order = b.dir.join("order");
    let blocker = b.submit(job("one", &format!("while [ ! -f {} ]; do sleep 0.05; done", gate.display()))).await;
    b.wait_state(&blocker, &["running"], SECS(10)).await;
    let mut ids = Vec::new();
    for (name, prio) in [("a", 1), ("b", 2)] {
        let mut j = job("one", &format!("echo {name} >> {}", order.display()));
        j["priority"] = json!(prio);
        ids.push(b.submit(j).await);
    }
    // Positions are the loop's: wait for the cycle that ranks the two.
    let positions = async |want: [i64; 2]| {
        let got = [b.job(&ids[0]).await["position"].clone(), b.job(&ids[1]).await["position"].clone()];
        if got == want.map(|p| json!(p)) {
            Ok(())
        } else {
            Err(format!("positions of a, b: {got:?}"))
        }
    };
    wait_until("b (priority 2) first, a second", SECS(10), async || positions([2, 1]).await).await;
    let (status, j) = b.post(&format!("/api/v1/jobs/{}/priority", ids[0]), &json!({"priority": 5})).await;
    assert_eq!((status, j["priority"].as_i64()), (200, Some(5)), "{j}");
    wait_until("a (now priority 5) moved ahead of b", SECS(10), async || positions([1, 2]).await).await;
    let (_, q) = b.get("/api/v1/queues/one").await;
    assert_eq!(q["pending"][0]["id"], json!(ids[0]), "{q}");
    std::fs::write(&gate, "").unwrap();
    b.wait_all_ended(&ids, SECS(20)).await;
    assert_eq!(std::fs::read_to_string(&order).unwrap(), "a\nb\n");
    // Outside the rule's bounds with `force_update`: clamped.
    let late = b.submit(job("one", "sleep 5")).await;
    let (_, j) = b.post(&format!("/api/v1/jobs/{late}/priority"), &json!({"priority": 99})).await;
    assert_eq!(j["priority"], 9);
}

async fn a_stage_respects_max_concurrent(backend: Backend) {
    let b = berth(backend).await;
    let jobs: Vec<Value> = (0..6)
        .map(|i| json!({"name": format!("part{i}"), "entrypoint": format!("sleep 0.3; echo {i} > out.txt"), "labels": {"team": "burst"}, "resources": {"cpu": 1}, "outputs": ["out.txt"]}))
        .collect();
    let (status, created) = b.post("/api/v1/stages", &json!({"name": "sweep", "jobs": jobs, "parallelism": {"max_concurrent": 2, "retry_max": 1}})).await;
    assert_eq!(status, 201, "{created}");
    let stage = created["stage_id"].as_str().unwrap().to_string();
    let ids: Vec<String> = created["job_ids"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
    assert_eq!(ids.len(), 6);
    let (_, status_now) = b.get(&format!("/api/v1/stages/{stage}")).await;
    assert_eq!(status_now["done"], false);
    b.wait_all_ended(&ids, SECS(30)).await;
    let events: Vec<Value> = b.events("queue=burst").await.into_iter().filter(|e| ids.iter().any(|id| e["job_id"] == json!(id))).collect();
    let peak = peak_usage(&events, |_| 1.0);
    assert_eq!(peak["burst"], 2.0, "the queue allows 4, the stage 2");
    let (_, status_done) = b.get(&format!("/api/v1/stages/{stage}")).await;
    assert_eq!(status_done["done"], true);
    assert_eq!(status_done["counts"]["succeeded"], 6);
    let (_, results) = b.get(&format!("/api/v1/stages/{stage}/results")).await;
    assert_eq!(results["success"], true);
    assert_eq!(results["job_statuses"][3]["status"], "completed");
    assert_eq!(results["job_statuses"][3]["return_code"], 0);
    assert_eq!(results["artifacts"]["part3/out.txt"], "3\n");
}

/// Seed 001's Python example, unchanged but for the port (requests, from PyPI).
async fn the_mlumina_example_works(backend: Backend) {
    // The example's working dir is under /home, outside the default roots.
    let b = Berth::start(backend, &["--workdir-root", "/home"]).await;
    let script = include_str!("data/mlumina_example.py").replace("8264", &b.port.to_string());
    let out = std::process::Command::new("python3").arg("-c").arg(&script).output().expect("python3 runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(printed.starts_with("200 "), "{printed}");
    let reply: Value = serde_json::from_str(printed.trim_start_matches("200 ").trim().replace('\'', "\"").as_str()).unwrap();
    let id = reply["task_id"].as_str().unwrap().to_string();
    let j = b.job(&id).await;
    assert_eq!(j["name"], "my_job");
    assert_eq!(j["priority"], 1);
    assert_eq!(j["resources"], json!({"cpu": 2.0, "memory_gb": 4.0}));
    assert_eq!(j["timeout_s"], 300);
    // /home/ray/src/mlumina is not on this machine: the job fails with that reason.
    let j = b.wait_state(&id, &["failed"], SECS(10)).await;
    assert!(j["reason"].as_str().unwrap().contains("/home/ray/src/mlumina"), "{j}");
    // Change priority and cancel by task_id, as mlumina's clients do.
    let (status, body) = b.post("/add_task", &json!({"name": "t", "entrypoint": "sleep 30", "runtime_env": {}, "priority": 0, "cpu": 1, "gpu": 0, "memory": 0, "timeout": 0})).await;
    assert_eq!(status, 200, "{body}");
    let task = body["task_id"].as_str().unwrap().to_string();
    let (status, body) = b.post("/change_task_priority", &json!({"task_id": task, "priority": 7})).await;
    assert_eq!((status, body["priority"].as_i64()), (200, Some(7)), "{body}");
    let (status, body) = b.post("/cancel_task", &json!({"task_id": task})).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("cancelled")), "{body}");
    let (status, body) = b.post("/add_task", &json!({"name": "t", "entrypoint": "true", "runtime_env": {}, "priority": 0, "cpu": 0, "gpu": 0, "memory": 0, "timeout": 0})).await;
    assert_eq!(status, 422);
    assert_eq!(body["error"]["message"], "task must request at least one resource");
}

async fn kill_9_during_a_burst_loses_and_duplicates_nothing(backend: Backend) {
    let mut b = berth(backend).await;
    let ran = b.dir.join("ran");
    let mut ids = Vec::new();
    for i in 0..120 {
        ids.push(b.submit(job("burst", &format!("sleep 0.{}; echo $BERTH_JOB_ID >> {}", 1 + i % 4, ran.display()))).await);
        if i == 60 {
            b.kill9();
            b.spawn().await;
        }
    }
    // Killed again mid-burst, once the restarted server has run a job submitted after the
    // first kill (the jobs log their ids as they end).
    let after_restart = &ids[61..];
    wait_until("a job submitted after the first restart to have run", SECS(60), async || {
        let lines = std::fs::read_to_string(&ran).unwrap_or_default();
        if lines.lines().any(|l| after_restart.iter().any(|id| id == l)) {
            Ok(())
        } else {
            Err(format!("{} jobs ran, none of the last 59", lines.lines().count()))
        }
    })
    .await;
    b.kill9();
    b.spawn().await;
    let jobs = b.wait_all_ended(&ids, SECS(120)).await;
    assert_eq!(jobs.len(), 120, "every submitted job is still known");
    let states: BTreeMap<String, usize> = jobs.iter().fold(BTreeMap::new(), |mut m, j| {
        *m.entry(j["state"].as_str().unwrap().to_string()).or_default() += 1;
        m
    });
    assert_eq!(states.get("succeeded"), Some(&120), "{states:?}\n{}", b.log());
    let lines = std::fs::read_to_string(&ran).unwrap();
    let mut count: HashMap<&str, usize> = HashMap::new();
    lines.lines().for_each(|l| *count.entry(l).or_default() += 1);
    for id in &ids {
        assert_eq!(count.get(id.as_str()), Some(&1), "job {id} ran {:?} times", count.get(id.as_str()));
    }
    let events = b.events("queue=burst").await;
    assert!(peak_usage(&events, |_| 1.0)["burst"] <= 4.0);
}



/// The local backend starts a run before its admission is written (the journal records the
/// start first). A server killed between the two leaves a run the database lists as pending:
/// at restart one that ended counts as the job's run (not run again), and one still going is
/// stopped and the job runs afresh under a new run id. Staged by hand: pending jobs, then
/// journal lines as such a server leaves them.
async fn runs_started_before_their_admission_was_written_are_found_at_restart(backend: Backend) {
    let mut b = berth(backend).await;
    b.apply(&CONFIG.replace("nominal_quota: 1}", "nominal_quota: 0}")).await;
    let marker = b.dir.join("ran");
    let running = b.submit(job("one", &format!("echo running >> {}", marker.display()))).await;
    let ended = b.submit(job("one", &format!("echo ended >> {}", marker.display()))).await;
    b.kill9();

    let mut orphan = std::process::Command::new("sleep").arg("300").process_group(0).spawn().unwrap();
    let pid = orphan.id() as i32;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let start: u64 = stat.rsplit_once(')').unwrap().1.split_whitespace().nth(19).unwrap().parse().unwrap();
    let journal = b.dir.join("data/runs/journal/999");
    std::fs::write(&journal, format!("pid {running}-r1 {pid} {start}\npid {ended}-r1 999999999 1\nexit {ended}-r1 0\n")).unwrap();
    b.spawn().await;

    let stopped = eventually(SECS(10), || matches!(orphan.try_wait(), Ok(Some(_)))).await;
    assert!(stopped, "the run the database missed is stopped; log:\n{}", b.log());
    let done = b.wait_state(&ended, &["succeeded"], SECS(10)).await;
    assert_eq!(done["runs"], 1, "{done}");
    let waiting = b.job(&running).await;
    assert_eq!((waiting["state"].as_str(), waiting["runs"].as_i64()), (Some("pending"), Some(1)), "{waiting}");
    let requeued = b.events(&format!("job={running}&kind=requeued")).await;
    assert!(requeued.iter().any(|e| e["message"].as_str().is_some_and(|m| m.contains("before its admission was written"))), "{requeued:?}");

    b.apply(CONFIG).await;
    let done = b.wait_state(&running, &["succeeded"], SECS(10)).await;
    assert_eq!(done["runs"], 2, "the next run has a new id: {done}");
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "running\n", "the ended run is not run again");
}

async fn config_changes_reach_pending_jobs_and_spare_running_ones(backend: Backend) {
    let b = berth(backend).await;
    let runner = b.submit(sleeper(&b, "one", "cfg-runner", 0)).await;
    b.wait_state(&runner, &["running"], SECS(10)).await;
    let pid = pid_of(&b, "cfg-runner").await;
    let waiter = b.submit(job("one", "echo moved")).await;
    assert_eq!(b.job(&waiter).await["state"], "pending");
    // Quota of `one` down to 0: the running job keeps running.
    let closed = b.apply(&CONFIG.replace("nominal_quota: 1}", "nominal_quota: 0}")).await;
    // First proof the loop took the apply in: the waiting job is routed again under the new
    // version, in the cycle that would also have stopped the runner (its stop is written in
    // the same commit).
    wait_until("the waiting job to be routed under the apply that closed its queue", SECS(10), async || {
        let w = b.job(&waiter).await;
        if w["config_version"] == closed {
            Ok(())
        } else {
            Err(w.to_string())
        }
    })
    .await;
    assert_eq!(b.job(&runner).await["state"], "running", "an apply that takes the quota away does not stop a running job");
    assert!(alive(pid));
    // Team `one` now routes to `burst`: the waiting job moves there and runs at once.
    let moved = CONFIG.replace("values: [burst]", "values: [burst, one]");
    let version = b.apply(&moved).await;
    let done = b.wait_state(&waiter, &["succeeded"], SECS(10)).await;
    assert_eq!(done["queue"], "burst");
    assert_eq!(done["config_version"], version);
    assert!(b.events(&format!("job={waiter}&kind=rerouted")).await.len() == 1);
    assert_eq!(b.job(&runner).await["state"], "running", "a running job is never moved or killed by an apply");
    assert!(alive(pid), "the runner's process survived both applies");
}

/// More jobs waiting in a queue than a quick cycle offers the engine (32): they still run in
/// queue order within quota, the last one gets its position and reason, and a small job
/// behind many that cannot fit starts in the very cycle that makes room for it.
async fn a_long_queue_is_served_in_order_and_explained(backend: Backend) {
    let b = berth(backend).await;
    let gate = b.dir.join("gate");
    let wait_gate = |g: &std::path::Path| format!("while [ ! -f {} ]; do sleep 0.05; done", g.display());
    let blocker = b.submit(job("one", &wait_gate(&gate))).await;
    b.wait_state(&blocker, &["running"], SECS(10)).await;
    let mut ids = Vec::new();
    for _ in 0..45 {
        ids.push(b.submit(job("one", "true")).await);
    }
    let last = ids.last().unwrap().clone();
    let deadline = std::time::Instant::now() + SECS(5);
    let seen = loop {
        let j = b.job(&last).await;
        if j["position"] == 45 || std::time::Instant::now() > deadline {
            break j;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(seen["position"], 45, "{seen}");
    assert!(seen["reason"].as_str().is_some_and(|r| r.contains("queue one")), "{seen}");
    std::fs::write(&gate, "").unwrap();
    b.wait_all_ended(&ids, SECS(60)).await;
    let events = b.events("queue=one&kind=admitted,started,finished").await;
    let admitted: Vec<&str> = events.iter().filter(|e| e["kind"] == "admitted").filter_map(|e| e["job_id"].as_str()).filter(|id| ids.iter().any(|i| i == id)).collect();
    assert_eq!(admitted, ids.iter().map(String::as_str).collect::<Vec<_>>(), "fifo order");
    assert_eq!(peak_usage(&events, |_| 1.0)["one"], 1.0);

    // `burst` (quota 4): a holder of all 4, 40 jobs asking 5 (never fit), then one asking 1.
    let gate = b.dir.join("gate2");
    let mut holder = job("burst", &wait_gate(&gate));
    holder["resources"]["cpu"] = json!(4);
    let holder = b.submit(holder).await;
    b.wait_state(&holder, &["running"], SECS(10)).await;
    for _ in 0..40 {
        let mut big = job("burst", "true");
        big["resources"]["cpu"] = json!(5);
        b.submit(big).await;
    }
    let small = b.submit(job("burst", "true")).await;
    assert_eq!(b.job(&small).await["state"], "pending");
    std::fs::write(&gate, "").unwrap();
    b.wait_state(&small, &["succeeded"], SECS(10)).await;
    let admitted = b.events(&format!("job={small}&kind=admitted")).await;
    let freed = b.events(&format!("job={holder}&kind=finished")).await;
    assert_eq!(admitted[0]["at"], freed[0]["at"], "admitted in the cycle that saw the holder end");
}

/// A job submitted after an apply returned is decided under that config: with `one`'s quota
/// at 0 it waits, and runs only under the next version that gives the quota back.
async fn a_submission_after_an_apply_is_decided_under_it(backend: Backend) {
    let b = berth(backend).await;
    let mut submitted = Vec::new();
    for _ in 0..15 {
        let closed = b.apply(&CONFIG.replace("nominal_quota: 1}", "nominal_quota: 0}")).await;
        submitted.push((closed, b.submit(job("one", "true")).await));
        b.apply(CONFIG).await;
    }
    let ids: Vec<String> = submitted.iter().map(|(_, id)| id.clone()).collect();
    b.wait_all_ended(&ids, SECS(30)).await;
    for (closed, id) in &submitted {
        let admitted = b.events(&format!("job={id}&kind=admitted")).await;
        let version = admitted[0]["config_version"].as_i64().unwrap();
        assert!(version > *closed, "{id} was admitted under version {version}, before the apply ({closed}) that closed its queue");
    }
}

/// `serve --simulate` runs nothing: a job lasts what its `sleep` says, any other ends at
/// once, and quota, order and preemption are as on a real host.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_simulated_host_runs_nothing_but_schedules_as_a_real_one() {
    let b = Berth::start(Backend::Sqlite, &["--local-cpus", "64", "--simulate"]).await;
    b.apply(CONFIG).await;
    let marker = b.dir.join("ran");
    let short = b.submit(job("one", "sleep 1")).await;
    let other = b.submit(job("one", &format!("touch {}", marker.display()))).await;
    b.wait_state(&short, &["running"], SECS(10)).await;
    assert_eq!(b.job(&other).await["state"], "pending", "queue `one` holds 1 CPU");
    let done = b.wait_state(&short, &["succeeded"], SECS(10)).await;
    let (started, finished) = (done["started_at"].as_str().unwrap(), done["finished_at"].as_str().unwrap());
    let lasted = chrono::DateTime::parse_from_rfc3339(finished).unwrap() - chrono::DateTime::parse_from_rfc3339(started).unwrap();
    assert!(lasted.num_milliseconds() >= 900, "`sleep 1` lasted {lasted} ({done})");
    b.wait_state(&other, &["succeeded"], SECS(10)).await;
    assert!(!marker.exists(), "a simulated job's command never runs");
    // Preemption stops a simulated run as it would a process: the victim waits again.
    let mut low = job("lp", "sleep 300");
    low["priority"] = json!(1);
    low["resources"]["cpu"] = json!(2);
    let low = b.submit(low).await;
    b.wait_state(&low, &["running"], SECS(10)).await;
    let mut high = job("lp", "sleep 300");
    high["priority"] = json!(50);
    high["resources"]["cpu"] = json!(2);
    let high = b.submit(high).await;
    b.wait_state(&high, &["running"], SECS(10)).await;
    let victim = b.job(&low).await;
    assert_eq!((victim["state"].as_str(), victim["runs"].as_i64()), (Some("pending"), Some(1)), "{victim}");
    let (status, j) = b.post(&format!("/api/v1/jobs/{high}/cancel"), &json!({})).await;
    assert_eq!((status, j["state"].as_str()), (200, Some("cancelled")), "{j}");
    let back = b.wait_state(&low, &["running"], SECS(10)).await;
    assert_eq!(back["runs"], 2, "{back}");
}

on_both_databases!(
    routes_and_rejects_with_reasons,
    a_burst_of_500_never_exceeds_quota,
    high_priority_preempts_only_where_allowed,
    timeout_kills_the_whole_process_tree,
    cancel_pending_and_running,
    failed_runs_are_retried,
    priority_change_reorders_the_queue,
    a_stage_respects_max_concurrent,
    the_mlumina_example_works,
    kill_9_during_a_burst_loses_and_duplicates_nothing,
    runs_started_before_their_admission_was_written_are_found_at_restart,
    config_changes_reach_pending_jobs_and_spare_running_ones,
    a_long_queue_is_served_in_order_and_explained,
    a_submission_after_an_apply_is_decided_under_it,
);
