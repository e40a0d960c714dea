//! Several `berth serve` on one PostgreSQL database (docs/operations.md, "Several
//! replicas"): real binaries, the test PostgreSQL, the local backend, all replicas on one
//! host sharing a data dir. Every replica takes submissions; one leads. Killing, pausing
//! the leader or restarting PostgreSQL loses no job and runs none twice.
//!
//! The PostgreSQL tests are skipped, saying why, when `BERTH_TEST_PG_URL` is not set; the
//! PostgreSQL restart also needs `BERTH_PG_DATA` and `BERTH_PG_PORT` naming that server
//! (`.ci/pg.sh` restarts it), so it never restarts a server other tests share by accident.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use common::berth::Berth;
use common::{wait_until, Backend};
use serde_json::{json, Value};

const SECS: fn(u64) -> Duration = Duration::from_secs;

/// One queue for the burst: 8 CPUs of quota, jobs of one CPU each.
const CONFIG: &str = r#"
resource_flavors:
  - name: local
    selector:
      - {key: backend, operator: in, values: [local]}
resource_queues:
  - name: burst
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 8}]}]
scheduling_rules:
  - resource_queue: burst
"#;

/// Held for reading by every PostgreSQL test here, for writing by the one that restarts
/// PostgreSQL: the tests of this file run at once, and a restart must not land in another's.
static PG: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// Whether the PostgreSQL tests can run; says why not.
fn pg_or_skip(test: &str) -> bool {
    if std::env::var("BERTH_TEST_PG_URL").is_ok() {
        return true;
    }
    eprintln!("{test}: skipped: BERTH_TEST_PG_URL is not set (`.ci/pg.sh start` prints one)");
    false
}

/// `n` replicas on a fresh PostgreSQL database, CONFIG applied; named r0, r1, ….
async fn replicas(n: usize) -> Vec<Berth> {
    replicas_with(n, &["--local-cpus", "64"], CONFIG).await
}

/// `n` replicas with the backend flags `backends`, `config` applied; named r0, r1, ….
async fn replicas_with(n: usize, backends: &[&str], config: &str) -> Vec<Berth> {
    let flags = |i: usize| {
        let mut f: Vec<String> = backends.iter().map(|s| s.to_string()).collect();
        f.extend(["--replica-name".to_string(), format!("r{i}"), "--lease-ms".into(), "2000".into()]);
        f
    };
    let f0 = flags(0);
    let first = Berth::start(Backend::Postgres, &f0.iter().map(String::as_str).collect::<Vec<_>>()).await;
    first.apply(config).await;
    let mut all = vec![first];
    for i in 1..n {
        let f = flags(i);
        let r = Berth::replica_of(&all[0], &f.iter().map(String::as_str).collect::<Vec<_>>()).await;
        all.push(r);
    }
    all
}

/// What `/readyz` of a replica says leads, if it answers.
async fn leader_seen_by(r: &Berth) -> Option<String> {
    let resp = reqwest::Client::new().get(format!("{}/readyz", r.url)).timeout(SECS(2)).send().await.ok()?;
    let text = resp.text().await.ok()?;
    let line = text.lines().find(|l| l.starts_with("leader: "))?;
    Some(line.trim_start_matches("leader: ").to_string())
}

/// The index of the replica that says it leads (its `/readyz` says "this replica"),
/// skipping `not`.
async fn wait_for_leader(rs: &[Berth], not: Option<usize>) -> usize {
    wait_until("a replica to lead", SECS(30), async || {
        for (i, r) in rs.iter().enumerate() {
            if Some(i) == not {
                continue;
            }
            if leader_seen_by(r).await.is_some_and(|l| l.ends_with("(this replica)")) {
                return Ok(i);
            }
        }
        Err("no replica says it leads".to_string())
    })
    .await
}

fn job(n: usize, ran: &std::path::Path) -> Value {
    json!({
        "name": format!("burst-{n}"),
        "submission_id": format!("burst-{n}"),
        "entrypoint": format!("sleep 0.{}; echo $BERTH_JOB_ID >> {}", 1 + n % 3, ran.display()),
        "resources": { "cpu": 1 },
    })
}

