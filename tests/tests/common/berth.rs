//! The real `berth` binary as a child process over a fresh database and data directory:
//! what the runtime tests drive (real processes, real restarts, `kill -9`).

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{fresh_database, sqlite_dir, unique, Backend, Scratch};

/// The `berth` binary built by `make build` (or `cargo build -p berth-server --bin berth`):
/// `$BERTH_BIN`, else next to this test's `deps/` directory.
pub fn berth_bin() -> PathBuf {
    if let Ok(p) = std::env::var("BERTH_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("test executable path");
    let bin = exe.parent().and_then(|deps| deps.parent()).map(|d| d.join("berth")).expect("target dir");
    assert!(bin.is_file(), "{} is missing: build it first (`make build` or `cargo build -p berth-server --bin berth`)", bin.display());
    bin
}

/// A running `berth serve`; killed on drop.
pub struct Berth {
    child: Option<Child>,
    pub url: String,
    pub port: u16,
    pub db_url: String,
    /// Holds the data dir (`data/`), the server's log and the tests' files.
    pub dir: PathBuf,
    /// Where runs keep their files: `dir/data`, or the first replica's (see [`Berth::replica_of`]).
    pub data_dir: PathBuf,
    /// Carries the admin token as `Authorization: Bearer` when authentication is on.
    pub http: reqwest::Client,
    args: Vec<String>,
    /// The first admin token's secret (`BERTH_ADMIN_TOKEN`) when authentication is on.
    pub admin_token: Option<String>,
    /// `dir` and, for the first server on a SQLite database, the database's directory.
    scratch: Scratch,
}

impl Berth {
    /// A server on a fresh database of `backend` in anonymous local mode, with a fast tick
    /// and `extra` serve flags (`{url}` in one is the server's own URL).
    pub async fn start(backend: Backend, extra: &[&str]) -> Berth {
        Berth::launch(backend, None, extra).await
    }

    /// Like [`Berth::start`] with authentication on: the first admin token is `admin_token`,
    /// and [`Berth::http`] sends it with every request.
    pub async fn start_authenticated(backend: Backend, admin_token: &str, extra: &[&str]) -> Berth {
        Berth::launch(backend, Some(admin_token), extra).await
    }

    async fn launch(backend: Backend, admin_token: Option<&str>, extra: &[&str]) -> Berth {
        let db_url = fresh_database(backend).await;
        let dir = std::env::temp_dir().join(unique("berth_rt"));
        std::fs::create_dir_all(&dir).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut args: Vec<String> = ["--tick-ms", "100", "--retry-backoff-ms", "200", "--kill-grace-s", "1", "--sample-interval-s", "1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        if admin_token.is_none() {
            args.insert(0, "--anonymous".into());
        }
        let url = format!("http://127.0.0.1:{port}");
        // `{url}` in a flag stands for the server's own URL (e.g. `--ray-callback-url {url}`).
        args.extend(extra.iter().map(|s| s.replace("{url}", &url)));
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(t) = admin_token {
            headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {t}").parse().unwrap());
        }
        let http = reqwest::Client::builder().default_headers(headers).build().unwrap();
        let data_dir = dir.join("data");
        let scratch = Scratch([dir.clone()].into_iter().chain(sqlite_dir(&db_url)).collect());
        let mut b = Berth { child: None, url, port, db_url, dir, data_dir, http, args, admin_token: admin_token.map(str::to_string), scratch };
        b.spawn().await;
        b
    }

    /// Starts the server process (again, after [`Berth::kill9`]) on the same database,
    /// data dir and port; returns once it answers.
    pub async fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join("server.log")).unwrap();
        let child = Command::new(berth_bin())
            .args(["serve", "--addr", &format!("127.0.0.1:{}", self.port), "--database-url", &self.db_url])
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(&self.args)
            .envs(self.admin_token.iter().map(|t| ("BERTH_ADMIN_TOKEN", t)))
            .env("RUST_LOG", "info,sqlx=warn")
            // The server logs (tracing) to stdout: both streams go to the log file.
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("berth serve starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = self.http.get(format!("{}/readyz", self.url)).send().await {
                if r.status().is_success() {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "berth serve did not become ready; log:\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Another `berth serve` on `first`'s database and data dir (a replica on the same
    /// host), on a port and with a log of its own; `first`'s flags with `extra` in place of
    /// its own extra ones.
    pub async fn replica_of(first: &Berth, extra: &[&str]) -> Berth {
        Berth::replica_with_data_dir(first, first.data_dir.clone(), extra).await
    }

    /// [`Berth::replica_of`] with a data dir of its own (a replica on another host).
    pub async fn replica_with_data_dir(first: &Berth, data_dir: PathBuf, extra: &[&str]) -> Berth {
        let dir = std::env::temp_dir().join(unique("berth_rt"));
        std::fs::create_dir_all(&dir).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut args: Vec<String> = ["--tick-ms", "100", "--retry-backoff-ms", "200", "--kill-grace-s", "1", "--sample-interval-s", "1"].iter().map(|s| s.to_string()).collect();
        if first.admin_token.is_none() {
            args.insert(0, "--anonymous".into());
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let url = format!("http://127.0.0.1:{port}");
        let mut b = Berth {
            child: None,
            url,
            port,
            db_url: first.db_url.clone(),
            scratch: Scratch(vec![dir.clone()]),
            dir,
            data_dir,
            http: first.http.clone(),
            args,
            admin_token: first.admin_token.clone(),
        };
        b.spawn().await;
        b
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    /// SIGKILL: no shutdown, no flush.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// Writes `text` to a file in the test's directory; its absolute path.
    pub fn file(&self, name: &str, text: &str) -> String {
        let path = self.dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self.http.get(format!("{}{path}", self.url)).send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn get_text(&self, path: &str) -> (u16, String) {
        let r = self.http.get(format!("{}{path}", self.url)).send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let r = self.http.post(format!("{}{path}", self.url)).json(body).send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Applies a YAML config; panics unless it is accepted.
    pub async fn apply(&self, yaml: &str) -> i64 {
        let r = self
            .http
            .post(format!("{}/api/v1/scheduler/config?message=test", self.url))
            .header("content-type", "application/yaml")
            .body(yaml.to_string())
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap_or(Value::Null);
        assert_eq!(status, 200, "apply refused: {body}");
        body["version"].as_i64().unwrap()
    }

    /// Submits a job; its id (panics unless 201).
    pub async fn submit(&self, body: Value) -> String {
        let (status, job) = self.post("/api/v1/jobs", &body).await;
        assert_eq!(status, 201, "submit refused: {job}");
        job["id"].as_str().unwrap().to_string()
    }

    pub async fn job(&self, id: &str) -> Value {
        let (status, job) = self.get(&format!("/api/v1/jobs/{id}")).await;
        assert_eq!(status, 200, "{job}");
        job
    }

    /// Polls until the job's state is one of `states`; the job.
    pub async fn wait_state(&self, id: &str, states: &[&str], timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let job = self.job(id).await;
            if states.contains(&job["state"].as_str().unwrap_or("")) {
                return job;
            }
            assert!(Instant::now() < deadline, "job {id} did not reach {states:?} in {timeout:?}: {job:#}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Polls until every one of `ids` has ended; their final records.
    pub async fn wait_all_ended(&self, ids: &[String], timeout: Duration) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut all = Vec::new();
            let mut cursor: Option<String> = None;
            loop {
                let q = cursor.as_ref().map(|c| format!("&cursor={c}")).unwrap_or_default();
                let (status, page) = self.get(&format!("/api/v1/jobs?max_items=1000{q}")).await;
                assert_eq!(status, 200, "{page}");
                all.extend(page["jobs"].as_array().unwrap().iter().cloned());
                match page["next_cursor"].as_str() {
                    Some(c) => cursor = Some(c.to_string()),
                    None => break,
                }
            }
            let mine: Vec<Value> = all.into_iter().filter(|j| ids.iter().any(|id| j["id"] == json!(id))).collect();
            let ended = ["succeeded", "failed", "timed_out", "cancelled", "rejected"];
            if mine.len() == ids.len() && mine.iter().all(|j| ended.contains(&j["state"].as_str().unwrap_or(""))) {
                return mine;
            }
            if Instant::now() > deadline {
                let left: Vec<String> = mine.iter().filter(|j| !ended.contains(&j["state"].as_str().unwrap_or(""))).map(|j| format!("{} {} ({})", j["id"], j["state"], j["reason"])).collect();
                panic!("{} of {} jobs found, still unfinished: {left:?}", mine.len(), ids.len());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Every event matching `query` (e.g. `kind=admitted`), oldest first, all pages.
    pub async fn events(&self, query: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let c = cursor.as_ref().map(|c| format!("&cursor={c}")).unwrap_or_default();
            let (status, page) = self.get(&format!("/api/v1/events?max_items=1000&{query}{c}")).await;
            assert_eq!(status, 200, "{page}");
            out.extend(page["events"].as_array().unwrap().iter().cloned());
            match page["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_string()),
                None => return out,
            }
        }
    }
}

/// Kills the server and what its jobs left; then `scratch` removes the files unless the test
/// is failing.
impl Drop for Berth {
    fn drop(&mut self) {
        self.kill9();
        // Stop whatever the test's jobs left running (their process groups carry this dir).
        let _ = Command::new("pkill").arg("-KILL").arg("-f").arg(self.dir.display().to_string()).status();
    }
}

/// Whether process `pid` exists (and is not a zombie).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()).is_some_and(|state| state != "Z"),
        Err(_) => false,
    }
}

/// Polls `f` until it is true or `timeout` passes.
pub async fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    f()
}

/// The most quota units any queue held at once, replaying the event log: `admitted` takes
/// the job's cpu, any end of a holding run gives it back. Per queue.
pub fn peak_usage(events: &[Value], cpu_of: impl Fn(&str) -> f64) -> std::collections::BTreeMap<String, f64> {
    use std::collections::{BTreeMap, HashMap};
    let mut holding: HashMap<String, (String, f64)> = HashMap::new();
    let mut used: BTreeMap<String, f64> = BTreeMap::new();
    let mut peak: BTreeMap<String, f64> = BTreeMap::new();
    for e in events {
        let Some(job) = e["job_id"].as_str() else { continue };
        match e["kind"].as_str().unwrap_or("") {
            "admitted" => {
                let q = e["queue"].as_str().unwrap_or("").to_string();
                let cpu = cpu_of(job);
                assert!(holding.insert(job.to_string(), (q.clone(), cpu)).is_none(), "job {job} admitted twice without release: {e}");
                let u = used.entry(q.clone()).or_default();
                *u += cpu;
                let p = peak.entry(q).or_default();
                *p = p.max(*u);
            }
            "preempted" | "timed_out" | "retried" | "finished" | "cancelled" | "requeued" | "lost" => {
                if let Some((q, cpu)) = holding.remove(job) {
                    *used.get_mut(&q).unwrap() -= cpu;
                }
            }
            _ => {}
        }
    }
    peak
}
