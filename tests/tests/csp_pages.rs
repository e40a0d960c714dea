//! Every server-rendered page, with and without data, and the error pages (an unknown path,
//! an unknown job, stage, queue, cohort or version, a bad version number): the nonce in the
//! response's Content-Security-Policy is the nonce on every `<script>` of the page, so the
//! browser runs all of them and the page hydrates. (Rendering does not depend on the
//! database, so this runs on SQLite only.)

mod common;

use common::{fresh_database, Backend, TestApp};
use serde_json::json;
use server::state::RuntimeOptions;

const ADMIN: &str = "berth_admin_secret_for_csp_tests_01";

/// Two queues in a cohort and a catch-all rule: every page has something to show.
const CONFIG: &str = r#"resource_flavors:
  - name: local
resource_queues:
  - name: default
    cohort_name: shared
    resource_groups:
      - covered_resources: [cpu, memory_gb]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 1}, {name: memory_gb, nominal_quota: 1}]}]
  - name: research
    cohort_name: shared
    resource_groups:
      - covered_resources: [cpu, memory_gb]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 1}, {name: memory_gb, nominal_quota: 1}]}]
scheduling_rules:
  - resource_queue: default
"#;

/// The pages every install has (no id in the path).
const PAGES: &[&str] = &[
    "/",
    "/jobs",
    "/jobs?state=pending",
    "/jobs/new",
    "/events",
    "/history",
    "/history?range=1h",
    "/config",
    "/config/versions",
    "/config/versions/1",
    "/config/diff",
    "/config/diff?from=1&to=1",
    "/queues/default",
    "/admin/tokens",
    "/admin/audit",
    "/signin",
];

/// Paths that name nothing, or name it badly.
const ERRORS: &[&str] = &[
    "/no-such-page",
    "/no/such/page/at/all",
    "/jobs/no-such-job",
    "/stages/no-such-stage",
    "/queues/no-such-queue",
    "/cohorts/no-such-cohort",
    "/config/versions/999",
    "/config/versions/not-a-number",
    "/config/diff?from=abc&to=-1",
    "/jobs?state=bogus",
    "/history?range=forever",
    "/events?kind=bogus",
];

async fn spawn() -> TestApp {
    let db_url = fresh_database(Backend::Sqlite).await;
    let data_dir = std::env::temp_dir().join(format!("berth_csp_{}", server::clock::new_id("d")));
    let mut options = RuntimeOptions::local(data_dir.clone());
    options.access.anonymous = false;
    options.access.admin_token = Some(ADMIN.into());
    options.settings.workdir_roots = vec![data_dir];
    TestApp::spawn_with(db_url, options).await
}

/// GETs `path` as the admin; its status, the policy's nonce and the page.
async fn page(app: &TestApp, path: &str) -> (u16, String, String) {
    let r = app.http.get(format!("{}{path}", app.url)).bearer_auth(ADMIN).send().await.unwrap();
    let status = r.status().as_u16();
    let csp = r.headers().get("content-security-policy").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let html = r.text().await.unwrap();
    let nonce = csp.split("'nonce-").nth(1).and_then(|t| t.split('\'').next()).unwrap_or_default().to_string();
    assert!(!nonce.is_empty(), "{path} ({status}): no nonce in its policy {csp:?}");
    (status, nonce, html)
}

/// The opening `<script …>` tags of `html`.
fn script_tags(html: &str) -> Vec<&str> {
    html.match_indices("<script").filter_map(|(at, _)| html[at..].find('>').map(|end| &html[at..=at + end])).collect()
}

/// Checks every script of `path` carries the nonce of its policy; returns the status.
async fn nonces_match(app: &TestApp, path: &str) -> u16 {
    let (status, nonce, html) = page(app, path).await;
    assert!(html.contains("<html"), "{path} ({status}) is not a page: {html:.300}");
    let tags = script_tags(&html);
    assert!(tags.iter().any(|t| t.contains("type=\"module\"")), "{path} ({status}): no module script starts the wasm");
    let wanted = format!("nonce=\"{nonce}\"");
    for tag in &tags {
        assert!(tag.contains(&wanted), "{path} ({status}): a script without this response's nonce {nonce}: {tag}");
    }
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_and_error_page_carries_its_policys_nonce_on_every_script() {
    let app = spawn().await;

    // A fresh install: version 1, no jobs.
    for path in PAGES {
        assert_eq!(nonces_match(&app, path).await, 200, "{path}");
    }

    // With data: a config with a cohort, jobs in several states, a stage.
    let r = app.http.post(format!("{}/api/v1/scheduler/config", app.url)).bearer_auth(ADMIN).header("content-type", "application/yaml").body(CONFIG).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
    let submit = |body: serde_json::Value| {
        let req = app.http.post(format!("{}/api/v1/jobs", app.url)).bearer_auth(ADMIN).json(&body);
        async move { req.send().await.unwrap().json::<serde_json::Value>().await.unwrap() }
    };
    let done = submit(json!({ "name": "quick", "entrypoint": "true", "resources": { "memory_gb": 0.001 } })).await;
    let waiting = submit(json!({ "name": "too-big", "entrypoint": "sleep 60", "resources": { "cpu": 1, "memory_gb": 0.001 } })).await;
    let stage = app.http.post(format!("{}/api/v1/stages", app.url)).bearer_auth(ADMIN)
        .json(&json!({ "name": "sweep", "jobs": [{ "name": "a", "entrypoint": "echo a", "resources": { "memory_gb": 0.001 } }] }))
        .send().await.unwrap().json::<serde_json::Value>().await.unwrap();
    let ids = [&done["id"], &waiting["id"], &stage["stage_id"]].map(|v| v.as_str().unwrap_or_else(|| panic!("an id: {done} {waiting} {stage}")).to_string());
    let mut with_data: Vec<String> = PAGES.iter().map(|p| p.to_string()).collect();
    with_data.extend([
        format!("/jobs/{}", ids[0]),
        format!("/jobs/{}", ids[1]),
        format!("/stages/{}", ids[2]),
        "/queues/research".into(),
        "/cohorts/shared".into(),
        "/config/versions/2".into(),
        "/config/diff?from=1&to=2".into(),
        "/jobs?queue=default".into(),
    ]);
    for path in &with_data {
        assert_eq!(nonces_match(&app, path).await, 200, "{path}");
    }

    // Error pages render the same shell, with their own response's nonce.
    for path in ERRORS {
        let status = nonces_match(&app, path).await;
        assert!(status == 200 || status == 404, "{path}: {status}");
    }
    assert_eq!(nonces_match(&app, "/no-such-page").await, 404);

    // Signed out: the sign-in page, and where a page redirects to.
    let r = reqwest::get(format!("{}/signin?next=%2Fjobs", app.url)).await.unwrap();
    let csp = r.headers()["content-security-policy"].to_str().unwrap().to_string();
    let nonce = csp.split("'nonce-").nth(1).and_then(|t| t.split('\'').next()).unwrap().to_string();
    let html = r.text().await.unwrap();
    let tags = script_tags(&html);
    assert!(!tags.is_empty() && tags.iter().all(|t| t.contains(&format!("nonce=\"{nonce}\""))), "{tags:?}");
}

#[test]
fn script_tags_are_found_whole() {
    let html = r#"<head><script type="module" nonce="a">x</script></head><body><script nonce="b">y</script>"#;
    assert_eq!(script_tags(html), vec![r#"<script type="module" nonce="a">"#, r#"<script nonce="b">"#]);
}
