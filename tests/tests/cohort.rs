//! Cohorts end to end: the real `berth` binary, real local processes, on SQLite and
//! PostgreSQL. A queue borrows its peers' idle quota up to its borrowing limit and never
//! beyond; a lender reclaims (`any`, `lower_priority`) and the victims go back to pending
//! with their enqueue time, their processes gone; `never` waits; a lending limit keeps the
//! rest for the lender. States are awaited with deadlines, never fixed sleeps.

mod common;

use std::time::Duration;

use common::berth::{alive, eventually, peak_usage, Berth};
use common::{wait_until, Backend};
use serde_json::{json, Value};

const SECS: fn(u64) -> Duration = Duration::from_secs;

/// Queues `a`, `b`, `c` (and more, as `extra` YAML gives) in cohort `research`, each with
/// `cpu` under the local flavor; `spec` is (name, nominal, extra quota YAML, preemption YAML).
fn cohort(queues: &[(&str, u32, &str, &str)]) -> String {
    let mut out = String::from("resource_flavors:\n  - name: local\nresource_queues:\n");
    for (name, nominal, quota, preemption) in queues {
        out.push_str(&format!(
            "  - name: {name}\n    cohort_name: research\n{preemption}    resource_groups:\n      - covered_resources: [cpu]\n        flavors:\n          - name: local\n            resources:\n              - name: cpu\n                nominal_quota: {nominal}\n{quota}"
        ));
    }
    out.push_str("scheduling_rules:\n");
    for (name, ..) in queues {
        out.push_str(&format!("  - resource_queue: {name}\n    selector: [{{key: team, operator: in, values: [{name}]}}]\n"));
    }
    out
}

fn reclaim(policy: &str) -> String {
    format!("    preemption:\n      reclaim_within_cohort: {policy}\n")
}

async fn berth(backend: Backend, config: &str) -> Berth {
    let b = Berth::start(backend, &["--local-cpus", "64"]).await;
    b.apply(config).await;
    b
}

/// `sleep 300` in queue `team` that records its pid as `name.pid`.
fn sleeper(b: &Berth, team: &str, name: &str, priority: i64) -> Value {
    let pid = b.dir.join(format!("{name}.pid"));
    json!({
        "name": name,
        "entrypoint": format!("echo $$ > {}; exec sleep 300", pid.display()),
        "labels": { "team": team },
        "resources": { "cpu": 1 },
        "priority": priority,
    })
}

async fn pid_of(b: &Berth, name: &str) -> i32 {
    let path = b.dir.join(format!("{name}.pid"));
    assert!(eventually(SECS(10), || std::fs::read_to_string(&path).is_ok_and(|s| !s.trim().is_empty())).await, "{name} never wrote its pid");
    std::fs::read_to_string(&path).unwrap().trim().parse().unwrap()
}

/// Submits `n` sleepers to `team`, each running before the next is sent (so they start in
/// order); their ids.
async fn run_in_order(b: &Berth, team: &str, priority: i64, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for k in 0..n {
        let id = b.submit(sleeper(b, team, &format!("{team}-{k}"), priority)).await;
        b.wait_state(&id, &["running"], SECS(10)).await;
        ids.push(id);
    }
    ids
}

/// Waits until the loop has decided on a pending job: it carries a reason.
async fn reason_of(b: &Berth, id: &str) -> String {
    let j = wait_until(&format!("{id} to wait with a reason"), SECS(10), async || {
        let j = b.job(id).await;
        match (j["state"].as_str(), j["reason"].as_str()) {
            (Some("pending"), Some(r)) if !r.is_empty() => Ok(j),
            _ => Err(j.to_string()),
        }
    })
    .await;
    j["reason"].as_str().unwrap().to_string()
}

async fn queue(b: &Berth, name: &str) -> Value {
    let (status, q) = b.get(&format!("/api/v1/queues/{name}")).await;
    assert_eq!(status, 200, "{q}");
    q
}

async fn borrows_up_to_its_limit_and_never_beyond(backend: Backend) {
    let config = cohort(&[("a", 2, "                borrowing_limit: 1\n", ""), ("b", 2, "", "")]);
    let b = berth(backend, &config).await;
    let running = run_in_order(&b, "a", 0, 3).await;
    let waiting = [b.submit(sleeper(&b, "a", "a-3", 0)).await, b.submit(sleeper(&b, "a", "a-4", 0)).await];
    for id in &waiting {
        let why = reason_of(&b, id).await;
        assert!(why.contains("cpu nominal 2, in use 3") && why.contains("borrowing limit 1, borrowed 1"), "{why}");
    }
    // The queue and cohort views say who borrows and who lends.
    let qa = queue(&b, "a").await;
    assert_eq!((qa["cohort"].as_str(), qa["usage"][0]["used"].as_f64(), qa["usage"][0]["borrowed"].as_f64()), (Some("research"), Some(3.0), Some(1.0)), "{qa}");
    assert_eq!(qa["usage"][0]["borrowing_limit"], 1.0);
    let qb = queue(&b, "b").await;
    assert_eq!((qb["usage"][0]["used"].as_f64(), qb["usage"][0]["lent"].as_f64()), (Some(0.0), Some(1.0)), "{qb}");
    let (status, c) = b.get("/api/v1/cohorts/research").await;
    assert_eq!(status, 200, "{c}");
    assert_eq!(c["pools"], json!([{"flavor": "local", "resource": "cpu", "lendable": 4.0, "nominal": 4.0, "used": 3.0, "borrowed": 1.0, "idle": 1.0}]));
    assert_eq!(c["members"][0]["share"], 25.0, "a borrows 1 of the 4 the cohort lends: {c}");
    let borrowed = b.events("kind=borrowed").await;
    assert_eq!(borrowed.len(), 1, "{borrowed:#?}");
    assert_eq!(borrowed[0]["job_id"], json!(running[2]));
    assert_eq!(borrowed[0]["message"], "borrows cpu 1 of flavor local from cohort research (lent by b)");

    // Jobs come and go; `a` never holds more than nominal + borrowing limit.
    for id in &running {
        let (status, j) = b.post(&format!("/api/v1/jobs/{id}/cancel"), &json!({})).await;
        assert_eq!(status, 200, "{j}");
    }
    for id in &waiting {
        b.wait_state(id, &["running"], SECS(10)).await;
    }
    let events = b.events("kind=admitted,preempted,finished,cancelled").await;
    assert_eq!(peak_usage(&events, |_| 1.0)["a"], 3.0);
}

