//! The what-if preview end to end: a workload recorded in the database with explicit
//! timestamps, replayed under the active config and a draft, over HTTP, on SQLite and
//! PostgreSQL.

mod common;

use std::collections::BTreeSet;

use app::jobs::{FlavorUse, JobRequest, JobState, ResourceRequest};
use common::{fresh_database, wait_until, Backend, TestApp};
use serde_json::{json, Value};
use server::backends::local::LocalConfig;
use server::store::jobs::{JobRow, JobStore};
use server::state::RuntimeOptions;

const PREVIEW: &str = "/api/v1/scheduler/config/preview";

/// `train` (4 CPU, priorities 0..=50, rejected outside), `infer` (2 CPU), `misc` (unlimited)
/// behind a catch-all rule.
const ACTIVE: &str = r#"
resource_flavors:
  - name: local
resource_queues:
  - name: train
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 4}]}]
  - name: infer
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 2}]}]
  - name: misc
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local}]
scheduling_rules:
  - resource_queue: train
    selector: [{key: team, operator: in, values: [train]}]
    priority_policy: {default: 10, min: 0, max: 50, on_violation: reject}
  - resource_queue: infer
    selector: [{key: team, operator: in, values: [infer]}]
  - resource_queue: misc
"#;

/// A server with 64 CPUs on its one local node and ACTIVE applied (version 2), and a store
/// over the same database to record a workload into.
async fn spawn(backend: Backend) -> (TestApp, JobStore) {
    let db_url = fresh_database(backend).await;
    let data_dir = std::env::temp_dir().join(format!("berth_preview_{}_{}", std::process::id(), server::clock::new_id("d")));
    let mut local = LocalConfig::detect(data_dir.clone());
    local.node_id = "node-1".into();
    local.capacity = server::engine::Resources::units(&[("cpu", 64), ("memory_gb", 256)]);
    let options = RuntimeOptions { local: Some(local), ..RuntimeOptions::local(data_dir) };
    let app = TestApp::spawn_with(db_url, options).await;
    let db = app.state.db.clone();
    let (status, body) = app.apply_yaml(ACTIVE, "").await;
    assert_eq!(status, 200, "{body}");
    (app, JobStore::new(db))
}

/// One recorded job: seconds relative to the recording's base time.
struct Rec {
    id: String,
    team: &'static str,
    priority: Option<i64>,
    cpu: f64,
    submitted: i64,
    /// Admitted (and started) at, ended `runtime` later; `None`: rejected at submit.
    admitted: Option<i64>,
    runtime: i64,
    state: JobState,
}

fn rec(id: String, team: &'static str, submitted: i64, admitted: Option<i64>, runtime: i64) -> Rec {
    let state = if admitted.is_some() { JobState::Succeeded } else { JobState::Rejected };
    Rec { id, team, priority: None, cpu: 1.0, submitted, admitted, runtime, state }
}

/// The recorded day (all within the last 12 hours): what really happened under ACTIVE.
/// * 40 `train` jobs of 1 CPU for 10 min, one every 3 min: never more than 4 at once, so
///   each was admitted a second after submit;
/// * 5 `vision` jobs (the catch-all sent them to `misc`), 1 min each;
/// * 3 `train` jobs asking priority 80, rejected (above the maximum 50);
/// * 1 job submitted 25 h ago that ran until 23 h ago (running at the window's start);
/// * 1 `train` job of 3 CPU running now, started 5 min ago.
fn workload(now_s: i64) -> Vec<Rec> {
    let base = now_s - 12 * 3600;
    let mut jobs = Vec::new();
    for k in 0..40 {
        let t = base + k * 180;
        jobs.push(rec(format!("j-train-{k:02}"), "train", t, Some(t + 1), 600));
    }
    for k in 0..5 {
        let t = base + 60 + k * 600;
        jobs.push(rec(format!("j-vision-{k}"), "vision", t, Some(t + 1), 60));
    }
    for k in 0..3 {
        let t = base + 90 + k * 1800;
        jobs.push(Rec { priority: Some(80), ..rec(format!("j-urgent-{k}"), "train", t, None, 0) });
    }
    jobs.push(rec("j-old".into(), "infer", now_s - 25 * 3600, Some(now_s - 25 * 3600 + 2), 2 * 3600));
    jobs.push(Rec { cpu: 3.0, state: JobState::Running, ..rec("j-live".into(), "train", now_s - 301, Some(now_s - 300), 0) });
    jobs
}

