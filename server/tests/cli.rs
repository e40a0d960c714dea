//! The real `berth` binary: `berth serve` in a child process, and the `config` commands run
//! against it as a user would run them.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_berth");
const SEED: &str = include_str!("../../app/src/config/testdata/seed_example.yaml");

/// The first admin token of every test server (given, so the tests know it).
const ADMIN_TOKEN: &str = "berth_test_admin_0123456789abcdef";

/// A `berth serve` child on a free port over a fresh SQLite file, with authentication on;
/// killed on drop. `berth` runs commands as carol, an editor, with her own token.
struct Server {
    child: Child,
    url: String,
    dir: PathBuf,
    token: String,
}

impl Server {
    fn start() -> Server {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = std::env::temp_dir().join(format!("berth-cli-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let child = Command::new(BIN)
            .args(["serve", "--addr", &format!("127.0.0.1:{port}")])
            .args(["--database-url", &format!("sqlite://{}/berth.db", dir.display())])
            .args(["--data-dir", &format!("{}/data", dir.display()), "--tick-ms", "50"])
            .env("RUST_LOG", "warn")
            .env("BERTH_ADMIN_TOKEN", ADMIN_TOKEN)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "berth serve did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut server = Server { child, url: format!("http://127.0.0.1:{port}"), dir, token: String::new() };
        let out = server.berth_with(ADMIN_TOKEN, &["tokens", "create", "--user", "carol", "--role", "editor", "--label", "cli test"]);
        assert!(out.status.success(), "{}", stderr(&out));
        server.token = stdout(&out).trim().to_string();
        assert!(server.token.starts_with("sss_berth_"), "the secret is printed alone on stdout: {}", stdout(&out));
        server
    }

    fn berth(&self, args: &[&str]) -> Output {
        self.berth_with(&self.token, args)
    }

    fn berth_with(&self, token: &str, args: &[&str]) -> Output {
        Command::new(BIN).args(["--server", &self.url, "--token", token]).args(args).current_dir(&self.dir).output().unwrap()
    }

    fn file(&self, name: &str, text: &str) -> String {
        let path = self.dir.join(name);
        std::fs::File::create(&path).unwrap().write_all(text.as_bytes()).unwrap();
        path.display().to_string()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn apply_get_versions_diff_rollback() {
    let server = Server::start();
    let seed = server.file("seed.yaml", SEED);
    let out = server.berth(&["config", "apply", "-f", &seed, "--message", "first real config"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("applied version 2\n"), "{text}");
    // The seed's only rule has a selector: the CLI passes on the validator's warning.
    assert!(text.contains("warning: scheduling_rules: no rule is a catch-all"), "{text}");

    let smaller = server.file("smaller.yaml", &SEED.replace("nominal_quota: 64", "nominal_quota: 16"));
    let out = server.berth(&["config", "apply", "-f", &smaller, "-o", "json"]);
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(body["version"], 3);

    // `get` prints canonical YAML, ready to apply again; -o json gives the whole record.
    let out = server.berth(&["config", "get", "--version", "2"]);
    assert_eq!(stdout(&out), SEED);
    let out = server.berth(&["config", "get", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["version"], 3);
    assert_eq!(v["creator_id"], "carol");

    let out = server.berth(&["config", "versions"]);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains("VERSION") && lines[0].contains("MESSAGE"), "{text}");
    assert!(lines[1].trim_start().starts_with("3*"), "active marker on the newest: {text}");
    assert!(lines[2].contains("first real config"), "{text}");
    let out = server.berth(&["config", "versions", "--max-items", "2", "-o", "json"]);
    let page: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(page["versions"].as_array().unwrap().len(), 2);
    assert_eq!(page["next_cursor"], "2");

    let out = server.berth(&["config", "diff", "2", "3"]);
    let text = stdout(&out);
    assert!(text.contains("-                nominal_quota: 64"), "{text}");
    assert!(text.contains("+                nominal_quota: 16"), "{text}");

    let out = server.berth(&["config", "rollback", "2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "restored version 2 as version 4");
    let out = server.berth(&["config", "get"]);
    assert_eq!(stdout(&out), SEED);
}

#[test]
fn server_errors_are_printed_with_exit_code_1() {
    let server = Server::start();
    let bad = server.file("bad.yaml", "scheduling_rules:\n  - resource_queue: nowhere\n");
    let out = server.berth(&["config", "apply", "-f", &bad]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("scheduling_rules[0].resource_queue"), "{err}");
    let out = server.berth(&["config", "get", "--version", "77"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("config version 77 does not exist"), "{}", stderr(&out));
    let out = server.berth(&["config", "diff", "1", "x"]);
    assert_eq!(out.status.code(), Some(2), "clap rejects a non-numeric version");
}

#[test]
fn validate_runs_offline() {
    // No server at all: validate must not need one.
    let dir = std::env::temp_dir().join(format!("berth-validate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let good = write("good.yaml", SEED);
    let bad = write("bad.yaml", "resource_queues:\n  - name: \"\"\n  - name: q\n    ordering_policy: random\n");
    let unknown = write("unknown.yaml", "resource_queues:\n  - name: q\n    bogus: 1\n");
    let run = |p: &Path, extra: &[&str]| {
        Command::new(BIN).args(["--server", "http://127.0.0.1:1", "config", "validate", "-f"]).arg(p).args(extra).output().unwrap()
    };
    let out = run(&good, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("valid"));
    let out = run(&bad, &[]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    // The path first (as scripts read it), the place in words after the message.
    assert!(text.contains("error: resource_queues[0].name: queue name must not be empty (queue 1 › name)"), "{text}");
    assert!(text.contains("error: resource_queues[1].ordering_policy: must be one of fifo, large_resource, small_first, not `random`"), "{text}");
    assert!(text.contains("(queue q › ordering policy)"), "{text}");
    let out = run(&unknown, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("error: resource_queues[0].bogus: unknown field `bogus`"), "{}", stdout(&out));
    let out = run(&bad, &["-o", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["valid"], false);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn unreachable_server_is_a_clear_error() {
    let out = Command::new(BIN).args(["--server", "http://127.0.0.1:1", "config", "versions"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("cannot reach the Berth server at http://127.0.0.1:1"), "{}", stderr(&out));
}

#[test]
fn jobs_submit_list_get_logs_cancel() {
    let server = Server::start();
    // Several arguments are quoted for the shell; the id is printed alone.
    let out = server.berth(&["jobs", "submit", "--name", "greet", "--label", "team=ml", "--env", "WHO=it's me", "--", "sh", "-c", "echo \"hello $WHO\"; echo oops >&2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let id = stdout(&out).trim().to_string();
    assert!(id.starts_with("j-"), "{id}");
    // Follow returns once the job has ended, with the whole log (stderr lines marked).
    let out = server.berth(&["jobs", "logs", "-f", &id]);
    assert_eq!(stdout(&out), "hello it's me\n[stderr] oops\n");
    let out = server.berth(&["jobs", "logs", "--stderr", &id]);
    assert_eq!(stdout(&out), "oops\n");
    let out = server.berth(&["jobs", "get", &id, "-o", "json"]);
    let job: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(job["state"], "succeeded");
    assert_eq!(job["submitter"], "carol");
    assert_eq!(job["labels"]["team"], "ml");
    assert_eq!(job["resources"]["cpu"], 1.0, "a job naming no resource gets one CPU");

    let out = server.berth(&["jobs", "submit", "--cpu", "1", "--timeout", "60", "--", "sleep 30"]);
    let sleeper = stdout(&out).trim().to_string();
    let out = server.berth(&["jobs", "list", "--state", "pending,admitted,running"]);
    let text = stdout(&out);
    assert!(text.lines().next().unwrap().starts_with("ID"), "{text}");
    assert!(text.contains(&sleeper) && !text.contains(&id), "{text}");
    let out = server.berth(&["jobs", "cancel", &sleeper]);
    assert_eq!(stdout(&out).trim(), format!("{sleeper}: cancelled"));
    let out = server.berth(&["jobs", "cancel", &sleeper]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("has already ended"), "{}", stderr(&out));

    let out = server.berth(&["queues"]);
    assert!(stdout(&out).contains("default"), "{}", stdout(&out));
    let out = server.berth(&["events", "--kind", "cancelled"]);
    assert!(stdout(&out).contains(&sleeper), "{}", stdout(&out));
    // Bad input: named, exit 1, nothing stored.
    let out = server.berth(&["jobs", "submit", "--cpu=-2", "--", "true"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("resources.cpu"), "{}", stderr(&out));
    let out = server.berth(&["jobs", "submit", "--label", "novalue", "--", "true"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--label: `novalue` is not KEY=VALUE"), "{}", stderr(&out));
}

#[test]
fn cohorts_show_the_pool_and_what_each_member_borrows_and_lends() {
    let server = Server::start();
    let out = server.berth(&["cohorts"]);
    assert_eq!(stdout(&out).trim(), "no cohorts: no queue of the active config has a cohort_name");
    let config = server.file(
        "cohort.yaml",
        "resource_flavors:\n  - name: local\nresource_queues:\n\
         \x20 - name: team-a\n    cohort_name: research\n    resource_groups:\n      - covered_resources: [cpu]\n        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 1, borrowing_limit: 0.5}]}]\n\
         \x20 - name: team-b\n    cohort_name: research\n    resource_groups:\n      - covered_resources: [cpu]\n        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 1, lending_limit: 0.5}]}]\n\
         scheduling_rules:\n  - resource_queue: team-a\n    selector: [{key: team, operator: in, values: [a]}]\n  - resource_queue: team-b\n",
    );
    let out = server.berth(&["config", "apply", "--file", &config]);
    assert!(out.status.success(), "{}", stderr(&out));
    // team-a runs its nominal 1 CPU and borrows team-b's lendable half; the fourth job waits.
    for _ in 0..4 {
        let out = server.berth(&["jobs", "submit", "--label", "team=a", "--cpu", "0.5", "--timeout", "60", "--", "sleep 30"]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = server.berth(&["cohorts", "research", "-o", "json"]);
        let cohort: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        if cohort["members"][0]["running_count"] == 3 {
            break;
        }
        assert!(Instant::now() < deadline, "team-a never ran 3 jobs: {cohort}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let text = stdout(&server.berth(&["cohorts"]));
    assert!(text.contains("research          team-a,team-b"), "{text}");
    assert!(text.contains("local.cpu=1.5/2 (0.5 borrowed, 0 idle of 1.5)"), "{text}");
    let text = stdout(&server.berth(&["cohorts", "research"]));
    assert!(text.starts_with("cohort research: fair sharing off\npool: local.cpu=1.5/2 (0.5 borrowed, 0 idle of 1.5)"), "{text}");
    let member = |name: &str| text.lines().find(|l| l.starts_with(name)).unwrap_or_default().split_whitespace().collect::<Vec<_>>();
    assert_eq!(member("team-a")[1..3], ["1", "3"], "{text}");
    assert!(text.contains("local.cpu=1.5/1 (+0.5 borrowed, 0 lent)"), "{text}");
    assert!(text.contains("local.cpu=0/1 (+0 borrowed, 0.5 lent)"), "{text}");
    let out = server.berth(&["cohorts", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("cohort `nope` is not in the active config"), "{}", stderr(&out));
}

#[test]
fn preview_prints_the_impact_of_a_draft() {
    let server = Server::start();
    let ids: Vec<String> = (0..3)
        .map(|_| {
            let out = server.berth(&["jobs", "submit", "--label", "team=ml", "--", "true"]);
            assert!(out.status.success(), "{}", stderr(&out));
            stdout(&out).trim().to_string()
        })
        .collect();
    // The draft's only rule takes team=other: the recorded team=ml jobs would be rejected.
    let active = stdout(&server.berth(&["config", "get"]));
    let draft = active.replace("- resource_queue: default", "- resource_queue: default\n    selector: [{key: team, operator: in, values: [other]}]");
    assert_ne!(draft, active);
    let file = server.file("draft.yaml", &draft);
    let out = server.berth(&["config", "preview", "-f", &file, "--window", "1h"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("draft vs active config version 1: jobs submitted"), "{text}");
    assert!(text.contains("QUEUE") && text.contains("WAIT P95"), "{text}");
    assert!(text.contains("CHANGED JOBS (3: 3 would be rejected)"), "{text}");
    for id in &ids {
        assert!(text.lines().any(|l| l.starts_with("would be rejected") && l.contains(id.as_str())), "{text}");
    }
    assert!(text.contains("FIDELITY of the active replay"), "{text}");
    let out = server.berth(&["config", "preview", "-f", &file, "-o", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["jobs"], 3);
    // An invalid draft: exit code 1, the problem with its path.
    let bad = server.file("bad.yaml", "scheduling_rules:\n  - resource_queue: nowhere\n");
    let out = server.berth(&["config", "preview", "-f", &bad]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("scheduling_rules[0].resource_queue"), "{}", stderr(&out));
}

#[test]
fn tokens_roles_and_audit_from_the_cli() {
    let server = Server::start();
    let admin = |args: &[&str]| server.berth_with(ADMIN_TOKEN, args);
    let out = admin(&["whoami"]);
    assert_eq!(stdout(&out).trim(), "admin (admin, via token)");

    // A viewer reads but may not apply; the refusal names the role it lacks.
    let out = admin(&["tokens", "create", "--user", "vic", "--role", "viewer"]);
    let vic = stdout(&out).trim().to_string();
    assert!(out.status.success() && vic.starts_with("sss_berth_"), "{}", stderr(&out));
    let seed = server.file("seed.yaml", SEED);
    let out = server.berth_with(&vic, &["config", "apply", "-f", &seed]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("applying a config needs the editor role; vic is a viewer"), "{}", stderr(&out));
    assert!(server.berth_with(&vic, &["config", "versions"]).status.success());
    let out = server.berth_with(&vic, &["tokens", "list"]);
    assert_eq!(out.status.code(), Some(1), "only admins list tokens");

    // The list shows vic's token; revoking it locks vic out at once.
    let out = admin(&["tokens", "list", "-o", "json"]);
    let tokens: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let id = tokens.as_array().unwrap().iter().find(|t| t["user"] == "vic").unwrap()["id"].as_str().unwrap().to_string();
    assert!(!stdout(&out).contains(&vic), "secrets are never listed");
    assert!(admin(&["tokens", "revoke", &id]).status.success());
    let out = server.berth_with(&vic, &["config", "versions"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not valid: unknown or revoked"), "{}", stderr(&out));

    // Without a token the server (not anonymous) refuses.
    let out = Command::new(BIN).args(["--server", &server.url, "config", "versions"]).env_remove("BERTH_TOKEN").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("Authorization: Bearer"), "{}", stderr(&out));

    let out = admin(&["audit", "-o", "json"]);
    let page: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let actions: Vec<&str> = page["entries"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(&actions[..3], ["token.revoke", "token.create", "token.create"], "newest first: {actions:?}");
    let out = admin(&["audit", "--action", "token.revoke"]);
    assert!(stdout(&out).contains(&id) && stdout(&out).contains("revoked the token of vic (viewer role)"), "{}", stdout(&out));
}

#[test]
fn anonymous_mode_is_refused_off_loopback() {
    let dir = std::env::temp_dir().join(format!("berth-cli-anon-{}", std::process::id()));
    let out = Command::new(BIN)
        .args(["serve", "--anonymous", "--addr", "0.0.0.0:0", "--database-url", &format!("sqlite://{}/berth.db", dir.display())])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("--anonymous: refused on 0.0.0.0:0"), "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(dir);
}