/// Submits `body` to the replicas from `start` on, round the ring, until one stores it:
/// a replica that is down is skipped, and a submission whose answer was lost is found
/// again by its submission id (stored once, whatever happened to the answer).
async fn submit_somewhere(urls: &[String], start: usize, body: &Value) -> String {
    let http = reqwest::Client::builder().timeout(SECS(10)).build().unwrap();
    let sid = body["submission_id"].as_str().unwrap();
    let deadline = Instant::now() + SECS(120);
    let mut i = start;
    loop {
        let url = &urls[i % urls.len()];
        // Each refusal is printed: the test's output shows it if the test fails.
        match http.post(format!("{url}/api/v1/jobs")).json(body).send().await {
            Ok(r) => {
                let status = r.status().as_u16();
                let answer: Value = r.json().await.unwrap_or(Value::Null);
                if status == 201 {
                    return answer["id"].as_str().unwrap().to_string();
                }
                // 422 is what Berth answers a submission id it already holds (docs/api.md).
                if status == 422 && answer.to_string().contains("already exists") {
                    if let Ok(r) = http.get(format!("{url}/api/v1/jobs/{sid}")).send().await {
                        let found: Value = r.json().await.unwrap_or(Value::Null);
                        if let Some(id) = found["id"].as_str() {
                            return id.to_string();
                        }
                    }
                }
                eprintln!("submitting {sid} to {url}: {status} {answer}");
            }
            Err(e) => eprintln!("submitting {sid} to {url}: {e}"),
        }
        assert!(Instant::now() < deadline, "no replica stored {sid}");
        i += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `count` jobs that each write their id to `ran`.
fn jobs(count: usize, ran: &std::path::Path) -> Vec<Value> {
    (0..count).map(|n| job(n, ran)).collect()
}

/// Submits `bodies` round-robin, one every `every`, on a task; `done` counts them.
fn burst(urls: Vec<String>, bodies: Vec<Value>, every: Duration, done: Arc<AtomicUsize>) -> tokio::task::JoinHandle<Vec<String>> {
    tokio::spawn(async move {
        let mut ids = Vec::with_capacity(bodies.len());
        for (n, body) in bodies.iter().enumerate() {
            ids.push(submit_somewhere(&urls, n, body).await);
            done.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(every).await;
        }
        ids
    })
}

/// The first admission after `after` (wall clock) any live replica's event log shows.
async fn next_admission(rs: &[Berth], alive: &[usize], after: SystemTime) -> SystemTime {
    let since = chrono::DateTime::<chrono::Utc>::from(after);
    wait_until("an admission after the kill", SECS(60), async || {
        for &i in alive {
            let q = format!("kind=admitted&since={}", since.to_rfc3339_opts(chrono::SecondsFormat::Micros, true).replace('+', "%2B"));
            let Ok(r) = reqwest::Client::new().get(format!("{}/api/v1/events?max_items=1&{q}", rs[i].url)).timeout(SECS(2)).send().await else { continue };
            let Ok(page) = r.json::<Value>().await else { continue };
            if let Some(at) = page["events"].as_array().and_then(|e| e.first()).and_then(|e| e["at"].as_str()) {
                let at: chrono::DateTime<chrono::Utc> = at.parse().unwrap();
                return Ok(SystemTime::from(at));
            }
        }
        Err("no admission yet".to_string())
    })
    .await
}

/// Every job ran once and succeeded once: the jobs' own record of running (`ran`), and
/// Berth's records (see [`assert_each_succeeded_once`]).
async fn assert_each_ran_once(r: &Berth, ids: &[String], ran: &std::path::Path) {
    assert_each_succeeded_once(r, ids, SECS(180)).await;
    let lines = std::fs::read_to_string(ran).unwrap_or_default();
    let mut runs: HashMap<&str, usize> = HashMap::new();
    lines.lines().for_each(|l| *runs.entry(l).or_default() += 1);
    for id in ids {
        assert_eq!(runs.get(id.as_str()), Some(&1), "job {id} ran {:?} times", runs.get(id.as_str()));
    }
}

/// Every job ended `succeeded` after one run, with one `started` and one `finished` event
/// that says succeeded (Berth's events, read on `r`).
async fn assert_each_succeeded_once(r: &Berth, ids: &[String], within: Duration) {
    let jobs = r.wait_all_ended(ids, within).await;
    let states: BTreeMap<String, usize> = jobs.iter().fold(BTreeMap::new(), |mut m, j| {
        *m.entry(j["state"].as_str().unwrap().to_string()).or_default() += 1;
        m
    });
    assert_eq!(states.get("succeeded"), Some(&ids.len()), "{states:?}");
    for j in &jobs {
        assert_eq!(j["runs"], 1, "{j:#}");
    }
    let count = |events: Vec<Value>| {
        let mut per: HashMap<String, usize> = HashMap::new();
        for e in events {
            *per.entry(e["job_id"].as_str().unwrap_or("").to_string()).or_default() += 1;
        }
        per
    };
    let started = count(r.events("kind=started").await);
    let finished = count(r.events("kind=finished").await.into_iter().filter(|e| e["message"] == "succeeded").collect());
    for id in ids {
        assert_eq!(started.get(id), Some(&1), "job {id}: started events");
        assert_eq!(finished.get(id), Some(&1), "job {id}: succeeded events");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_survives_two_leader_kills() {
    if !pg_or_skip("a_burst_survives_two_leader_kills") {
        return;
    }
    let _pg = PG.read().await;
    let mut rs = replicas(3).await;
    let ran = rs[0].dir.join("ran");
    let urls: Vec<String> = rs.iter().map(|r| r.url.clone()).collect();
    let done = Arc::new(AtomicUsize::new(0));
    let submitting = burst(urls, jobs(200, &ran), Duration::from_millis(25), done.clone());
    let mut waits = Vec::new();
    for kill in 1..=2 {
        let at_least = kill * 60;
        burst_reaches(&rs, &done, at_least).await;
        let leader = wait_for_leader(&rs, None).await;
        let killed_at = SystemTime::now();
        rs[leader].kill9();
        let alive: Vec<usize> = (0..rs.len()).filter(|&i| i != leader).collect();
        let admitted = next_admission(&rs, &alive, killed_at).await;
        let wait = admitted.duration_since(killed_at).unwrap_or_default();
        println!("kill {kill} of the leader (r{leader}) → next admission: {:.2} s", wait.as_secs_f64());
        waits.push(wait);
        let now_leads = wait_for_leader(&rs, Some(leader)).await;
        assert_ne!(now_leads, leader);
        rs[leader].spawn().await;
    }
    let ids = submitting.await.unwrap();
    assert_each_ran_once(&rs[0], &ids, &ran).await;
    // Each replica says the same one leads.
    let seen: Vec<String> = leaders_seen(&rs).await;
    let names: Vec<&str> = seen.iter().map(|l| l.trim_end_matches(" (this replica)")).collect();
    assert!(names.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
    assert_eq!(seen.iter().filter(|l| l.ends_with("(this replica)")).count(), 1, "{seen:?}");
}

/// Waits (up to 60 s) until the burst has `at_least` jobs submitted; if it stalls, fails with
/// the end of each replica's log.
async fn burst_reaches(rs: &[Berth], done: &AtomicUsize, at_least: usize) {
    let deadline = Instant::now() + SECS(60);
    while done.load(Ordering::Relaxed) < at_least {
        let seen = done.load(Ordering::Relaxed);
        assert!(Instant::now() < deadline, "waited 60 s for the burst to go on: {seen} submitted; the replicas' logs end:\n{}", log_tails(rs, 40));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The last `lines` lines of each replica's log, for a failure message.
fn log_tails(rs: &[Berth], lines: usize) -> String {
    let mut out = String::new();
    for (i, r) in rs.iter().enumerate() {
        let log = r.log();
        let tail: Vec<&str> = log.lines().rev().take(lines).collect();
        out.push_str(&format!("--- r{i} ({})\n", r.url));
        tail.iter().rev().for_each(|l| out.push_str(&format!("{l}\n")));
    }
    out
}

/// What each replica's `/readyz` says leads.
async fn leaders_seen(rs: &[Berth]) -> Vec<String> {
    let mut out = Vec::new();
    for r in rs {
        out.push(leader_seen_by(r).await.unwrap_or_default());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_leader_starts_nothing_after_its_lease() {
    if !pg_or_skip("a_paused_leader_starts_nothing_after_its_lease") {
        return;
    }
    let _pg = PG.read().await;
    let rs = replicas(2).await;
    let ran = rs[0].dir.join("ran");
    let leader = wait_for_leader(&rs, None).await;
    let other = 1 - leader;
    // Jobs wait in the paused leader's memory (the quota holds 8 at once).
    let mut ids = Vec::new();
    for n in 0..40 {
        ids.push(submit_somewhere(&[rs[leader].url.clone()], 0, &job(n, &ran)).await);
    }
    let pid = rs[leader].pid().unwrap();
    signal(pid, "STOP");
    wait_for_leader(&rs, Some(leader)).await;
    let urls = vec![rs[other].url.clone()];
    for n in 40..60 {
        ids.push(submit_somewhere(&urls, 0, &job(n, &ran)).await);
    }
    signal(pid, "CONT");
    wait_until("the resumed replica to step down", SECS(30), async || {
        let log = rs[leader].log();
        if log.contains("this replica no longer leads") {
            Ok(())
        } else {
            Err(format!("log:\n{log}"))
        }
    })
    .await;
    let log = rs[leader].log();
    let why = ["a commit failed under the leader lease", "the leader lease may have lapsed", "the leader lease was lost"]
        .into_iter()
        .filter(|w| log.contains(w))
        .collect::<Vec<_>>();
    println!("the resumed leader stopped because: {why:?}");
    assert_each_ran_once(&rs[other], &ids, &ran).await;
    assert_eq!(wait_for_leader(&rs, None).await, other, "the new leader keeps the lease");
    // The resumed replica began no run: every run key has one pid line in the journal.
    let mut pids: HashMap<String, usize> = HashMap::new();
    for entry in std::fs::read_dir(rs[0].data_dir.join("runs/journal")).unwrap().flatten() {
        for line in std::fs::read_to_string(entry.path()).unwrap_or_default().lines() {
            if let Some(key) = line.strip_prefix("pid ").and_then(|l| l.split_whitespace().next()) {
                *pids.entry(key.to_string()).or_default() += 1;
            }
        }
    }
    assert!(pids.values().all(|&n| n == 1), "a run began twice: {pids:?}");
}

/// Sends signal `name` (STOP, CONT) to process `pid`.
fn signal(pid: i32, name: &str) {
    let status = std::process::Command::new("kill").arg(format!("-{name}")).arg(pid.to_string()).status().unwrap();
    assert!(status.success(), "kill -{name} {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_ride_out_a_postgresql_restart() {
    if !pg_or_skip("replicas_ride_out_a_postgresql_restart") {
        return;
    }
    let (Ok(data), Ok(port)) = (std::env::var("BERTH_PG_DATA"), std::env::var("BERTH_PG_PORT")) else {
        eprintln!("replicas_ride_out_a_postgresql_restart: skipped: BERTH_PG_DATA and BERTH_PG_PORT must name the test PostgreSQL to restart it");
        return;
    };
    let _pg = PG.write().await;
    let rs = replicas(2).await;
    let ran = rs[0].dir.join("ran");
    let urls: Vec<String> = rs.iter().map(|r| r.url.clone()).collect();
    let done = Arc::new(AtomicUsize::new(0));
    let submitting = burst(urls, jobs(80, &ran), Duration::from_millis(40), done.clone());
    wait_until("the burst to start", SECS(60), async || if done.load(Ordering::Relaxed) >= 30 { Ok(()) } else { Err("not yet".to_string()) }).await;
    let pg = concat!(env!("CARGO_MANIFEST_DIR"), "/../.ci/pg.sh");
    let run = |step: &str| std::process::Command::new(pg).arg(step).env("BERTH_PG_DATA", &data).env("BERTH_PG_PORT", &port).stdout(std::process::Stdio::null()).status().unwrap();
    run("stop");
    // pg_ctl gives up waiting after 60 s, and a shutdown checkpoint over many test
    // databases can take longer: wait for the server to be gone before starting it.
    let pid_file = std::path::Path::new(&data).join("postmaster.pid");
    wait_until("PostgreSQL to stop", SECS(600), async || if pid_file.exists() { Err("still stopping".to_string()) } else { Ok(()) }).await;
    assert!(run("start").success(), "pg.sh start");
    println!("PostgreSQL restarted after {} submissions", done.load(Ordering::Relaxed));
    let ids = submitting.await.unwrap();
    assert_each_ran_once(&rs[1], &ids, &ran).await;
    wait_for_leader(&rs, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_local_run_on_a_dead_replicas_host_fails_as_node_lost_and_is_retried() {
    if !pg_or_skip("a_local_run_on_a_dead_replicas_host_fails_as_node_lost_and_is_retried") {
        return;
    }
    let _pg = PG.read().await;
    // Two "hosts": each replica its own local node and data dir.
    let a = Berth::start(Backend::Postgres, &["--local-cpus", "64", "--replica-name", "a", "--local-node", "host-a", "--lease-ms", "2000"]).await;
    a.apply(CONFIG).await;
    wait_for_leader(std::slice::from_ref(&a), None).await;
    let mut rs = vec![a];
    let b_data = std::env::temp_dir().join(format!("berth_rt_host_b_{}", std::process::id()));
    let b = Berth::replica_with_data_dir(&rs[0], b_data.clone(), &["--local-cpus", "64", "--replica-name", "b", "--local-node", "host-b", "--lease-ms", "2000"]).await;
    rs.push(b);
    let marker = rs[0].dir.join("ran");
    let body = json!({
        "name": "long",
        "entrypoint": format!("echo $BERTH_RUN >> {}; sleep 600", marker.display()),
        "resources": { "cpu": 1 },
        "max_retries": 1,
    });
    let id = rs[0].submit(body).await;
    let running = rs[0].wait_state(&id, &["running"], SECS(30)).await;
    assert_eq!(running["node"], "host-a", "{running:#}");
    rs[0].kill9();
    let job = wait_until("the job to run again on host-b", SECS(60), async || {
        let job = rs[1].job(&id).await;
        if job["state"] == "running" && job["node"] == "host-b" {
            Ok(job)
        } else {
            Err(format!("{job:#}"))
        }
    })
    .await;
    let retried = rs[1].events(&format!("job={id}&kind=retried")).await;
    assert_eq!(retried.len(), 1, "{retried:?}");
    let said = retried[0]["message"].as_str().unwrap();
    assert!(said.starts_with("node lost: the run was on host-a, which the leading replica (on host-b) cannot reach"), "{said}");
    assert_eq!(job["node"], "host-b", "{job:#}");
    assert_eq!(job["retries"], 1, "{job:#}");
    // The first run still goes on on "host-a" (the same machine here): stopped by the test.
    let _ = std::process::Command::new("pkill").arg("-KILL").arg("-f").arg(marker.display().to_string()).status();
    let _ = std::fs::remove_dir_all(&b_data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn commands_made_on_a_follower_are_carried_out_by_the_leader() {
    if !pg_or_skip("commands_made_on_a_follower_are_carried_out_by_the_leader") {
        return;
    }
    let _pg = PG.read().await;
    let rs = replicas(2).await;
    let leader = wait_for_leader(&rs, None).await;
    let f = &rs[1 - leader];
    // The leader gauge: 1 on the leader, 0 on the follower, each under its replica name.
    for (i, r) in rs.iter().enumerate() {
        let (status, text) = r.get_text("/metrics").await;
        assert_eq!(status, 200);
        let want = format!("berth_leader{{replica=\"r{i}\"}} {}", u8::from(i == leader));
        assert!(text.lines().any(|l| l == want), "r{i} lacks `{want}`:\n{}", text.lines().filter(|l| l.contains("berth_leader")).collect::<Vec<_>>().join("\n"));
    }
    // Eight long jobs fill the quota; a ninth waits.
    let long = |n: usize| json!({ "name": format!("long-{n}"), "entrypoint": "sleep 600", "resources": { "cpu": 1 } });
    let mut ids = Vec::new();
    for n in 0..9 {
        ids.push(f.submit(long(n)).await);
    }
    for id in &ids[..8] {
        f.wait_state(id, &["running"], SECS(30)).await;
    }
    let waiting = &ids[8];
    assert_eq!(f.job(waiting).await["state"], "pending");
    // Hold and release, a priority change, a cancel: each answered by the follower with the
    // job as the leader left it.
    let (status, held) = f.post(&format!("/api/v1/jobs/{waiting}/hold"), &json!({})).await;
    assert_eq!((status, held["held_by"].as_str()), (200, Some("anonymous")), "{held:#}");
    let (status, released) = f.post(&format!("/api/v1/jobs/{waiting}/release"), &json!({})).await;
    assert_eq!(status, 200, "{released:#}");
    assert!(released["held_by"].is_null(), "{released:#}");
    let (status, raised) = f.post(&format!("/api/v1/jobs/{waiting}/priority"), &json!({ "priority": 5 })).await;
    assert_eq!((status, raised["priority"].as_i64()), (200, Some(5)), "{raised:#}");
    let (status, cancelled) = f.post(&format!("/api/v1/jobs/{}/cancel", ids[0]), &json!({})).await;
    assert_eq!((status, cancelled["state"].as_str()), (200, Some("cancelled")), "{cancelled:#}");
    // The freed slot goes to the waiting job; a second cancel of the ended job is a conflict.
    f.wait_state(waiting, &["running"], SECS(30)).await;
    let (status, again) = f.post(&format!("/api/v1/jobs/{}/cancel", ids[0]), &json!({})).await;
    assert_eq!(status, 409, "{again:#}");
    for id in &ids[1..] {
        let (status, _) = f.post(&format!("/api/v1/jobs/{id}/cancel"), &json!({})).await;
        assert_eq!(status, 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_server_on_one_sqlite_file_is_refused() {
    let first = Berth::start(Backend::Sqlite, &[]).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = std::process::Command::new(common::berth::berth_bin())
        .args(["serve", "--anonymous", "--addr", &format!("127.0.0.1:{port}"), "--database-url", &first.db_url])
        .arg("--data-dir")
        .arg(first.dir.join("data2"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the second server runs: {said}");
    assert!(said.contains("another `berth serve` already runs on the SQLite database"), "{said}");
    assert!(said.contains("PostgreSQL"), "{said}");
    // The first goes on serving.
    assert_eq!(first.get_text("/readyz").await.0, 200);
}

/// One queue on the Ray head's node (label pool=test, 4 CPUs), 4 CPUs of quota.
const RAY_CONFIG: &str = r#"
resource_flavors:
  - name: ray-test
    selector:
      - {key: pool, operator: in, values: [test]}
resource_queues:
  - name: burst
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: ray-test, resources: [{name: cpu, nominal_quota: 4}]}]
scheduling_rules:
  - resource_queue: burst
"#;

/// The Ray head the tests share (`.ci/ray.sh start` prints its URL), if set; says why not.
fn ray_or_skip(test: &str) -> Option<String> {
    match std::env::var("BERTH_TEST_RAY_URL") {
        Ok(url) => Some(url.trim_end_matches('/').to_string()),
        Err(_) => {
            eprintln!("{test}: skipped: BERTH_TEST_RAY_URL is not set (`.ci/ray.sh start` prints one)");
            None
        }
    }
}

/// SIGKILLs `r` as soon as its API lists a job admitted and not yet started (its start on
/// the backend under way), or once `within` has passed; whether it saw one.
async fn kill_mid_start(r: &mut Berth, within: Duration) -> (bool, SystemTime) {
    let http = reqwest::Client::builder().timeout(SECS(2)).build().unwrap();
    let deadline = Instant::now() + within;
    let mut seen = false;
    while !seen && Instant::now() < deadline {
        if let Ok(resp) = http.get(format!("{}/api/v1/jobs?state=admitted&max_items=1", r.url)).send().await {
            seen = resp.json::<Value>().await.is_ok_and(|page| page["jobs"].as_array().is_some_and(|j| !j.is_empty()));
        }
        if !seen {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    r.kill9();
    (seen, SystemTime::now())
}

/// Every Ray job Berth submitted for `ids`, per Berth job, as Ray's own job list has them.
async fn ray_jobs_of(ray: &str, ids: &[String]) -> HashMap<String, Vec<Value>> {
    let all: Vec<Value> = reqwest::get(format!("{ray}/api/jobs/")).await.unwrap().json().await.unwrap();
    let mut per: HashMap<String, Vec<Value>> = ids.iter().map(|id| (id.clone(), Vec::new())).collect();
    for job in all {
        let sid = job["submission_id"].as_str().unwrap_or_default();
        let by_metadata = job["metadata"]["berth_job_id"].as_str().filter(|id| per.contains_key(*id));
        let by_key = ids.iter().find(|id| sid.strip_prefix(id.as_str()).is_some_and(|run| run.starts_with("-r")));
        if let Some(id) = by_metadata.map(str::to_string).or_else(|| by_key.cloned()) {
            per.get_mut(&id).unwrap().push(job);
        }
    }
    per
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_on_ray_survives_leader_kills_mid_start() {
    if !pg_or_skip("a_burst_on_ray_survives_leader_kills_mid_start") {
        return;
    }
    let Some(ray) = ray_or_skip("a_burst_on_ray_survives_leader_kills_mid_start") else { return };
    let _pg = PG.read().await;
    // Ray keeps the finished jobs (Berth would delete them), so its list shows every one.
    let flags = ["--no-local", "--ray", &format!("ray={ray}"), "--ray-poll-ms", "200", "--ray-keep-finished"];
    let mut rs = replicas_with(3, &flags, RAY_CONFIG).await;
    let urls: Vec<String> = rs.iter().map(|r| r.url.clone()).collect();
    let bodies: Vec<Value> = (0..200)
        .map(|n| json!({ "name": format!("ray-burst-{n}"), "submission_id": format!("ray-burst-{n}"), "entrypoint": format!("echo ray-burst-{n}"), "resources": { "cpu": 1 } }))
        .collect();
    let done = Arc::new(AtomicUsize::new(0));
    let submitting = burst(urls, bodies, Duration::from_millis(100), done.clone());
    let mut mid_start = Vec::new();
    let mut alive = 0;
    for kill in 1..=2 {
        let at_least = kill * 60;
        burst_reaches(&rs, &done, at_least).await;
        let leader = wait_for_leader(&rs, None).await;
        let (under_way, killed_at) = kill_mid_start(&mut rs[leader], SECS(30)).await;
        mid_start.push(under_way);
        let others: Vec<usize> = (0..rs.len()).filter(|&i| i != leader).collect();
        let admitted = next_admission(&rs, &others, killed_at).await;
        println!("kill {kill} of the leader (r{leader}, a start under way: {}) → next admission: {:.2} s", mid_start[kill - 1], admitted.duration_since(killed_at).unwrap_or_default().as_secs_f64());
        alive = wait_for_leader(&rs, Some(leader)).await;
        rs[leader].spawn().await;
    }
    assert!(mid_start.iter().any(|&m| m), "no kill landed while a start was under way");
    let ids = submitting.await.unwrap();
    assert_each_succeeded_once(&rs[alive], &ids, SECS(900)).await;
    // Ray's own record: one submission per job, run 1's, which succeeded.
    for (id, on_ray) in ray_jobs_of(&ray, &ids).await {
        let seen: Vec<(&str, &str)> = on_ray.iter().map(|j| (j["submission_id"].as_str().unwrap_or(""), j["status"].as_str().unwrap_or(""))).collect();
        assert_eq!(seen, [(format!("{id}-r1").as_str(), "SUCCEEDED")], "job {id} on Ray");
    }
}

/// Waits until the leader ranks `ids` at `want` and the follower shows each the same
/// position and reason.
async fn same_positions(leader: &Berth, follower: &Berth, ids: &[&String], want: &[u64]) {
    wait_until("the follower to show the leader's positions", SECS(30), async || {
        for (id, want) in ids.iter().zip(want) {
            let (l, f) = (leader.job(id).await, follower.job(id).await);
            if l["position"].as_u64() != Some(*want) {
                return Err(format!("the leader has {id} at {}, not {want}", l["position"]));
            }
            if (&f["position"], &f["reason"]) != (&l["position"], &l["reason"]) {
                return Err(format!("{id}: the leader says {} ({}), the follower {} ({})", l["position"], l["reason"], f["position"], f["reason"]));
            }
        }
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_follower_shows_the_positions_the_leader_gives() {
    if !pg_or_skip("a_follower_shows_the_positions_the_leader_gives") {
        return;
    }
    let _pg = PG.read().await;
    let rs = replicas(2).await;
    let leader = wait_for_leader(&rs, None).await;
    let (l, f) = (&rs[leader], &rs[1 - leader]);
    // Eight long jobs fill the quota; three more wait, submitted on the follower.
    let long = |n: usize| json!({ "name": format!("long-{n}"), "entrypoint": "sleep 600", "resources": { "cpu": 1 } });
    let mut ids = Vec::new();
    for n in 0..11 {
        ids.push(f.submit(long(n)).await);
    }
    for id in &ids[..8] {
        f.wait_state(id, &["running"], SECS(30)).await;
    }
    let (a, b, c) = (&ids[8], &ids[9], &ids[10]);
    same_positions(l, f, &[a, b, c], &[1, 2, 3]).await;
    let shown = f.job(a).await;
    assert!(shown["reason"].as_str().unwrap_or_default().contains("cpu"), "{shown:#}");
    // The last one raised (on the follower) goes first; the others move back one.
    let (status, raised) = f.post(&format!("/api/v1/jobs/{c}/priority"), &json!({ "priority": 5 })).await;
    assert_eq!(status, 200, "{raised:#}");
    same_positions(l, f, &[c, a, b], &[1, 2, 3]).await;
    // The follower's queue view lists them so.
    let (status, queue) = f.get("/api/v1/queues/burst").await;
    assert_eq!(status, 200, "{queue:#}");
    let listed: Vec<(String, u64)> =
        queue["pending"].as_array().unwrap().iter().map(|p| (p["id"].as_str().unwrap().to_string(), p["position"].as_u64().unwrap())).collect();
    assert_eq!(listed, [(c.clone(), 1), (a.clone(), 2), (b.clone(), 3)], "{queue:#}");
    for id in &ids {
        let (status, _) = f.post(&format!("/api/v1/jobs/{id}/cancel"), &json!({})).await;
        assert_eq!(status, 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposed_leader_writes_no_history_sample_nor_waiting_list() {
    use server::store::jobs::{JobStore, JobStoreError, NewSample};
    if !pg_or_skip("a_deposed_leader_writes_no_history_sample_nor_waiting_list") {
        return;
    }
    let _pg = PG.read().await;
    let db = server::store::Db::connect(&common::fresh_database(Backend::Postgres).await).await.unwrap();
    let lease = |name: &str| server::replicas::Lease::new(db.pool.clone(), name.to_string(), Duration::from_millis(200));
    let (a, b) = (lease("a"), lease("b"));
    let epoch = a.try_acquire().await.unwrap().expect("a takes the free lease");
    let deposed = JobStore::new(db.clone()).fenced(epoch);
    let sample = NewSample { queue: "q".into(), flavor: "f".into(), resource: "cpu".into(), used_milli: 1000, nominal_milli: Some(2000), borrowed_milli: 0 };
    let now = server::clock::now_us();
    deposed.insert_samples(now, std::slice::from_ref(&sample)).await.expect("the leader's sample is written");
    // `a` renews no more: `b` takes the lease once it lapses.
    let taken = wait_until("b to take the lapsed lease", SECS(10), async || match b.try_acquire().await {
        Ok(Some(e)) => Ok(e),
        other => Err(format!("{other:?}")),
    })
    .await;
    assert!(taken > epoch);
    let fenced = |r: Result<(), JobStoreError>| matches!(r, Err(JobStoreError::Fenced(e)) if e == epoch);
    let late = deposed.insert_samples(now + 1, std::slice::from_ref(&sample)).await;
    assert!(fenced(late), "a deposed leader's sample");
    assert!(fenced(deposed.prune_samples(now + 2).await.map(|_| ())), "a deposed leader's prune");
    assert!(fenced(deposed.publish_waiting(now, "{}").await), "a deposed leader's waiting list");
    let count = || async { sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM resource_samples").fetch_one(&db.pool).await.unwrap() };
    assert_eq!(count().await, 1, "only the sample written while leading is stored");
    // The new leader's are.
    JobStore::new(db.clone()).fenced(taken).insert_samples(now + 3, &[sample]).await.expect("the new leader's sample");
    assert_eq!(count().await, 2);
}

/// A leader stopped inside a fenced transaction (SIGSTOP, a paused VM) holds the lease row
/// `FOR SHARE`; PostgreSQL ends that idle session after a few seconds, so another
/// replica's takeover goes through instead of waiting for it for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_transaction_left_open_does_not_block_a_takeover() {
    if !pg_or_skip("a_transaction_left_open_does_not_block_a_takeover") {
        return;
    }
    let url = common::fresh_database(Backend::Postgres).await;
    let (stuck, other) = (server::store::Db::connect(&url).await.unwrap(), server::store::Db::connect(&url).await.unwrap());
    let mut tx = stuck.pool.begin().await.unwrap();
    let epoch: Option<i64> = sqlx::query_scalar("SELECT epoch FROM leader_lease WHERE id = 1 FOR SHARE").fetch_optional(&mut *tx).await.unwrap();
    assert!(epoch.is_some(), "the lease row exists");
    // The holder now does nothing, as a stopped process would.
    let started = Instant::now();
    let takeover = sqlx::query("UPDATE leader_lease SET epoch = epoch + 1 WHERE id = 1").execute(&other.pool);
    let done = tokio::time::timeout(SECS(30), takeover).await;
    assert!(matches!(done, Ok(Ok(_))), "the takeover waited {:?}: {done:?}", started.elapsed());
    assert!(tx.commit().await.is_err(), "the stuck session was ended, its transaction with it");
}
