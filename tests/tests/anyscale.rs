//! The unmodified public `anyscale` package (0.26.112) against a real `berth serve` with
//! authentication on, on SQLite and PostgreSQL: its SDK functions and its CLI manage config
//! versions, and its generated client reads validate, preview and the six read operations,
//! each answer checked field by field against what Berth's own `/api/v1` says about the same
//! state. The package lives in a cached venv (`.ci/anyscale.sh install`; `make test` does it);
//! `tests/data/anyscale_driver.py` runs one call per process and prints it as JSON.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use app::config::{parse, Format, SchedulerConfig};
use common::berth::Berth;
use common::{wait_until, Backend};
use serde_json::{json, Value};

/// The first admin token, in the format of tokens minted before Berth spoke the Anyscale
/// API: the SDK refuses it locally, Berth's own API still takes it.
const ADMIN: &str = "berth_admin_secret_for_anyscale_0001";
const SEED: &str = include_str!("../../app/src/config/testdata/seed_example.yaml");

/// The venv holding the package.
fn venv() -> PathBuf {
    let dir = std::env::var("BERTH_ANYSCALE_VENV").map(PathBuf::from).unwrap_or_else(|_| {
        PathBuf::from(std::env::var("HOME").expect("HOME")).join(".cache/berth-anyscale-venv")
    });
    assert!(dir.join("bin/anyscale").is_file(), "no anyscale package in {}: run `.ci/anyscale.sh install` (`make test` does)", dir.display());
    dir
}

/// The package, pointed at `berth` with `token`, as a user's shell would run it.
struct Anyscale<'a> {
    berth: &'a Berth,
    token: String,
}

/// What a CLI command did.
#[derive(Debug)]
struct Cli {
    code: i32,
    stdout: String,
    stderr: String,
}