async fn record(store: &JobStore, jobs: &[Rec]) {
    let us = |s: i64| s * 1_000_000;
    for j in jobs {
        let spec = JobRequest {
            entrypoint: "sleep 1".into(),
            labels: [("team".to_string(), j.team.to_string())].into(),
            priority: j.priority,
            resources: ResourceRequest { cpu: Some(j.cpu), ..Default::default() },
            ..Default::default()
        };
        let queue = match j.team {
            "train" => "train",
            "infer" => "infer",
            _ => "misc",
        };
        let mut row = JobRow {
            state: j.state,
            queue: Some(queue.into()),
            ..JobRow::submitted(j.id.clone(), format!("{} job", j.team), "tester".into(), spec, j.priority.unwrap_or(10), 2, us(j.submitted))
        };
        match j.admitted {
            None => {
                row.finished_at_us = Some(us(j.submitted));
                row.reason = Some("priority 80 is above the maximum 50 allowed by scheduling_rules[0] (queue train)".into());
            }
            Some(a) => {
                row.runs = 1;
                row.admitted_at_us = Some(us(a));
                row.started_at_us = Some(us(a));
                row.flavors = vec![FlavorUse { flavor: "local".into(), resources: vec!["cpu".into()] }];
                row.node = Some("node-1".into());
                row.backend = Some("local".into());
                if j.state != JobState::Running {
                    row.finished_at_us = Some(us(a + j.runtime));
                    row.exit_code = Some(0);
                }
            }
        }
        store.insert(None, std::slice::from_ref(&row), &[]).await.unwrap();
        store.update(row.submitted_at_us, &[(&row, false)], &[]).await.unwrap();
    }
}

async fn recorded(backend: Backend) -> (TestApp, JobStore) {
    let (app, store) = spawn(backend).await;
    record(&store, &workload(chrono::Utc::now().timestamp())).await;
    (app, store)
}

async fn preview(app: &TestApp, draft: &str) -> Value {
    preview_in(app, draft, json!("24h")).await
}

async fn preview_in(app: &TestApp, draft: &str, window: Value) -> Value {
    let body = json!({ "config": draft, "window": window });
    let (status, report) = app.post(PREVIEW, "application/json", body.to_string(), Some("tester")).await;
    assert_eq!(status, 200, "{report}");
    report
}

fn queue<'a>(report: &'a Value, name: Option<&str>) -> &'a Value {
    report["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"].as_str() == name)
        .unwrap_or_else(|| panic!("queue {name:?} in {}", report["queues"]))
}

fn ids_of(report: &Value, kind: &str) -> BTreeSet<String> {
    report["changes"].as_array().unwrap().iter().filter(|c| c["kind"] == kind).map(|c| c["job_id"].as_str().unwrap().to_string()).collect()
}

fn without_timing(mut report: Value) -> Value {
    report["elapsed_ms"] = Value::Null;
    report
}

async fn identical_draft_gives_identical_sides_and_reports_fidelity(backend: Backend) {
    let (app, _store) = recorded(backend).await;
    let report = preview(&app, ACTIVE).await;
    assert_eq!(report["identical"], true);
    assert_eq!(report["active_version"], 2);
    assert_eq!(report["jobs"], 49, "{report}");
    assert_eq!(report["running_at_start"], 1);
    assert_eq!(report["changes"], json!([]));
    for q in report["queues"].as_array().unwrap() {
        assert_eq!(q["active"], q["draft"], "{q}");
    }
    for u in report["usage"].as_array().unwrap() {
        assert_eq!(u["active"], u["draft"]);
    }
    // The train jobs ran one at a time per 3 minutes within quota 4: the replay admits each
    // on arrival, a second sooner than the loop did.
    let train = &queue(&report, Some("train"))["active"];
    assert_eq!(train["admitted"], 41, "{train}");
    assert_eq!(train["rejected"], 3);
    assert_eq!(train["wait_max_s"], 0.0);
    let fidelity = &report["fidelity"];
    assert_eq!(fidelity["compared"], 46, "{fidelity}");
    assert_eq!(fidelity["outcome_agreement"], 1.0);
    assert_eq!(fidelity["other_versions"], 0);
    let mae = fidelity["wait_mae_s"].as_f64().unwrap();
    assert!((0.9..=1.1).contains(&mae), "{fidelity}");
    // Deterministic: the same draft over the same window again, later, the same report (a
    // job still running is counted as it stood at the window's end). Later: once the clock
    // is 2 s past the window's end.
    let to = chrono::DateTime::parse_from_rfc3339(report["to"].as_str().unwrap()).unwrap().with_timezone(&chrono::Utc);
    wait_until("the clock 2 s past the window's end", std::time::Duration::from_secs(10), async || {
        let now = chrono::Utc::now();
        if now >= to + chrono::Duration::seconds(2) {
            Ok(())
        } else {
            Err(format!("now {now}, window end {to}"))
        }
    })
    .await;
    let window = json!({ "from": report["from"], "to": report["to"] });
    assert_eq!(without_timing(preview_in(&app, ACTIVE, window).await), without_timing(report));
}