async fn lenders_reclaim_by_policy_and_victims_keep_their_enqueue_time(backend: Backend) {
    let config = cohort(&[("a", 0, "", ""), ("b", 2, "", &reclaim("any")), ("c", 2, "", &reclaim("lower_priority"))]);
    let b = berth(backend, &config).await;
    let a = run_in_order(&b, "a", 5, 4).await;
    let enqueued: Vec<Value> = futures_join(&b, &a).await.into_iter().map(|j| j["enqueued_at"].clone()).collect();

    // c reclaims only from lower priority: a's jobs (priority 5) stay for its priority-1 job.
    let low = b.submit(sleeper(&b, "c", "c-low", 1)).await;
    let why = reason_of(&b, &low).await;
    assert!(why.ends_with("no lower-priority job of a borrowing peer to reclaim"), "{why}");
    assert!(b.events("kind=preempted").await.is_empty());

    // Its priority-9 job reclaims: a's most recently started job goes.
    let victim_pid = pid_of(&b, "a-3").await;
    let high = b.submit(sleeper(&b, "c", "c-high", 9)).await;
    b.wait_state(&high, &["running"], SECS(10)).await;
    let victim = b.wait_state(&a[3], &["pending"], SECS(10)).await;
    assert_eq!(victim["enqueued_at"], enqueued[3], "requeued with its enqueue time: {victim}");
    assert!(eventually(SECS(5), || !alive(victim_pid)).await, "the victim's process {victim_pid} still runs");

    // b reclaims from anyone: its priority-0 job takes back from a's priority-5 ones.
    let any = b.submit(sleeper(&b, "b", "b-any", 0)).await;
    b.wait_state(&any, &["running"], SECS(10)).await;
    let second = b.wait_state(&a[2], &["pending"], SECS(10)).await;
    assert_eq!(second["enqueued_at"], enqueued[2]);

    let pre = b.events("kind=preempted").await;
    assert_eq!(pre.len(), 2, "{pre:#?}");
    for (e, (victim, lender, preemptor)) in pre.iter().zip([(&a[3], "c", "c-high"), (&a[2], "b", "b-any")]) {
        assert_eq!(e["job_id"], json!(victim));
        assert_eq!((e["detail"]["cause"].as_str(), e["detail"]["lender"].as_str(), e["detail"]["borrower"].as_str()), (Some("reclaim"), Some(lender), Some("a")), "{e}");
        assert_eq!(e["message"], format!("preempted by {preemptor}: queue {lender} reclaims its quota from a in cohort research"));
    }
    let reclaimed = b.events("kind=reclaimed").await;
    assert_eq!(reclaimed.iter().map(|e| e["job_id"].clone()).collect::<Vec<_>>(), [json!(high), json!(any)]);
    assert_eq!(b.job(&low).await["state"], "pending", "c is at its nominal: its low job still waits");
}

async fn never_waits_and_a_lending_limit_keeps_the_rest(backend: Backend) {
    let config = cohort(&[("a", 0, "", ""), ("b", 2, "                lending_limit: 1\n", &reclaim("never"))]);
    let b = berth(backend, &config).await;
    let a = run_in_order(&b, "a", 0, 1).await;
    let more = b.submit(sleeper(&b, "a", "a-1", 0)).await;
    assert!(reason_of(&b, &more).await.contains("cohort research has 0 idle of 1 lendable"));

    // b's guaranteed part (nominal 2 − lending limit 1) is there at once...
    let first = b.submit(sleeper(&b, "b", "b-0", 9)).await;
    b.wait_state(&first, &["running"], SECS(10)).await;
    // ...the part it lent is not: `never` waits for the borrower to finish.
    let second = b.submit(sleeper(&b, "b", "b-1", 9)).await;
    let why = reason_of(&b, &second).await;
    assert!(why.contains("reclaim_within_cohort is never: it waits for them to finish"), "{why}");
    assert_eq!(b.job(&a[0]).await["state"], "running");
    assert!(b.events("kind=preempted").await.is_empty());
    let (status, _) = b.post(&format!("/api/v1/jobs/{}/cancel", a[0]), &json!({})).await;
    assert_eq!(status, 200);
    b.wait_state(&second, &["running"], SECS(10)).await;
    assert_eq!(b.job(&more).await["state"], "pending", "b uses all of its quota now");
}

async fn futures_join(b: &Berth, ids: &[String]) -> Vec<Value> {
    let mut out = Vec::new();
    for id in ids {
        out.push(b.job(id).await);
    }
    out
}

on_both_databases!(
    borrows_up_to_its_limit_and_never_beyond,
    lenders_reclaim_by_policy_and_victims_keep_their_enqueue_time,
    never_waits_and_a_lending_limit_keeps_the_rest,
);
