//! Job workflows as a user of sbatch or `ray job submit` expects them, through the real
//! `berth` CLI against a real server (SQLite and PostgreSQL): `submit --wait` with exit
//! codes, the current directory as the working directory, `logs -f` with both streams,
//! exit codes in `jobs list`, negative numbers on the command line.

mod common;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::berth::{berth_bin, Berth};
use common::Backend;

const SECS: fn(u64) -> Duration = Duration::from_secs;

/// Runs `berth ARGS` against `b` from directory `cwd`, as a user in a shell would.
async fn cli(b: &Berth, cwd: &Path, args: &[&str]) -> Output {
    let run = tokio::process::Command::new(berth_bin()).args(["--server", &b.url]).args(args).current_dir(cwd).output();
    tokio::time::timeout(SECS(60), run).await.expect("the CLI ends within 60 s").unwrap()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fresh directory inside the test's own, to submit from.
fn workdir(b: &Berth, name: &str) -> std::path::PathBuf {
    let dir = b.dir.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn wait_and_exit_codes(backend: Backend) {
    let b = Berth::start(backend, &[]).await;
    let here = workdir(&b, "project");
    std::fs::write(here.join("train.py"), "print('training')\n").unwrap();

    // Succeeded: the output, from the current directory (where train.py is), exit 0.
    let o = cli(&b, &here, &["jobs", "submit", "--wait", "--", "sh", "-c", "cat train.py; pwd"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(out(&o), format!("print('training')\n{}\n", here.display()));
    assert!(err(&o).contains(&format!("runs in {} (the current directory", here.display())), "{}", err(&o));

    // Failed: the job's own code, both streams (stderr marked), one line saying why.
    let o = cli(&b, &here, &["jobs", "submit", "--wait", "--", "echo working; echo broken >&2; exit 3"]).await;
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    assert_eq!(out(&o), "working\n[stderr] broken\n");
    assert!(err(&o).lines().last().unwrap().contains("failed: exited with code 3"), "{}", err(&o));

    // Timed out: 124.
    let o = cli(&b, &here, &["jobs", "submit", "--wait", "--timeout", "1", "--", "sleep 30"]).await;
    assert_eq!(o.status.code(), Some(124), "{}", err(&o));
    assert!(err(&o).contains("timed out after 1 s"), "{}", err(&o));

    // Rejected at submit (more CPUs than any node has): 65, with the reason.
    let o = cli(&b, &here, &["jobs", "submit", "--wait", "--cpu", "100000", "--", "true"]).await;
    assert_eq!(o.status.code(), Some(65), "{}", err(&o));
    assert!(err(&o).contains("error:"), "{}", err(&o));

    // Cancelled while waited for: 130.
    let waiting = tokio::process::Command::new(berth_bin())
        .args(["--server", &b.url, "jobs", "submit", "--wait", "--name", "to-cancel", "--", "echo started; sleep 60"])
        .current_dir(&here)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let id = common::wait_until("the job to start", SECS(30), async || {
        let (_, page) = b.get("/api/v1/jobs?q=to-cancel&state=running").await;
        page["jobs"][0]["id"].as_str().map(str::to_string).ok_or_else(|| page.to_string())
    })
    .await;
    let o = cli(&b, &here, &["jobs", "cancel", &id]).await;
    assert!(o.status.success(), "{}", err(&o));
    let o = tokio::time::timeout(SECS(30), waiting.wait_with_output()).await.expect("--wait returns once cancelled").unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", err(&o));
    assert!(out(&o).starts_with("started\n"), "{}", out(&o));
    assert!(err(&o).contains("was cancelled"), "{}", err(&o));

    // `jobs list` shows each job's exit code.
    let o = cli(&b, &here, &["jobs", "list"]).await;
    let text = out(&o);
    assert!(text.lines().next().unwrap().contains("EXIT"), "{text}");
    assert!(text.lines().any(|l| l.contains("failed") && l.split_whitespace().any(|w| w == "3")), "{text}");
}



/// `logs -f` of a failing job: both streams, then the job's code; `--stdout` / `--stderr`
/// pick one; `--fresh-workdir` runs elsewhere than the current directory.
#[tokio::test]
async fn logs_follow_a_failing_job() {
    let b = Berth::start(Backend::Sqlite, &[]).await;
    let here = workdir(&b, "logs");
    let o = cli(&b, &here, &["jobs", "submit", "--fresh-workdir", "--", "sleep 1; echo one; echo two >&2; pwd; exit 7"]).await;
    assert!(o.status.success(), "{}", err(&o));
    let id = out(&o).trim().to_string();
    let o = cli(&b, &here, &["jobs", "logs", "-f", &id]).await;
    assert_eq!(o.status.code(), Some(7), "{}", err(&o));
    let text = out(&o);
    assert!(text.starts_with("one\n"), "{text}");
    assert!(text.contains("[stderr] two\n") && !text.contains(&here.display().to_string()), "{text}");
    assert!(err(&o).contains(&format!("job {id} failed")), "{}", err(&o));
    let o = cli(&b, &here, &["jobs", "logs", "--stderr", &id]).await;
    assert_eq!(out(&o), "two\n");
    let o = cli(&b, &here, &["jobs", "logs", "--stdout", "--tail", "1", &id]).await;
    assert!(out(&o).trim().ends_with(&format!("{id}-r1")), "{}", out(&o));
}

/// `jobs list` and `queues NAME` say why a job waits in one line, the headline the dashboard
/// shows; `--full-reason` and `jobs get` give the engine's full explanation.
#[tokio::test]
async fn wait_reasons_read_as_headlines() {
    let b = Berth::start(Backend::Sqlite, &[]).await;
    b.apply(
        "resource_flavors:\n  - name: local\nresource_queues:\n  - name: one\n    resource_groups:\n      - covered_resources: [cpu]\n        \
         flavors: [{name: local, resources: [{name: cpu, nominal_quota: 1}]}]\nscheduling_rules:\n  - resource_queue: one\n",
    )
    .await;
    let here = workdir(&b, "reasons");
    let first = b.submit(serde_json::json!({"name": "first", "entrypoint": "sleep 300", "resources": {"cpu": 1}})).await;
    b.wait_state(&first, &["running"], SECS(30)).await;
    let second = b.submit(serde_json::json!({"name": "second", "entrypoint": "true", "resources": {"cpu": 1}})).await;
    let (headline, full) = common::wait_until("the waiting job's headline", SECS(30), async || {
        let j = b.job(&second).await;
        match (j["reason_headline"].as_str(), j["reason"].as_str()) {
            (Some(h), Some(r)) => Ok((h.to_string(), r.to_string())),
            _ => Err(j.to_string()),
        }
    })
    .await;
    assert!(headline.starts_with("Waiting for CPU: 1 of 1 in use in one"), "{headline}");
    assert_ne!(headline, full);
    let row = |o: &Output| out(o).lines().find(|l| l.contains(&second)).unwrap_or_default().to_string();

    let line = row(&cli(&b, &here, &["jobs", "list"]).await);
    assert!(line.ends_with(&format!("#1 {headline}")), "{line}");
    let line = row(&cli(&b, &here, &["jobs", "list", "--full-reason"]).await);
    assert!(line.ends_with(&format!("#1 {full}")), "{line}");
    let line = row(&cli(&b, &here, &["queues", "one"]).await);
    assert!(line.ends_with(&headline), "{line}");
    let line = row(&cli(&b, &here, &["queues", "one", "--full-reason"]).await);
    assert!(line.ends_with(&full), "{line}");
    let text = out(&cli(&b, &here, &["jobs", "get", &second]).await);
    assert!(text.contains(&format!("why it waits  {headline}\n")) && text.contains(&format!("in full       {full}\n")), "{text}");
    assert!(cli(&b, &here, &["jobs", "cancel", &first]).await.status.success());
}

/// A negative number where none is taken gets Berth's own message, not clap's `-- -1` tip;
/// where one is taken, it is accepted.
#[tokio::test]
async fn negative_numbers_on_the_command_line() {
    let b = Berth::start(Backend::Sqlite, &[]).await;
    let here = workdir(&b, "neg");
    let o = cli(&b, &here, &["jobs", "submit", "--priority", "-5", "--", "true"]).await;
    assert!(o.status.success(), "{}", err(&o));
    let id = out(&o).trim().to_string();
    assert_eq!(b.job(&id).await["priority"], -5);
    let o = cli(&b, &here, &["jobs", "list", "-1"]).await;
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("`--priority -1`") && !err(&o).contains("'-- -1'"), "{}", err(&o));
}

/// The README's quick start, step 3 ("Run a job"), run as written by `sh` with `berth` on
/// the PATH and a fresh home directory: its comments' promises hold.
#[tokio::test]
async fn the_readme_quick_start_runs_as_written() {
    let b = Berth::start(Backend::Sqlite, &[]).await;
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let step = readme.split("**3. Run a job.**").nth(1).expect("README has step 3");
    let script = step.split("```sh\n").nth(1).and_then(|s| s.split("```").next()).expect("step 3 has a sh block");
    let home = workdir(&b, "home");
    let bin = workdir(&b, "bin");
    std::os::unix::fs::symlink(berth_bin(), bin.join("berth")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let run = tokio::process::Command::new("sh").arg("-c").arg(script).env("HOME", &home).env("PATH", path).env("BERTH_SERVER", &b.url).current_dir(&home).output();
    let o = tokio::time::timeout(SECS(60), run).await.expect("step 3 ends within 60 s").unwrap();
    let (text, errs) = (out(&o), err(&o));
    let demo = home.join("berth-demo");
    assert!(text.contains(&format!("hello from {}\n", demo.display())), "{text}\n{errs}");
    assert!(text.contains("[stderr] oops\n"), "{text}\n{errs}");
    assert!(demo.join("when.txt").is_file(), "{text}\n{errs}");
    assert!(text.lines().any(|l| l.starts_with("ID") && l.contains("EXIT")), "{text}");
    assert!(errs.contains("failed: exited with code 3"), "{errs}");
    assert!(!errs.contains("error:"), "{errs}");
}

/// Submits with the CLI from `cwd`; the printed id (panics unless it succeeded).
async fn submit(b: &Berth, cwd: &Path, args: &[&str]) -> String {
    let mut all = vec!["jobs", "submit"];
    all.extend_from_slice(args);
    let o = cli(b, cwd, &all).await;
    assert!(o.status.success(), "{all:?}: {}", err(&o));
    out(&o).trim().to_string()
}

/// An `after_ok` chain of 3 whose middle fails: the last fails with the reason and never
/// runs. `after_not_ok` and `after_any` on the failed one run; a dependency that ended
/// before its dependent was submitted counts; an unknown one is refused, named.
async fn dependencies(backend: Backend) {
    let b = Berth::start(backend, &[]).await;
    let here = workdir(&b, "deps");
    let first = submit(&b, &here, &["--name", "first", "--", "sleep 0.5; echo first >> ran.txt"]).await;
    let middle = submit(&b, &here, &["--after-ok", &first, "--", "echo middle >> ran.txt; exit 4"]).await;
    let last = submit(&b, &here, &["--after-ok", &middle, "--", "echo last >> ran.txt"]).await;
    let (_, waiting) = b.get(&format!("/api/v1/jobs/{last}")).await;
    assert_eq!(waiting["state"], "pending");
    assert_eq!(waiting["after_ok"][0], middle.as_str());
    let on_fail = submit(&b, &here, &["--after-not-ok", &middle, "--", "echo on_fail >> ran.txt"]).await;
    let any = submit(&b, &here, &["--after-any", &format!("{middle},{last}"), "--", "echo any >> ran.txt"]).await;
    let ended = b.wait_all_ended(&[first.clone(), middle.clone(), last.clone(), on_fail.clone(), any.clone()], SECS(60)).await;
    let state = |id: &str| ended.iter().find(|j| j["id"] == id).unwrap().clone();
    assert_eq!(state(&first)["state"], "succeeded");
    assert_eq!(state(&middle)["exit_code"], 4);
    let l = state(&last);
    assert_eq!(l["state"], "failed", "{l}");
    assert_eq!(l["runs"], 0, "the last job never ran: {l}");
    assert_eq!(l["reason"], format!("dependency {middle} ended failed, so after_ok can never be met"));
    assert_eq!(state(&on_fail)["state"], "succeeded");
    assert_eq!(state(&any)["state"], "succeeded");
    let dependents = b.job(&middle).await["dependents"].clone();
    assert_eq!(dependents, serde_json::json!([last, on_fail, any]));
    let o = cli(&b, &here, &["jobs", "get", &last]).await;
    assert!(out(&o).contains(&format!("after ok      {middle}")), "{}", out(&o));
    let ran = std::fs::read_to_string(here.join("ran.txt")).unwrap();
    assert!(!ran.contains("last"), "{ran}");
    let o = cli(&b, &here, &["jobs", "list"]).await;
    assert!(out(&o).contains("so after_ok can never be met"), "{}", out(&o));
    // Already ended: met at once (read from the database, not from the loop's memory).
    let late = submit(&b, &here, &["--after-ok", &first, "--", "true"]).await;
    assert_eq!(b.wait_state(&late, &["succeeded", "failed"], SECS(30)).await["state"], "succeeded");
    let o = cli(&b, &here, &["jobs", "submit", "--after-ok", &first, "--after-ok", "no-such-job", "--", "true"]).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("after_ok[1]: no job or stage `no-such-job`"), "{}", err(&o));
}

/// An array of 20 with `%3`: never more than 3 tasks running at once, every index seen
/// exactly once (as Berth and as Slurm name it); cancelling an array cancels the rest.
async fn arrays(backend: Backend) {
    let b = Berth::start(backend, &[]).await;
    let here = workdir(&b, "array");
    let task = r#"echo "start $(date +%s%N) $BERTH_ARRAY_INDEX $SLURM_ARRAY_TASK_ID" >> log.txt; sleep 0.3; echo "end $(date +%s%N)" >> log.txt"#;
    let o = cli(&b, &here, &["jobs", "submit", "--array", "0-19%3", "--wait", "--", task]).await;
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(err(&o).contains("succeeded=20"), "{}", err(&o));
    let log = std::fs::read_to_string(here.join("log.txt")).unwrap();
    let mut edges: Vec<(u128, i32)> = Vec::new();
    let mut seen: Vec<u32> = Vec::new();
    for line in log.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["start", t, i, slurm] => {
                assert_eq!(i, slurm, "{line}");
                seen.push(i.parse().unwrap());
                edges.push((t.parse().unwrap(), 1));
            }
            ["end", t] => edges.push((t.parse().unwrap(), -1)),
            _ => panic!("unexpected line {line:?}"),
        }
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..20).collect::<Vec<u32>>());
    edges.sort();
    let peak = edges.iter().scan(0, |n, (_, d)| {
        *n += d;
        Some(*n)
    });
    assert!(peak.max().unwrap() <= 3, "{log}");

    let o = cli(&b, &here, &["jobs", "submit", "--array", "0-9%2", "--", "sleep 60"]).await;
    let stage = out(&o).trim().to_string();
    assert!(stage.starts_with("s-"), "{}", err(&o));
    common::wait_until("two tasks running", SECS(30), async || {
        let (_, s) = b.get(&format!("/api/v1/stages/{stage}")).await;
        (s["counts"]["running"] == 2).then_some(()).ok_or_else(|| s["counts"].to_string())
    })
    .await;
    let o = cli(&b, &here, &["stages", "cancel", &stage]).await;
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(out(&o).trim(), format!("{stage}: cancelled=10"));
}