impl<'a> Anyscale<'a> {
    fn new(berth: &'a Berth, token: &str) -> Anyscale<'a> {
        Anyscale { berth, token: token.to_string() }
    }

    fn command(&self, program: PathBuf) -> tokio::process::Command {
        let home = self.berth.dir.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let mut cmd = tokio::process::Command::new(program);
        cmd.env("ANYSCALE_HOST", &self.berth.url)
            .env("ANYSCALE_CLI_TOKEN", &self.token)
            // No PyPI lookup for the upgrade notice; no ~/.anyscale of the machine's user.
            .env("ANYSCALE_SUPPRESS_UPGRADE_WARNING", "1")
            .env("HOME", home)
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env("no_proxy", "127.0.0.1,localhost")
            .env_remove("ANYSCALE_CLI_TOKEN_FILE");
        for proxy in ["https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"] {
            cmd.env_remove(proxy);
        }
        cmd
    }

    /// Runs the driver; its JSON answer.
    async fn driver(&self, args: &[&str]) -> Value {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/anyscale_driver.py");
        let out = self.command(venv().join("bin/python")).arg(script).args(args).output().await.expect("python runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("driver {args:?}: {e}\nstdout: {stdout}\nstderr: {}", String::from_utf8_lossy(&out.stderr)))
    }

    async fn sdk(&self, args: &[&str]) -> Value {
        let mut all = vec!["sdk"];
        all.extend(args);
        self.driver(&all).await
    }

    /// The generated client: one result per call, `{"ok": …}` or `{"error": …}`.
    async fn client(&self, calls: Value) -> Vec<Value> {
        let answer = self.driver(&["client", &calls.to_string()]).await;
        answer.as_array().unwrap_or_else(|| panic!("client calls failed: {answer}")).clone()
    }

    async fn cli(&self, args: &[&str]) -> Cli {
        let out = self.command(venv().join("bin/anyscale")).args(args).output().await.expect("the anyscale CLI runs");
        Cli {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// A token minted by Berth for `user` with `role`.
async fn mint(berth: &Berth, user: &str, role: &str) -> String {
    let (status, body) = berth.post("/api/v1/tokens", &json!({"user": user, "role": role})).await;
    assert_eq!(status, 201, "{body}");
    body["secret"].as_str().unwrap().to_string()
}

/// The config Berth stores as `version`, read through `/api/v1`.
async fn stored(berth: &Berth, version: i64) -> SchedulerConfig {
    let (status, v) = berth.get(&format!("/api/v1/scheduler/config/versions/{version}")).await;
    assert_eq!(status, 200, "{v}");
    serde_json::from_value(v["config"].clone()).unwrap()
}

async fn active_version(berth: &Berth) -> i64 {
    let (status, v) = berth.get("/api/v1/scheduler/config").await;
    assert_eq!(status, 200, "{v}");
    v["version"].as_i64().unwrap()
}

fn yaml(text: &str) -> SchedulerConfig {
    parse(text, Format::Yaml).unwrap()
}

/// The message of the error the driver reports, asserting its type.
fn error_of(answer: &Value, kind: &str) -> String {
    assert_eq!(answer["error"]["type"], kind, "{answer}");
    answer["error"]["message"].as_str().unwrap().to_string()
}

fn time(text: &Value) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(text.as_str().unwrap_or_else(|| panic!("not a time: {text}"))).unwrap().into()
}

/// Apply, read back, list and page, get a version, roll back, and the errors a user sees,
/// through the SDK's public functions and the CLI.
async fn the_sdk_and_the_cli_manage_config_versions(backend: Backend) {
    let berth = Berth::start_authenticated(backend, ADMIN, &[]).await;
    let editor = mint(&berth, "ci-bot", "editor").await;
    assert!(editor.starts_with("sss_"), "a token the SDK accepts: {editor}");
    let sdk = Anyscale::new(&berth, &editor);

    // The seed example: applied, stored exactly, read back equal by the SDK's own model.
    let seed = berth.file("seed.yaml", SEED);
    let applied = sdk.sdk(&["apply", &seed]).await;
    assert_eq!(applied["version"], 2, "{applied}");
    assert_eq!(stored(&berth, 2).await, yaml(SEED));
    let got = sdk.sdk(&["get", "--equals", &seed]).await;
    assert_eq!((&got["version"], &got["is_active"], &got["creator_id"], &got["equals_file"]), (&json!(2), &json!(true), &json!("ci-bot"), &json!(true)), "{got}");

    // The package's own example (cohorts, lending and borrowing limits, an instance config).
    let example = sdk.driver(&["example"]).await.as_str().unwrap().to_string();
    let example_text = std::fs::read_to_string(&example).unwrap();
    assert_eq!(sdk.sdk(&["apply", &example]).await["version"], 3);
    assert_eq!(stored(&berth, 3).await, yaml(&example_text));
    let got = sdk.sdk(&["get", "--equals", &example]).await;
    assert_eq!((&got["version"], &got["equals_file"]), (&json!(3), &json!(true)), "{got}");
    let old = sdk.sdk(&["get", "2", "--equals", &seed]).await;
    assert_eq!((&old["version"], &old["is_active"], &old["equals_file"]), (&json!(2), &json!(false), &json!(true)), "{old}");
    let (_, v1) = berth.get("/api/v1/scheduler/config/versions/3").await;
    assert_eq!(time(&got["created_at"]), time(&v1["created_at"]));

    // More than one page of versions (the API pages by at most 50).
    for i in 0..55 {
        let body = if i % 2 == 0 { SEED } else { example_text.as_str() };
        let r = berth.http.post(format!("{}/api/v1/scheduler/config", berth.url)).header("content-type", "application/yaml").body(body.to_string()).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }
    let listed = sdk.sdk(&["list", "60"]).await;
    let listed = listed.as_array().unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(listed.len(), 58, "every version, over two pages");
    let (_, page) = berth.get("/api/v1/scheduler/config/versions?max_items=100").await;
    let v1: &Vec<Value> = page["versions"].as_array().unwrap();
    for (sdk_v, v1_v) in listed.iter().zip(v1) {
        assert_eq!((&sdk_v["version"], &sdk_v["creator_id"]), (&v1_v["version"], &v1_v["creator_id"]));
        assert_eq!(time(&sdk_v["created_at"]), time(&v1_v["created_at"]));
    }
    assert_eq!(listed.iter().map(|v| v["version"].as_i64().unwrap()).collect::<Vec<_>>(), (1..=58).rev().collect::<Vec<_>>());
    // On the wire: a page of 50 with a token, then the rest without one; 51 is refused.
    let (_, first) = berth.get("/api/v2/scheduler/config/versions?count=50").await;
    let token = first["metadata"]["next_paging_token"].as_str().unwrap().to_string();
    let (_, second) = berth.get(&format!("/api/v2/scheduler/config/versions?count=50&paging_token={token}")).await;
    assert_eq!((first["results"].as_array().unwrap().len(), second["results"].as_array().unwrap().len()), (50, 8));
    assert_eq!(second["metadata"], json!({"next_paging_token": null}));
    let (status, refused) = berth.get("/api/v2/scheduler/config/versions?count=51").await;
    assert_eq!((status, refused["error"]["message"].as_str()), (400, Some("count: must be between 0 and 50, got 51")));
    let cli = sdk.cli(&["scheduler", "config", "list", "--max-items", "55", "-o", "json"]).await;
    assert_eq!(cli.code, 0, "{cli:?}");
    let cli_list: Vec<Value> = serde_json::from_str(&cli.stdout).unwrap_or_else(|e| panic!("{e}: {cli:?}"));
    assert_eq!(cli_list.iter().map(|v| &v["version"]).collect::<Vec<_>>(), listed[..55].iter().map(|v| &v["version"]).collect::<Vec<_>>());

    // One version through the CLI.
    let cli = sdk.cli(&["scheduler", "config", "get", "--version", "2", "-o", "json"]).await;
    assert_eq!(cli.code, 0, "{cli:?}");
    let shown: Value = serde_json::from_str(&cli.stdout).unwrap_or_else(|e| panic!("{e}: {cli:?}"));
    assert_eq!((&shown["version"], &shown["config"]), (&json!(2), &sdk.sdk(&["get", "2"]).await["config"]));

    // Roll back with the SDK, then with the CLI: each is a new version with the old config.
    let back = sdk.sdk(&["rollback", "2"]).await;
    assert_eq!(back["version"], 59, "{back}");
    assert_eq!((active_version(&berth).await, stored(&berth, 59).await), (59, yaml(SEED)));
    let (_, v59) = berth.get("/api/v1/scheduler/config/versions/59").await;
    assert_eq!((&v59["message"], &v59["creator_id"]), (&json!("rollback to version 2"), &json!("ci-bot")));
    let cli = sdk.cli(&["scheduler", "config", "rollback", "--version", "3", "-y"]).await;
    assert_eq!(cli.code, 0, "{cli:?}");
    assert!(format!("{}{}", cli.stdout, cli.stderr).contains("applied as version 60"), "{cli:?}");
    assert_eq!((active_version(&berth).await, stored(&berth, 60).await), (60, yaml(&example_text)));

    // Server-side refusals come back as the SDK's ValueError and the CLI's exit 1, with
    // Berth's message; nothing is stored.
    let unknown_queue = json!({"resource_queues": [{"name": "q"}], "scheduling_rules": [{"resource_queue": "nowhere"}]});
    let message = error_of(&sdk.sdk(&["apply-dict", &unknown_queue.to_string()]).await, "ValueError");
    assert!(message.contains("scheduling_rules[0].resource_queue: no queue named `nowhere` is defined"), "{message}");
    let unknown_flavor = json!({"resource_queues": [{"name": "q", "resource_groups": [{"covered_resources": ["gpu"], "flavors": [{"name": "ghost"}]}]}]});
    let message = error_of(&sdk.sdk(&["apply-dict", &unknown_flavor.to_string()]).await, "ValueError");
    assert!(message.contains("resource_queues[0].resource_groups[0].flavors[0].name: no flavor named `ghost` is defined"), "{message}");
    assert_eq!(error_of(&sdk.sdk(&["get", "999"]).await, "ValueError"), "config version 999 does not exist");
    assert_eq!(error_of(&sdk.sdk(&["rollback", "999"]).await, "ValueError"), "config version 999 does not exist");
    let bad = berth.file("bad.yaml", "resource_queues:\n  - name: q\nscheduling_rules:\n  - resource_queue: nowhere\n");
    let ghost = berth.file("ghost.yaml", "resource_queues:\n  - name: q\n    resource_groups:\n      - covered_resources: [gpu]\n        flavors: [{name: ghost}]\n");
    for (args, says) in [
        (vec!["scheduler", "config", "apply", "-f", bad.as_str(), "-y"], "no queue named `nowhere` is defined"),
        (vec!["scheduler", "config", "apply", "-f", ghost.as_str(), "-y"], "no flavor named `ghost` is defined"),
        (vec!["scheduler", "config", "get", "--version", "999"], "config version 999 does not exist"),
        (vec!["scheduler", "config", "rollback", "--version", "999", "-y"], "config version 999 does not exist"),
    ] {
        let cli = sdk.cli(&args).await;
        assert_eq!(cli.code, 1, "{args:?}: {cli:?}");
        assert!(cli.stderr.contains("Error: ") && cli.stderr.contains(says), "{args:?}: {cli:?}");
    }
    assert_eq!(active_version(&berth).await, 60, "nothing refused was stored");

    // Roles hold as on /api/v1; a token Berth does not know is refused at the handshake;
    // the old token format is refused by the SDK itself but still works on /api/v1.
    let viewer = Anyscale::new(&berth, &mint(&berth, "watcher", "viewer").await);
    let message = error_of(&viewer.sdk(&["apply", &seed]).await, "ValueError");
    assert_eq!(message, "applying a config needs the editor role; watcher is a viewer");
    assert_eq!(viewer.sdk(&["get"]).await["version"], 60);
    let stranger = Anyscale::new(&berth, "sss_berth_0000000000000000000000000000000000000000000000000000000000000000");
    let message = error_of(&stranger.sdk(&["get"]).await, "ClickException");
    assert!(message.contains("are invalid or have expired"), "{message}");
    let old_format = Anyscale::new(&berth, ADMIN);
    let message = error_of(&old_format.sdk(&["get"]).await, "ClickException");
    assert!(message.starts_with("Your user credentials are invalid"), "{message}");
    assert_eq!(berth.get("/api/v1/whoami").await, (200, json!({"user": "admin", "role": "admin", "via": "token"})));
}

/// The config of the read test: `research` holds one CPU, `batch` is unlimited.
const QUEUES: &str = r#"resource_flavors:
  - name: local
resource_queues:
  - name: research
    cohort_name: lab
    resource_groups:
      - covered_resources: [cpu]
        flavors:
          - name: local
            resources:
              - name: cpu
                nominal_quota: 1
  - name: batch
    resource_groups:
      - covered_resources: [cpu, memory_gb]
        flavors:
          - name: local
scheduling_rules:
  - resource_queue: research
    selector:
      - key: team
        operator: in
        values: [research]
  - resource_queue: batch
"#;

/// What `research` would route to `batch`: the draft of the preview.
const DRAFT: &str = r#"{
  "resource_flavors": [{"name": "local"}],
  "resource_queues": [
    {"name": "research", "resource_groups": [{"covered_resources": ["cpu"], "flavors": [{"name": "local"}]}]},
    {"name": "batch", "resource_groups": [{"covered_resources": ["cpu", "memory_gb"], "flavors": [{"name": "local"}]}]}
  ],
  "scheduling_rules": [
    {"resource_queue": "research", "selector": [{"key": "team", "operator": "in", "values": ["ml"]}]},
    {"resource_queue": "research", "selector": [{"key": "tier", "operator": "exists"}]},
    {"resource_queue": "batch"}
  ]
}"#;

/// Validate, preview and the six read operations through the generated client, against
/// `/api/v1`'s answers for the same state: two jobs running, two waiting behind a full
/// quota, one refused at submit, one succeeded and one failed.
async fn the_generated_client_reads_what_v1_shows(backend: Backend) {
    let berth = Berth::start_authenticated(backend, ADMIN, &["--local-cpus", "2", "--local-memory-gb", "8", "--local-gpus", "0"]).await;
    let version = berth.apply(QUEUES).await;
    let ann = mint(&berth, "ann", "submitter").await;
    let as_ann = |body: Value| {
        let (http, url, ann) = (berth.http.clone(), berth.url.clone(), ann.clone());
        async move {
            let r = http.post(format!("{url}/api/v1/jobs")).bearer_auth(ann).json(&body).send().await.unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap())
        }
    };
    let job = |team: &str, cmd: &str, priority: i64| json!({"entrypoint": cmd, "labels": {"team": team}, "resources": {"cpu": 1}, "priority": priority});
    let (_, ok) = as_ann(job("batch", "true", 0)).await;
    let (_, failed) = as_ann(job("batch", "exit 3", 0)).await;
    for id in [&ok["id"], &failed["id"]] {
        berth.wait_state(id.as_str().unwrap(), &["succeeded", "failed"], Duration::from_secs(30)).await;
    }
    let (_, r1) = as_ann(job("research", "sleep 300", 5)).await;
    let (_, b1) = as_ann(job("batch", "sleep 300", 0)).await;
    for id in [&r1["id"], &b1["id"]] {
        berth.wait_state(id.as_str().unwrap(), &["running"], Duration::from_secs(30)).await;
    }
    let (_, r2) = as_ann(job("research", "sleep 300", 3)).await;
    let (_, r3) = as_ann(job("research", "sleep 300", 7)).await;
    let (status, refused) = as_ann(json!({"entrypoint": "true", "labels": {"team": "research"}, "resources": {"gpu": 1}})).await;
    assert_eq!(status, 422, "{refused}");
    let research = wait_until("research's two waiting jobs ranked", Duration::from_secs(30), async || {
        let (_, q) = berth.get("/api/v1/queues/research").await;
        let ranked = q["pending"].as_array().is_some_and(|p| p.len() == 2 && p.iter().all(|j| j["position"].as_u64() > Some(0)));
        if ranked { Ok(q) } else { Err(q.to_string()) }
    })
    .await;
    let id = |j: &Value| j["id"].as_str().unwrap().to_string();
    let (r1, r2, r3, b1) = (id(&r1), id(&r2), id(&r3), id(&b1));

    let client = Anyscale::new(&berth, &mint(&berth, "lead", "viewer").await);
    let draft: Value = serde_json::from_str(DRAFT).unwrap();
    let mut draft_with_extension = draft.clone();
    draft_with_extension["resource_queues"][1]["placement_policy"] = json!("spread");
    let invalid = json!({"scheduling_rules": [{"resource_queue": "nowhere"}]});
    let answers = client
        .client(json!([
            ["validate", {"config": serde_json::from_str::<Value>(&serde_json::to_string(&yaml(QUEUES)).unwrap()).unwrap()}],
            ["validate", {"config": invalid}],
            ["preview", {"config": draft_with_extension, "include_applied_comparison": true}],
            ["overview", {}],
            ["queues", {"limit": 1}],
            ["queues", {"limit": 1, "paging_token": "1"}],
            ["queue", {"queue_id": "research"}],
            ["workloads", {"queue_id": "research", "state": "pending"}],
            ["workloads", {"queue_id": "research", "state": "running"}],
            ["top_consumers", {}],
            ["top_consumers", {"queue_id": "research"}],
            ["queue", {"queue_id": "nope"}],
        ]))
        .await;
    let ok = |i: usize| answers[i].get("ok").cloned().unwrap_or_else(|| panic!("call {i}: {}", answers[i]));

    // Validate: 2xx (no body) when valid; a 422 with Berth's message when not.
    assert_eq!(ok(0), Value::Null);
    assert_eq!(answers[1]["error"]["status"], 422, "{}", answers[1]);
    let message = answers[1]["error"]["body"]["error"]["message"].as_str().unwrap();
    assert!(message.contains("no queue named `nowhere` is defined"), "{message}");

    // Preview: the seven recorded jobs in two label sets, research's rerouted by the draft.
    let preview = &ok(2)["result"];
    let (_, jobs) = berth.get("/api/v1/jobs?max_items=100").await;
    assert_eq!(preview["corpus"]["total_events"], jobs["jobs"].as_array().unwrap().len());
    assert_eq!((&preview["corpus"]["distinct_combos"], &preview["corpus"]["truncated"], &preview["preview_unavailable"]), (&json!(2), &json!(false), &json!(false)));
    let verdicts = preview["verdicts"].as_array().unwrap();
    let research_set = verdicts.iter().find(|v| v["labels"] == json!({"team": "research"})).unwrap();
    assert_eq!(
        (&research_set["run_count"], &research_set["queue_name"], &research_set["matched_rule_index"], &research_set["no_rule_matched"], &research_set["applied_queue_name"], &research_set["applied_no_rule_matched"]),
        (&json!(4), &json!("batch"), &json!(2), &json!(false), &json!("research"), &json!(false)),
        "{research_set}"
    );
    assert_eq!(preview["unevaluable_rules"], json!([{"rule_index": 1, "unknown_keys": ["tier"]}]));
    let lint = preview["lint"].as_array().unwrap();
    assert!(lint.iter().any(|l| l["code"] == "not_readable_by_sdk" && l["message"].as_str().unwrap().starts_with("resource_queues[1].placement_policy: not readable by the anyscale SDK")), "{lint:?}");

    // Overview: totals, utilization and topology as /api/v1 shows them.
    let overview = &ok(3)["result"];
    let (_, queues) = berth.get("/api/v1/queues").await;
    let (_, nodes) = berth.get("/api/v1/nodes").await;
    let queues = queues["queues"].as_array().unwrap();
    let running: u64 = queues.iter().map(|q| q["running_count"].as_u64().unwrap()).sum();
    let pending: u64 = queues.iter().map(|q| q["pending_count"].as_u64().unwrap()).sum();
    assert_eq!(overview["totals"]["nodes"], json!({"running": running, "admitted": 0, "pending": pending}));
    assert_eq!((running, pending), (2, 2));
    assert_eq!(overview["totals"]["workloads"], json!({"running": 2, "pending": 2}));
    assert_eq!(overview["totals"]["active_workloads"], 4);
    let cpus = nodes["nodes"][0]["capacity"]["cpu"].as_f64().unwrap();
    let cpu = overview["utilization"].as_array().unwrap().iter().find(|u| u["flavor"] == "local" && u["resource"] == "cpu").unwrap();
    assert_eq!((cpu["used"].as_f64(), cpu["ceiling"].as_f64(), cpu["headroom"].as_f64(), cpu["utilization"].as_f64()), (Some(2.0), Some(cpus), Some(cpus - 2.0), Some(2.0 / cpus)));
    assert_eq!(overview["clouds"], json!([{"cloud_id": "local", "market": null, "nodes": {"running": 2, "admitted": 0, "pending": 0}, "workloads": {"running": 2, "pending": 0}}]));
    let topology = &overview["topology"];
    assert_eq!((&topology["active_queues"], &topology["active_flavors"], &topology["active_rules"], &topology["active_cohorts"], &topology["config_version"]), (&json!(2), &json!(1), &json!(2), &json!(1), &json!(version)));
    let (_, active) = berth.get("/api/v1/scheduler/config").await;
    assert_eq!(time(&topology["config_updated_at"]), time(&active["created_at"]));

    // Queues, one per page, against /api/v1/queues.
    let (page1, page2) = (ok(4), ok(5));
    assert_eq!((&page1["metadata"]["next_paging_token"], &page1["metadata"]["total"]), (&json!("1"), &json!(2)));
    assert_eq!(page2["metadata"]["next_paging_token"], Value::Null);
    for (row, v1) in [(&page1["results"][0], &queues[0]), (&page2["results"][0], &queues[1])] {
        assert_eq!((&row["queue_id"], &row["queue"]), (&v1["name"], &v1["name"]));
        assert_eq!(row["workloads"], json!({"running": v1["running_count"], "pending": v1["pending_count"]}));
        for cell in v1["usage"].as_array().unwrap() {
            let q = row["quota"].as_array().unwrap().iter().find(|c| c["flavor"] == cell["flavor"] && c["resource"] == cell["resource"]).unwrap();
            let ceiling = cell["nominal"].as_f64().unwrap_or(nodes["nodes"][0]["capacity"][cell["resource"].as_str().unwrap()].as_f64().unwrap());
            assert_eq!((q["used"].as_f64(), q["ceiling"].as_f64()), (cell["used"].as_f64(), Some(ceiling)), "{q} vs {cell}");
        }
    }
    assert_eq!((&page1["results"][0]["cohort"], &page2["results"][0]["cohort"]), (&json!("lab"), &Value::Null));
    assert_eq!(page1["results"][0]["quota"][0], json!({"flavor": "local", "resource": "cpu", "used": 1.0, "ceiling": 1.0, "headroom": 0.0, "utilization": 1.0}));

    // One queue, and its workloads: waiting ones in /api/v1's order with its positions.
    assert_eq!(ok(6)["result"], json!({"queue": "research", "summary": {"running_workloads": 1, "pending_workloads": 2, "nodes": {"running": 1, "admitted": 0, "pending": 2}, "market": null}}));
    let waiting = ok(7)["results"].as_array().unwrap().clone();
    let v1_waiting = research["pending"].as_array().unwrap();
    assert_eq!(waiting.iter().map(|w| w["cluster_id"].as_str().unwrap()).collect::<Vec<_>>(), [r3.as_str(), r2.as_str()]);
    for (w, v1) in waiting.iter().zip(v1_waiting) {
        assert_eq!((&w["cluster_id"], &w["queue_position"], &w["priority"]), (&v1["id"], &v1["position"], &v1["priority"]));
        assert_eq!((&w["status"], &w["cloud_id"], &w["plan_id"], &w["requested_resources"]), (&json!("QUEUED"), &json!(""), &json!(""), &json!({"cpu": 1.0})));
        assert_eq!(w["nodes"], json!({"requested": 1, "admitted": 0, "running": 0, "pending": 1}));
    }
    let holding = ok(8)["results"].as_array().unwrap().clone();
    let (_, r1_v1) = berth.get(&format!("/api/v1/jobs/{r1}")).await;
    assert_eq!(holding.len(), 1);
    let w = &holding[0];
    assert_eq!((&w["cluster_id"], &w["status"], &w["cloud_id"], &w["flavors"]), (&json!(r1), &json!("RUNNING"), &r1_v1["backend"], &json!(["local"])));
    assert_eq!((w["plan_id"].as_str(), &w["priority"], &w["url"]), (Some(format!("{r1}-r1").as_str()), &r1_v1["priority"], &json!(format!("/jobs/{r1}"))));
    assert_eq!(time(&w["created_at"]), time(&r1_v1["submitted_at"]));

    // Top consumers: the running jobs, the longest running first.
    let top: Vec<String> = ok(9)["results"].as_array().unwrap().iter().map(|c| c["cluster_id"].as_str().unwrap().to_string()).collect();
    assert_eq!(top, [r1.clone(), b1.clone()]);
    assert_eq!(ok(10)["results"].as_array().unwrap().iter().map(|c| c["cluster_id"].clone()).collect::<Vec<_>>(), [json!(r1)]);
    assert!(ok(9)["results"][0]["duration_seconds"].as_i64().unwrap() >= 0);
    assert_eq!(answers[11]["error"]["status"], 404);
    assert_eq!(answers[11]["error"]["body"]["error"]["message"], "queue `nope` is not in the active config");

    events_match_v1(&berth, &client, [&r1, &b1]).await;
}

/// Events through the generated client: newest first, paged, and each filter, against
/// `/api/v1/events`.
async fn events_match_v1(berth: &Berth, client: &Anyscale<'_>, [r1, b1]: [&String; 2]) {
    let all_v1 = berth.events("order=newest").await;
    let at = |e: &Value| e["at"].as_str().unwrap().to_string();
    let middle = &all_v1[all_v1.len() / 2];
    let answers = client
        .client(json!([
            ["events", {"count": 3}],
            ["events", {"count": 100}],
            ["events", {"event_type": ["REQUEST_FAILED"]}],
            ["events", {"event_type": ["REQUEST_RELEASED", "REQUEST_REJECTED"]}],
            ["events", {"level": ["WARNING"]}],
            ["events", {"queue_name": ["research"], "event_type": ["REQUEST_ADMITTED"]}],
            ["events", {"cluster_id": r1, "order_desc": false}],
            ["events", {"user_id": "ann", "count": 100}],
            ["events", {"flavor_name": ["local"], "cloud_id": "local", "count": 100}],
            ["events", {"start_time": at(middle), "end_time": at(middle)}],
            ["events", {"project_id": "prj_1"}],
            ["events", {"search_id": format!("ev-{}", middle["seq"])}],
        ]))
        .await;
    let results = |i: usize| answers[i]["ok"]["results"].as_array().unwrap_or_else(|| panic!("events call {i}: {}", answers[i])).clone();
    let ids = |rs: &[Value]| rs.iter().map(|r| r["id"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let v1_ids = |es: &[Value]| es.iter().map(|e| format!("ev-{}", e["seq"])).collect::<Vec<_>>();

    // Newest first by default, the first page ending in a token, every field from /api/v1.
    let first = results(0);
    assert_eq!(ids(&first), v1_ids(&all_v1[..3]));
    assert!(answers[0]["ok"]["metadata"]["next_paging_token"].is_string());
    let everything = results(1);
    assert_eq!(ids(&everything), v1_ids(&all_v1));
    for (r, e) in everything.iter().zip(&all_v1) {
        assert_eq!((&r["message"], &r["queue_name"], &r["cluster_id"], &r["organization_id"]), (&e["message"], &e["queue"], &e["job_id"], &json!("org_berth")));
        assert_eq!((time(&r["event_timestamp"]), &r["metadata_json"]["kind"]), (time(&e["at"]), &e["kind"]));
    }
    let typed = |i: usize| results(i).iter().map(|r| (r["event_type"].as_str().unwrap().to_string(), r["message"].as_str().unwrap().to_string())).collect::<Vec<_>>();
    assert_eq!(typed(2), [("REQUEST_FAILED".to_string(), "exited with code 3".to_string())]);
    let released_or_rejected = typed(3);
    assert_eq!(released_or_rejected.iter().map(|t| t.0.as_str()).collect::<Vec<_>>(), ["REQUEST_REJECTED", "REQUEST_RELEASED"]);
    let warnings = results(4);
    assert_eq!(warnings.iter().map(|r| (&r["level"], &r["event_type"])).collect::<Vec<_>>(), [(&json!("WARNING"), &json!("REQUEST_REJECTED"))]);
    let admitted = results(5);
    assert_eq!(admitted.iter().map(|r| r["cluster_id"].as_str().unwrap()).collect::<Vec<_>>(), [r1.as_str()]);
    // One job's events, oldest first: its history on /api/v1.
    let (_, r1_v1) = berth.get(&format!("/api/v1/jobs/{r1}")).await;
    assert_eq!(ids(&results(6)), v1_ids(r1_v1["history"].as_array().unwrap()));
    assert!(results(6).iter().all(|r| r["user_id"] == "ann" && r["user_email"] == "ann@berth.local" && r["workload_type"] == "JOB"));
    // ann submitted every job: every job event is hers; the configs' are the admin's.
    let anns = results(7);
    assert_eq!(anns.len(), all_v1.iter().filter(|e| e["job_id"].is_string()).count());
    let admins = client.client(json!([["events", {"user_id": "admin", "count": 100}]])).await;
    let admins = admins[0]["ok"]["results"].as_array().unwrap().clone();
    assert_eq!(ids(&admins), v1_ids(&all_v1.iter().filter(|e| e["kind"] == "config_applied" && e["config_version"] != 1).cloned().collect::<Vec<_>>()));
    let on_local = results(8);
    let v1_on_local: Vec<&Value> = all_v1.iter().filter(|e| e["flavor"] == "local").collect();
    assert_eq!(on_local.len(), v1_on_local.len());
    assert!(on_local.iter().any(|r| r["cluster_id"] == json!(b1)) && on_local.iter().all(|r| r["cloud_id"] == "local"));
    // Both ends of the time range are inclusive.
    assert!(ids(&results(9)).contains(&format!("ev-{}", middle["seq"])), "{:?}", results(9));
    assert!(results(10).is_empty(), "no Berth event belongs to a project");
    assert_eq!(ids(&results(11)), [format!("ev-{}", middle["seq"])]);
    let config_event = everything.iter().find(|r| r["event_type"] == "CONFIG_UPDATED").unwrap();
    assert_eq!((&config_event["user_id"], &config_event["level"]), (&json!("admin"), &json!("INFO")));

    // The next page continues where the first stopped.
    let token = answers[0]["ok"]["metadata"]["next_paging_token"].as_str().unwrap();
    let next = client.client(json!([["events", {"count": 3, "paging_token": token}]])).await;
    let next_ids = ids(next[0]["ok"]["results"].as_array().unwrap());
    assert_eq!(next_ids, v1_ids(&all_v1[3..6]));
}

on_both_databases!(the_sdk_and_the_cli_manage_config_versions, the_generated_client_reads_what_v1_shows);