async fn lowering_a_quota_raises_its_wait_times(backend: Backend) {
    let (app, _store) = recorded(backend).await;
    let draft = ACTIVE.replacen("nominal_quota: 4", "nominal_quota: 2", 1);
    let report = preview(&app, &draft).await;
    assert_eq!(report["identical"], false);
    let train = queue(&report, Some("train"));
    let (a, d) = (&train["active"], &train["draft"]);
    assert_eq!(a["wait_p95_s"], 0.0, "{train}");
    assert!(d["wait_p50_s"].as_f64().unwrap() > 600.0, "{train}");
    assert!(d["wait_p95_s"].as_f64().unwrap() > a["wait_p95_s"].as_f64().unwrap());
    // Everyone still runs, later; but j-live's 3 CPU never fit a quota of 2 (it would wait
    // forever, not be rejected: quotas change on apply).
    assert_eq!((a["admitted"].as_u64(), d["admitted"].as_u64(), d["never_admitted"].as_u64()), (Some(41), Some(40), Some(1)), "{train}");
    assert_eq!(ids_of(&report, "never_admitted"), BTreeSet::from(["j-live".to_string()]));
    // Other queues are untouched.
    assert_eq!(queue(&report, Some("misc"))["active"], queue(&report, Some("misc"))["draft"]);
    assert!(!ids_of(&report, "later").is_empty(), "{}", report["changes"]);
    assert!(ids_of(&report, "later").iter().all(|id| id.starts_with("j-train-")));
    // Usage over time: the draft's train cell never goes above 2, the active one does.
    let cell = report["usage"].as_array().unwrap().iter().find(|u| u["queue"] == "train").unwrap();
    assert_eq!(cell["draft_nominal"], 2.0);
    assert_eq!(cell["active_nominal"], 4.0);
    assert_eq!((cell["active_peak"].as_f64(), cell["draft_peak"].as_f64()), (Some(4.0), Some(2.0)), "{cell}");
    // Now: j-live holds 3 CPU of train, over the draft's 2; it keeps running.
    let over = report["now"]["over_quota"].as_array().unwrap();
    assert_eq!(over.len(), 1, "{}", report["now"]);
    assert_eq!(over[0]["queue"], "train");
    assert_eq!(over[0]["jobs"], json!(["j-live"]));
    assert_eq!(over[0]["used"], 3.0);
    assert!(over[0]["consequence"].as_str().unwrap().contains("keep running"));
    assert_eq!(report["now"]["preempted"], json!([]));
}

/// Halving train's quota makes it wait; the same draft with train and infer in one cohort
/// lets train borrow infer's idle CPUs: its waits fall back, and the report says infer lent.
async fn a_draft_that_adds_a_cohort_shows_the_borrowing_and_who_lent(backend: Backend) {
    let (app, _store) = recorded(backend).await;
    let low = ACTIVE.replacen("nominal_quota: 4", "nominal_quota: 2", 1);
    let pooled = low.replace("  - name: train\n", "  - name: train\n    cohort_name: lab\n").replace("  - name: infer\n", "  - name: infer\n    cohort_name: lab\n");
    let alone = preview(&app, &low).await;
    let with = preview(&app, &pooled).await;
    let (a, c) = (&queue(&alone, Some("train"))["draft"], &queue(&with, Some("train"))["draft"]);
    assert!(a["wait_p95_s"].as_f64().unwrap() > 600.0, "{a}");
    assert!(c["wait_p95_s"].as_f64().unwrap() < a["wait_p95_s"].as_f64().unwrap() / 10.0, "alone {a}\npooled {c}");
    let borrowed = c["borrowed"].as_u64().unwrap();
    assert!(borrowed > 0, "{c}");
    assert_eq!(c["lenders"], json!([{"queue": "infer", "jobs": borrowed}]), "{c}");
    assert_eq!(queue(&with, Some("infer"))["draft"]["lent"], borrowed);
    assert_eq!(a["borrowed"], 0);
    // The active side has no cohort: nothing borrowed there.
    assert_eq!(queue(&with, Some("train"))["active"]["borrowed"], 0);
}