/// A held job stays pending ("held by …") while later jobs run, until released; a running
/// job cannot be held.
async fn hold_and_release(backend: Backend) {
    let b = Berth::start(backend, &[]).await;
    let here = workdir(&b, "hold");
    let held = submit(&b, &here, &["--hold", "--", "echo held"]).await;
    let after = submit(&b, &here, &["--", "true"]).await;
    b.wait_state(&after, &["succeeded"], SECS(30)).await;
    let job = b.job(&held).await;
    assert_eq!(job["state"], "pending", "{job}");
    assert_eq!(job["held_by"], "anonymous");
    assert!(job["reason"].as_str().unwrap().starts_with("held by anonymous"), "{job}");
    let o = cli(&b, &here, &["jobs", "release", &held]).await;
    assert_eq!(out(&o).trim(), format!("{held}: released"), "{}", err(&o));
    assert_eq!(b.wait_state(&held, &["succeeded", "failed"], SECS(30)).await["state"], "succeeded");
    let kinds: Vec<String> = b.events(&format!("job={held}")).await.iter().map(|e| e["kind"].as_str().unwrap().to_string()).collect();
    assert!(kinds.contains(&"released".to_string()), "{kinds:?}");

    // Held after submit, then released; a running job is refused.
    let sleeper = submit(&b, &here, &["--", "sleep 60"]).await;
    let queued = submit(&b, &here, &["--after-ok", &sleeper, "--", "true"]).await;
    let o = cli(&b, &here, &["jobs", "hold", &queued]).await;
    assert_eq!(out(&o).trim(), format!("{queued}: held by anonymous"), "{}", err(&o));
    b.wait_state(&sleeper, &["running"], SECS(30)).await;
    let o = cli(&b, &here, &["jobs", "hold", &sleeper]).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("only a pending job can be held"), "{}", err(&o));
    let o = cli(&b, &here, &["jobs", "cancel", &sleeper]).await;
    assert!(o.status.success(), "{}", err(&o));
    let j = b.wait_state(&queued, &["failed"], SECS(30)).await;
    assert!(j["reason"].as_str().unwrap().contains("ended cancelled"), "{j}");
}

