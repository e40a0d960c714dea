//! Test helpers: a real server on a free port over a fresh database, SQLite file or
//! PostgreSQL database, per test (zero2prod's `spawn_app`).

#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};

pub mod berth;

use serde_json::Value;
use server::store::Db;
use server::state::{AppState, RuntimeOptions};

/// Directories a test harness made: removed when their last holder is dropped, unless the
/// test is failing (then they stay, with the server's log, for reading). `make test` also
/// gives each run a temp dir of its own (`.ci/scratch.sh`).
pub struct Scratch(pub Vec<std::path::PathBuf>);

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            for dir in &self.0 {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
}

/// The directory of a SQLite database made by [`fresh_database`] (`None` for PostgreSQL).
pub fn sqlite_dir(db_url: &str) -> Option<std::path::PathBuf> {
    db_url.strip_prefix("sqlite://").and_then(|p| std::path::Path::new(p).parent()).map(|d| d.to_path_buf())
}

/// Which database a test runs against.
#[derive(Debug, Clone, Copy)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A running server and a client for it. Requests made as a user carry an admin token of
/// that user (so authorship comes from a real identity); others are anonymous.
#[derive(Clone)]
pub struct TestApp {
    pub url: String,
    pub http: reqwest::Client,
    pub db_url: String,
    pub state: AppState,
    tokens: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>,
    /// What [`TestApp::spawn`] made (nothing for [`TestApp::spawn_with`]: its caller's).
    scratch: std::sync::Arc<Scratch>,
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("{prefix}_{}_{}_{}", std::process::id(), nanos % 1_000_000_000, COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// A fresh, empty database of `backend`; its URL.
pub async fn fresh_database(backend: Backend) -> String {
    match backend {
        Backend::Sqlite => {
            let dir = std::env::temp_dir().join(unique("berth_test"));
            std::fs::create_dir_all(&dir).unwrap();
            format!("sqlite://{}/berth.db", dir.display())
        }
        Backend::Postgres => {
            let admin = std::env::var("BERTH_TEST_PG_URL").expect(
                "BERTH_TEST_PG_URL is not set: the PostgreSQL tests need a server (`make test` starts one with .ci/pg.sh)",
            );
            let name = unique("berth_test");
            let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&admin).await.expect("connect to PostgreSQL");
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await.unwrap();
            let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap();
            format!("{base}/{name}")
        }
    }
}

impl TestApp {
    /// Starts the full router (API + dashboard) on a free port over a fresh database.
    pub async fn spawn(backend: Backend) -> TestApp {
        let db_url = fresh_database(backend).await;
        let data_dir = std::env::temp_dir().join(unique("berth_data"));
        let made = Scratch(sqlite_dir(&db_url).into_iter().chain([data_dir.clone()]).collect());
        TestApp { scratch: std::sync::Arc::new(made), ..Self::spawn_with(db_url, RuntimeOptions::local(data_dir)).await }
    }

    /// Starts the full router over `db_url` with `options` (e.g. anonymous mode off).
    pub async fn spawn_with(db_url: String, options: RuntimeOptions) -> TestApp {
        let db = Db::connect(&db_url).await.expect("database opens and migrates");
        let state = AppState::start(db, options).await.expect("state");
        let leptos = leptos::config::LeptosOptions::builder().output_name("berth").build();
        let app = server::http::router(state.clone(), leptos).into_make_service_with_connect_info::<std::net::SocketAddr>();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        TestApp { url, http: reqwest::Client::new(), db_url, state, tokens: Default::default(), scratch: std::sync::Arc::new(Scratch(Vec::new())) }
    }

    /// The secret of a token for `user` with `role`, made once per user and role.
    pub async fn token(&self, user: &str, role: app::auth::Role) -> String {
        let key = format!("{user}/{role}");
        if let Some(t) = self.tokens.lock().unwrap().get(&key) {
            return t.clone();
        }
        let admin = server::services::auth::Caller { role: app::auth::Role::Admin, ..server::services::auth::Caller::anonymous() };
        let new = app::auth::NewToken { user: user.into(), role, label: Some("test".into()) };
        let created = self.state.auth.create_token(&admin, &new).await.expect("token");
        self.tokens.lock().unwrap().insert(key, created.secret.clone());
        created.secret
    }

    /// GET `path`; status and JSON body (Null when the body is not JSON).
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self.http.get(format!("{}{path}", self.url)).send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// GET `path` as text.
    pub async fn get_text(&self, path: &str, accept: &str) -> (u16, String) {
        let r = self.http.get(format!("{}{path}", self.url)).header("accept", accept).send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    /// POST `body` with `content_type` to `path` as `user`.
    pub async fn post(&self, path: &str, content_type: &str, body: impl Into<reqwest::Body>, user: Option<&str>) -> (u16, Value) {
        let mut req = self.http.post(format!("{}{path}", self.url)).header("content-type", content_type).body(body);
        if let Some(u) = user {
            req = req.bearer_auth(self.token(u, app::auth::Role::Admin).await);
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Sends only a request head (`head` without the blank line) over a raw connection and
    /// reads the response: for refusals that must come before any body is read.
    pub async fn raw_head(&self, head: &str) -> (u16, Value) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = self.url.trim_start_matches("http://");
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(format!("{head}host: {addr}\r\nconnection: close\r\n\r\n").as_bytes()).await.unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.unwrap();
        let text = String::from_utf8_lossy(&response);
        let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
        (status, serde_json::from_str(body).unwrap_or(Value::Null))
    }

    /// Applies a YAML config; status and body.
    pub async fn apply_yaml(&self, yaml: &str, query: &str) -> (u16, Value) {
        self.post(&format!("/api/v1/scheduler/config{query}"), "application/yaml", yaml.to_string(), Some("tester")).await
    }

    /// Applies a JSON apply request.
    pub async fn apply_json(&self, body: &Value) -> (u16, Value) {
        self.post("/api/v1/scheduler/config", "application/json", body.to_string(), Some("tester")).await
    }
}

/// Polls `probe` (every 50 ms) until it returns `Ok`, and returns its value; panics once
/// `timeout` has passed, saying what was awaited (`what`) and what the last probe saw (its
/// `Err`). What the tests wait on instead of a fixed sleep: an event or a state, with a
/// deadline that only a broken or stuck server reaches.
pub async fn wait_until<T>(what: &str, timeout: std::time::Duration, mut probe: impl AsyncFnMut() -> Result<T, String>) -> T {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match probe().await {
            Ok(v) => return v,
            Err(seen) => assert!(std::time::Instant::now() < deadline, "waited {timeout:?} for {what}; last seen: {seen}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Generates one `#[tokio::test]` per database for each async fn taking a [`Backend`].
#[macro_export]
macro_rules! on_both_databases {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 4)] async fn $name() { super::$name($crate::common::Backend::Sqlite).await } )*
        }
        mod postgres {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 4)] async fn $name() { super::$name($crate::common::Backend::Postgres).await } )*
        }
    };
}