async fn removing_the_catch_all_lists_exactly_the_jobs_it_would_reject(backend: Backend) {
    let (app, _store) = recorded(backend).await;
    let draft = ACTIVE.trim_end().strip_suffix("  - resource_queue: misc").unwrap().to_string();
    let report = preview(&app, &draft).await;
    let expected: BTreeSet<String> = (0..5).map(|k| format!("j-vision-{k}")).collect();
    assert_eq!(ids_of(&report, "rejected"), expected, "{}", report["changes"]);
    let rejected: Vec<&Value> = report["changes"].as_array().unwrap().iter().filter(|c| c["kind"] == "rejected").collect();
    assert!(rejected.iter().all(|c| c["draft"] == "rejected: no scheduling rule matches labels team=vision"), "{rejected:?}");
    assert_eq!(report["change_counts"], json!([{"kind": "rejected", "count": 5}]));
    let unrouted = queue(&report, None);
    assert_eq!(unrouted["draft"]["rejected"], 5);
    assert_eq!(unrouted["draft"]["rejections"], json!([{"reason": "no scheduling rule matches labels team=vision", "count": 5}]));
    assert_eq!(unrouted["active"]["jobs"], 0);
}

async fn raising_a_priority_bound_turns_rejections_into_clamps(backend: Backend) {
    let (app, _store) = recorded(backend).await;
    let draft = ACTIVE.replace("{default: 10, min: 0, max: 50, on_violation: reject}", "{default: 10, min: 0, max: 70, on_violation: force_update}");
    let report = preview(&app, &draft).await;
    let train = queue(&report, Some("train"));
    assert_eq!(train["active"]["rejected"], 3, "{train}");
    assert_eq!(
        train["active"]["rejections"],
        json!([{"reason": "priority 80 is above the maximum 50 allowed by scheduling_rules[0] (queue train)", "count": 3}])
    );
    assert_eq!(train["draft"]["rejected"], 0);
    assert_eq!(train["draft"]["clamped"], 3);
    let expected: BTreeSet<String> = (0..3).map(|k| format!("j-urgent-{k}")).collect();
    assert_eq!(ids_of(&report, "accepted"), expected, "{}", report["changes"]);
    for c in report["changes"].as_array().unwrap().iter().filter(|c| c["kind"] == "accepted") {
        assert!(c["draft"].as_str().unwrap().starts_with("admitted to train (priority 70)"), "{c}");
    }
}

async fn bad_drafts_and_windows_are_refused_naming_the_field(backend: Backend) {
    let (app, _store) = spawn(backend).await;
    let bad = ACTIVE.replacen("nominal_quota: 4", "nominal_quota: -1", 1);
    let (status, body) = app.post(PREVIEW, "application/json", json!({ "config": bad }).to_string(), None).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "invalid_config");
    let paths: Vec<&str> = body["error"]["details"]["problems"].as_array().unwrap().iter().map(|p| p["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&"resource_queues[0].resource_groups[0].flavors[0].resources[0].nominal_quota"), "{body}");
    for (window, field) in [(json!("forever"), "window:"), (json!({"from": "2025-01-02T00:00:00Z", "to": "2025-01-01T00:00:00Z"}), "window.to:"), (json!({"from": 1}), "window.from:")] {
        let (status, body) = app.post(PREVIEW, "application/json", json!({ "config": ACTIVE, "window": window }).to_string(), None).await;
        assert_eq!(status, 400, "{body}");
        assert!(body["error"]["message"].as_str().unwrap().starts_with(field), "{body}");
    }
    let (status, body) = app.post(PREVIEW, "application/json", json!({ "config": ACTIVE, "windw": "1h" }).to_string(), None).await;
    assert_eq!((status, body["error"]["message"].as_str().unwrap().starts_with("windw:")), (400, true), "{body}");
    let (status, body) = app.post(PREVIEW, "application/json", "{\"config\": 5}", None).await;
    assert_eq!(status, 400, "{body}");
    // A bare YAML draft works too, with the window in the query; an empty record is fine.
    let (status, body) = app.post(&format!("{PREVIEW}?window=1h"), "application/yaml", ACTIVE, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["jobs"], 0);
}

on_both_databases!(
    identical_draft_gives_identical_sides_and_reports_fidelity,
    lowering_a_quota_raises_its_wait_times,
    a_draft_that_adds_a_cohort_shows_the_borrowing_and_who_lent,
    removing_the_catch_all_lists_exactly_the_jobs_it_would_reject,
    raising_a_priority_bound_turns_rejections_into_clamps,
    bad_drafts_and_windows_are_refused_naming_the_field,
);