/// Holding and releasing follow cancel's roles: another submitter may not release a job
/// held by its owner; the owner may; a viewer may not hold.
#[tokio::test]
async fn hold_and_release_follow_the_roles_of_cancel() {
    const ADMIN: &str = "berth_test_admin_workflows_0123456789";
    let b = Berth::start_authenticated(Backend::Sqlite, ADMIN, &[]).await;
    let token = |user: &'static str, role: &'static str| {
        let b = &b;
        async move {
            let (status, made) = b.post("/api/v1/tokens", &serde_json::json!({"user": user, "role": role})).await;
            assert_eq!(status, 201, "{made}");
            made["secret"].as_str().unwrap().to_string()
        }
    };
    let (ann, bob, vic) = (token("ann", "submitter").await, token("bob", "submitter").await, token("vic", "viewer").await);
    let as_user = |secret: &str, path: String| {
        let req = reqwest::Client::new().post(format!("{}{path}", b.url)).bearer_auth(secret);
        async move {
            let r = req.json(&serde_json::json!({})).send().await.unwrap();
            (r.status().as_u16(), r.json::<serde_json::Value>().await.unwrap_or_default())
        }
    };
    let (status, job) = as_user(&ann, "/api/v1/jobs".into()).await;
    assert!(matches!(status, 400 | 422) && job.to_string().contains("entrypoint"), "an empty submit names the missing field: {job}");
    let r = reqwest::Client::new().post(format!("{}/api/v1/jobs", b.url)).bearer_auth(&ann);
    let job: serde_json::Value = r.json(&serde_json::json!({"entrypoint": "true", "hold": true})).send().await.unwrap().json().await.unwrap();
    let id = job["id"].as_str().unwrap().to_string();
    assert_eq!(job["held_by"], "ann", "{job}");
    let (status, body) = as_user(&bob, format!("/api/v1/jobs/{id}/release")).await;
    assert_eq!(status, 403, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("belongs to ann"), "{body}");
    let (status, body) = as_user(&vic, format!("/api/v1/jobs/{id}/release")).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(b.job(&id).await["state"], "pending");
    let (status, body) = as_user(&ann, format!("/api/v1/jobs/{id}/release")).await;
    assert_eq!(status, 200, "{body}");
    b.wait_state(&id, &["succeeded"], SECS(30)).await;
}

on_both_databases!(wait_and_exit_codes, dependencies, arrays, hold_and_release, usage);

/// Microseconds since the epoch of an RFC 3339 field of a job.
fn us(job: &serde_json::Value, field: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(job[field].as_str().unwrap_or_else(|| panic!("{field} in {job}"))).unwrap().timestamp_micros()
}

/// `berth usage` and `GET /api/v1/usage`: per label, jobs by state, CPU- and memory-hours
/// and waits match the jobs' own recorded times and requests; CSV has a line per group.
async fn usage(backend: Backend) {
    let b = Berth::start(backend, &["--local-cpus", "4"]).await;
    let here = workdir(&b, "usage");
    let mut ids = Vec::new();
    for (team, cpu, cmd) in [("a", "2", "sleep 0.4"), ("a", "1", "sleep 0.2; exit 1"), ("b", "2", "sleep 0.3"), ("b", "2", "sleep 0.3"), ("b", "1", "true")] {
        // Team a's jobs also carry a label whose key has SQL's quote in it.
        let quoted = if team == "a" { ["--label", "o'brien=yes"] } else { ["--label", "other=x"] };
        ids.push(submit(&b, &here, &[&quoted[..], &["--label", &format!("team={team}"), "--cpu", cpu, "--memory-gb", "0.5", "--", cmd]].concat()).await);
    }
    let ended = b.wait_all_ended(&ids, SECS(60)).await;
    let (status, report) = b.get("/api/v1/usage?by=label:team&since=1h").await;
    assert_eq!(status, 200, "{report}");
    for team in ["a", "b"] {
        let mine: Vec<&serde_json::Value> = ended.iter().filter(|j| j["labels"]["team"] == team).collect();
        let cpu_hours: f64 = mine.iter().map(|j| j["resources"]["cpu"].as_f64().unwrap() * (us(j, "finished_at") - us(j, "started_at")) as f64 / 3.6e9).sum();
        let mem_hours: f64 = mine.iter().map(|j| 0.5 * (us(j, "finished_at") - us(j, "started_at")) as f64 / 3.6e9).sum();
        let mut waits: Vec<i64> = mine.iter().map(|j| us(j, "admitted_at") - us(j, "enqueued_at")).collect();
        waits.sort();
        // Nearest rank: the ⌈n/2⌉-th wait is p50.
        let (wait_p50, wait_max) = (waits[waits.len().div_ceil(2) - 1] as f64 / 1e6, waits[waits.len() - 1] as f64 / 1e6);
        let row = report["rows"].as_array().unwrap().iter().find(|r| r["group"] == team).unwrap_or_else(|| panic!("{report}"));
        let close = |got: &serde_json::Value, want: f64| (got.as_f64().unwrap() - want).abs() <= want.abs() * 1e-9 + 1e-12;
        assert!(close(&row["cpu_hours"], cpu_hours), "{team}: {row} vs {cpu_hours}");
        assert!(close(&row["memory_gb_hours"], mem_hours), "{team}: {row} vs {mem_hours}");
        assert!(close(&row["wait_max_s"], wait_max), "{team}: {row} vs {wait_max}");
        assert!(close(&row["wait_p50_s"], wait_p50), "{team}: {row} vs {wait_p50}");
        assert_eq!(row["gpu_hours"], 0.0);
        let count = |state: &str| mine.iter().filter(|j| j["state"] == state).count() as u64;
        assert_eq!(row["jobs"]["succeeded"].as_u64().unwrap_or(0), count("succeeded"), "{row}");
        assert_eq!(row["jobs"]["failed"].as_u64().unwrap_or(0), count("failed"), "{row}");
    }
    let o = cli(&b, &here, &["usage", "--by", "label:team", "--since", "1h", "-o", "csv"]).await;
    let csv = out(&o);
    assert!(csv.starts_with("group,succeeded,failed,"), "{csv}{}", err(&o));
    assert!(csv.lines().any(|l| l.starts_with("a,1,1,")) && csv.lines().any(|l| l.starts_with("b,3,0,")), "{csv}");
    // Groups and their job counts by label `key` (URL-encoded).
    let by_label = async |key: &str| {
        let (status, report) = b.get(&format!("/api/v1/usage?by=label:{key}&since=1h")).await;
        assert_eq!(status, 200, "{report}");
        let jobs = |r: &serde_json::Value| r["jobs"].as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum::<u64>();
        report["rows"].as_array().unwrap().iter().map(|r| (r["group"].as_str().unwrap().to_string(), jobs(r))).collect::<Vec<_>>()
    };
    assert_eq!(by_label("o%27brien").await, [("(none)".to_string(), 3), ("yes".to_string(), 2)]);
    assert_eq!(by_label("o%27brien%27;%20--").await, [("(none)".to_string(), 5)], "a key no job has: every job in (none)");
    let o = cli(&b, &here, &["usage", "--by", "team"]).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("by: `team` is not user, queue or label:KEY"), "{}", err(&o));
}

