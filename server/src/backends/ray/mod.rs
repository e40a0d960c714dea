//! The Ray backend: runs are Ray jobs, submitted and watched through the Jobs REST API of a
//! cluster's dashboard (no Python in the server).
//!
//! A run's submission id is its [`RunId::key`]. Two background tasks per cluster: one reads
//! `/api/v0/nodes` and `/api/cluster_status` every [`RayConfig::nodes_interval`] into the
//! node list the engine places on (Ray labels, total resources: `CPU` → `cpu`, `GPU` →
//! `gpu`, `memory` bytes → `memory_gb`, any other resource by its name; and what work Berth
//! did not start uses there, see [`usage`]); the other GETs `/api/jobs/{id}` of each watched
//! run (never the whole job list), every [`RayConfig::poll_interval`] but at most
//! [`RayConfig::max_polls_per_s`] requests a second, a few at a time, and sends the run's
//! [`Exit`] as soon as Ray says it ended: the loop starts the next job on that capacity at
//! once, so how fast a slot is reused is this poll.
//!
//! Ray's quirks (shared/recipes/RAY.md) handled here: paths end in `/`; no browser headers
//! (reqwest sends none); only known fields are sent (unknown ones are a 400); a duplicate
//! submission id is a 500 "already exists", taken as "already submitted"; a stop of a
//! `PENDING` job only takes effect once it starts, so the stop is sent again while it stays
//! pending; Ray forgets every job when it restarts, so a run it no longer knows is failed
//! with that reason (and retried per the job's policy). Ray merges stderr into stdout: the
//! stdout log has both, stderr is always empty.
//!
//! With a [`RayConfig::keep_dir`], an ended run's log and Ray's final record are saved
//! there by a third task and the job is then deleted from Ray (see [`kept`]): Ray's history
//! of finished jobs stays bounded, and logs are read from the saved copy.
//!
//! Unreachable Ray (or one listing no alive node, as while it stops): the last known nodes
//! are kept (so submissions are still checked against them), and starts fail fast with [`BackendError::Unavailable`], which the loop
//! turns into a wait with backoff, not a failure.

mod exits;
mod kept;
mod runs;
mod tasks;
#[cfg(test)]
mod tests;
mod usage;
mod wire;

pub use exits::{Report as ExitReport, TOKEN_HEADER as EXIT_TOKEN_HEADER};
pub use wire::selector_value;
use tasks::*;
use wire::*;

use app::config::{MatchExpression, Operator};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use super::{Adopted, Backend, BackendError, BoxFuture, Exit, Outcome, Reported, RunId, StartSpec, Stream, Traits};
use crate::clock::now_us;
use crate::engine::{Labels, Milli, Name, Node, Resources};
use usage::{Ledger, Report};

/// Bytes per `memory_gb` (GiB, as the local backend counts).
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// The reason given for a run Ray does not know (any more).
pub const LOST: &str = "Ray no longer knows this job (the cluster restarted?)";

/// Least time between two stop requests for the same run.
const RESTOP: Duration = Duration::from_secs(2);

/// A run is not asked about before this age: no Ray job ends sooner (starting its
/// supervisor alone takes longer), so earlier requests only load the dashboard.
const FIRST_POLL: Duration = Duration::from_millis(500);

/// A run being submitted is not polled before its submission is answered (Ray would not
/// know it yet).
const UNPOLLED: Duration = Duration::from_secs(3600);

/// Status requests in flight at once.
const POLL_CONCURRENCY: usize = 8;

/// How long a package Ray was seen to have is taken as still there without asking again.
/// Ray keeps a package at least 10 minutes after a check (its URI pin), so half of that.
const PACKAGE_SEEN: Duration = Duration::from_secs(300);

/// One Ray cluster.
#[derive(Clone)]
pub struct RayConfig {
    /// Registry name, also each node's `backend` and the prefix of its id.
    pub name: String,
    /// The dashboard's URL, e.g. `http://127.0.0.1:8265`.
    pub address: String,
    /// Sent as `Authorization: Bearer …` (Ray's token auth); never logged.
    pub token: Option<String>,
    /// Most runs Berth keeps admitted or running on this cluster at once (default 20; Ray
    /// itself starts failing submissions past about 30 running jobs).
    pub max_in_flight: usize,
    /// How often each watched run's status is read (default 100 ms), unless that would
    /// pass `max_polls_per_s`.
    pub poll_interval: Duration,
    /// Most status requests a second to this cluster (default 50): with many runs in
    /// flight each is read less often, and Ray's dashboard is never flooded.
    pub max_polls_per_s: u32,
    /// How often the node list and the usage report are read (default 2 s).
    pub nodes_interval: Duration,
    /// Bound of one request (default 10 s).
    pub request_timeout: Duration,
    /// Where finished runs are kept (the server's data dir): once a run has ended, its log
    /// and Ray's record of it are saved there and the job is deleted from Ray, whose
    /// finished-job history is otherwise unbounded (see [`kept`]). `None`: finished jobs
    /// stay in Ray and logs are always read from it.
    pub keep_dir: Option<PathBuf>,
    /// How much of a finished run's log is kept (its end; default 8 MiB).
    pub kept_log_bytes: u64,
    /// Berth's base URL as this cluster's nodes reach it: each run then reports its exit
    /// there as soon as its command ends (see [`exits`]). `None`: ends are found by the
    /// status poll alone.
    pub callback_url: Option<String>,
}

impl RayConfig {
    /// A cluster with the defaults.
    pub fn new(name: impl Into<String>, address: impl Into<String>) -> RayConfig {
        RayConfig {
            name: name.into(),
            address: address.into(),
            token: None,
            max_in_flight: 20,
            poll_interval: Duration::from_millis(100),
            max_polls_per_s: 50,
            nodes_interval: Duration::from_secs(2),
            request_timeout: Duration::from_secs(10),
            keep_dir: None,
            kept_log_bytes: 8 * 1024 * 1024,
            callback_url: None,
        }
    }
}

impl std::fmt::Debug for RayConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RayConfig")
            .field("name", &self.name)
            .field("address", &self.address)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("max_in_flight", &self.max_in_flight)
            .field("poll_interval", &self.poll_interval)
            .field("max_polls_per_s", &self.max_polls_per_s)
            .field("nodes_interval", &self.nodes_interval)
            .field("keep_dir", &self.keep_dir)
            .field("callback_url", &self.callback_url)
            .finish()
    }
}

/// A run this server watches.
#[derive(Debug)]
struct Watch {
    run: RunId,
    /// Berth stopped it: its end is not reported (the loop already moved on).
    stopping: bool,
    last_stop: Option<Instant>,
    /// Not asked about before this.
    first_poll: Instant,
    /// What the run must show to report its own exit (runs this server submitted with a
    /// callback URL; see [`exits`]).
    token: Option<String>,
    /// Its end was reported by the run itself and sent to the loop: Ray's record of the
    /// end only releases its place.
    reported: bool,
}

impl Watch {
    fn new(run: RunId, stopping: bool, first_poll: Instant) -> Watch {
        Watch { run, stopping, last_stop: None, first_poll, token: None, reported: false }
    }
}

/// A node as Ray lists it: the engine's node, Ray's full id, and for each of its resources
/// the key `/api/cluster_status` uses, Berth's name and the factor to Berth's unit.
#[derive(Debug, Clone, PartialEq)]
struct Listed {
    node: Node,
    ray_id: String,
    keys: Vec<(String, Name, f64)>,
}

/// Runs jobs on one Ray cluster.
pub struct RayBackend {
    cfg: RayConfig,
    /// `address` without a trailing `/`.
    base: String,
    http: reqwest::Client,
    exits: UnboundedSender<Exit>,
    nodes: RwLock<Vec<Listed>>,
    /// Nodes listed earlier that are gone now (scaled down, died), one per shape: a job only
    /// such a node could take waits for the cluster to add one again rather than being
    /// refused (see [`Backend::known_nodes`]).
    gone: Mutex<Vec<Node>>,
    /// Ray's last usage report.
    report: Mutex<Option<Report>>,
    /// Berth's runs, to tell them apart in the report.
    ledger: Mutex<Ledger>,
    /// Why the last node refresh failed; `None` while Ray answers.
    unreachable: Mutex<Option<String>>,
    /// Watched runs by submission id.
    watched: Mutex<HashMap<String, Watch>>,
    /// Ended runs (submission id, Ray's final record) to save and delete from Ray.
    to_keep: UnboundedSender<(String, Value)>,
    /// Packages the cluster has, by URI, with when that was last checked; forgotten when
    /// Ray stops answering (a restarted Ray has none).
    packages_seen: Mutex<HashMap<String, Instant>>,
}

impl std::fmt::Debug for RayBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RayBackend").field("cfg", &self.cfg).finish_non_exhaustive()
    }
}

/// What a failed request means.
enum Failure {
    /// No answer (refused, timed out…).
    Unreachable(String),
    /// An answer with this status and body.
    Status(u16, String),
}

impl RayBackend {
    /// A backend sending each run's end to `exits`; starts its node and status tasks (they
    /// end when the backend is dropped). Call [`RayBackend::refresh_nodes`] once before
    /// the loop starts so the first snapshot has the cluster's nodes.
    pub fn new(cfg: RayConfig, exits: UnboundedSender<Exit>) -> Result<Arc<RayBackend>, String> {
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(token) = &cfg.token {
            let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| format!("ray `{}`: the token is not a valid header value", cfg.name))?;
            value.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, value);
        }
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(Duration::from_secs(3))
            .timeout(cfg.request_timeout)
            .build()
            .map_err(|e| format!("ray `{}`: {e}", cfg.name))?;
        let base = cfg.address.trim_end_matches('/').to_string();
        if !base.starts_with("http://") && !base.starts_with("https://") {
            return Err(format!("ray `{}`: `{}` is not an http:// URL of a Ray dashboard", cfg.name, cfg.address));
        }
        let (to_keep, ended) = tokio::sync::mpsc::unbounded_channel();
        let backend = Arc::new(RayBackend {
            cfg,
            base,
            http,
            exits,
            nodes: RwLock::default(),
            gone: Mutex::default(),
            report: Mutex::new(None),
            ledger: Mutex::default(),
            unreachable: Mutex::new(None),
            watched: Mutex::default(),
            to_keep,
            packages_seen: Mutex::default(),
        });
        tokio::spawn(nodes_task(Arc::downgrade(&backend)));
        tokio::spawn(status_task(Arc::downgrade(&backend)));
        tokio::spawn(keep_task(Arc::downgrade(&backend), ended));
        Ok(backend)
    }

    pub fn config(&self) -> &RayConfig {
        &self.cfg
    }

    /// Reads the node list and the usage report once; on failure the last known ones stay.
    pub async fn refresh_nodes(&self) -> Result<(), BackendError> {
        let (listed, status) = tokio::join!(self.get_json("/api/v0/nodes?limit=10000"), self.get_json("/api/cluster_status"));
        let listed = listed.map(|body| parse_nodes(&self.cfg.name, &body));
        if let (Ok(nodes), Ok(body)) = (&listed, &status) {
            let names = |ray_id: &str| nodes.iter().find(|n| n.ray_id == ray_id).map(|n| (n.node.id.clone(), n.keys.as_slice()));
            match usage::parse_report(body, names) {
                Some(report) => *self.lock_report() = Some(report),
                None => tracing::debug!(backend = %self.cfg.name, "Ray's cluster status has no per-node usage"),
            }
        }
        // A cluster with no alive node is one whose head is going down (`ray stop`): keep
        // the nodes it will come back with, as when it does not answer at all.
        let listed = listed.and_then(|n| if n.is_empty() { Err(Failure::Status(200, "no alive node".into())) } else { Ok(n) });
        match listed {
            Ok(nodes) => {
                let mut listed = self.nodes.write().unwrap_or_else(|e| e.into_inner());
                remember_gone(&mut self.gone.lock().unwrap_or_else(|e| e.into_inner()), &listed, &nodes);
                *listed = nodes;
                drop(listed);
                if self.lock_unreachable().take().is_some() {
                    tracing::info!(backend = %self.cfg.name, address = %self.base, "Ray answers again");
                }
                Ok(())
            }
            Err(f) => {
                let why = self.describe(&f);
                self.lock_packages_seen().clear();
                let was = self.lock_unreachable().replace(why.clone());
                if was.is_none() {
                    tracing::warn!(backend = %self.cfg.name, error = %why, "Ray node list unavailable; keeping the last known nodes");
                }
                Err(BackendError::Unavailable(why))
            }
        }
    }

    fn lock_report(&self) -> std::sync::MutexGuard<'_, Option<Report>> {
        self.report.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_unreachable(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.unreachable.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_packages_seen(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.packages_seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_watched(&self) -> std::sync::MutexGuard<'_, HashMap<String, Watch>> {
        self.watched.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn describe(&self, f: &Failure) -> String {
        match f {
            Failure::Unreachable(e) => format!("Ray at {} unreachable: {e}", self.base),
            Failure::Status(200, why) => format!("Ray at {} answered, but {why}", self.base),
            Failure::Status(code, body) => format!("Ray at {} answered {code}: {}", self.base, last_line(body)),
        }
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Result<String, Failure> {
        let r = req.send().await.map_err(|e| Failure::Unreachable(error_chain(&e)))?;
        let status = r.status().as_u16();
        let body = r.text().await.map_err(|e| Failure::Unreachable(error_chain(&e)))?;
        if (200..300).contains(&status) {
            Ok(body)
        } else {
            Err(Failure::Status(status, body))
        }
    }

    async fn get_json(&self, path: &str) -> Result<Value, Failure> {
        let body = self.send(self.http.get(format!("{}{path}", self.base))).await?;
        serde_json::from_str(&body).map_err(|e| Failure::Status(200, format!("not JSON: {e}")))
    }

    /// The job's status record, `None` when Ray does not know it.
    async fn job(&self, key: &str) -> Result<Option<Value>, Failure> {
        match self.get_json(&format!("/api/jobs/{key}")).await {
            Ok(v) => Ok(Some(v)),
            Err(Failure::Status(404, _)) => Ok(None),
            Err(f) => Err(f),
        }
    }

    fn watch(&self, run: &RunId, first_poll: Instant) {
        self.lock_watched().entry(run.key()).or_insert_with(|| Watch::new(run.clone(), false, first_poll));
    }

    /// One round of the status task: one GET per watched run old enough, a few at a time;
    /// how many were asked.
    async fn poll_once(&self) -> usize {
        let now = Instant::now();
        let keys: Vec<String> = self.lock_watched().iter().filter(|(_, w)| w.first_poll <= now).map(|(k, _)| k.clone()).collect();
        let asked = keys.len();
        let mut answers = futures_util::stream::iter(keys).map(|key| async move { (self.job(&key).await, key) }).buffer_unordered(POLL_CONCURRENCY);
        while let Some((status, key)) = answers.next().await {
            match status {
                Ok(status) => self.settle(&key, status.as_ref()).await,
                Err(f) => {
                    tracing::debug!(run = %key, error = %self.describe(&f), "Ray status unavailable");
                    // Ray is away: try the others next round, not now.
                    if matches!(f, Failure::Unreachable(_)) {
                        return asked;
                    }
                }
            }
        }
        asked
    }

    /// Acts on one status record (`None`: Ray does not know the run).
    async fn settle(&self, key: &str, status: Option<&Value>) {
        let outcome = match status {
            None => Some(Outcome::Failed(LOST.into())),
            Some(job) => outcome_of(job),
        };
        if let Some(node) = status.and_then(|j| j.get("driver_node_id")).and_then(Value::as_str) {
            self.lock_ledger().placed(key, &node_id(&self.cfg.name, node));
        }
        // Decided under the lock, done after it.
        let (exit, restop) = {
            let mut watched = self.lock_watched();
            let Some(w) = watched.get_mut(key) else { return };
            match outcome {
                Some(outcome) => {
                    let end = status.and_then(|j| j.get("end_time")).and_then(Value::as_i64).unwrap_or(0);
                    tracing::debug!(run = %key, seen_after_end_ms = now_us() / 1000 - end, "Ray run ended");
                    let w = watched.remove(key).expect("present above");
                    self.lock_ledger().release(key, now_us());
                    if let (Some(job), Some(_)) = (status, &self.cfg.keep_dir) {
                        let _ = self.to_keep.send((key.to_string(), job.clone()));
                    }
                    if w.reported && !w.stopping {
                        tracing::debug!(run = %key, ray = ?outcome, "Ray's record of a reported end");
                    }
                    ((!w.stopping && !w.reported).then_some(Exit { run: w.run, outcome }), false)
                }
                // A stop of a PENDING job only takes effect once it starts: ask again.
                None if w.stopping && w.last_stop.is_none_or(|t| t.elapsed() >= RESTOP) => {
                    w.last_stop = Some(Instant::now());
                    (None, true)
                }
                None => (None, false),
            }
        };
        if let Some(exit) = exit {
            let _ = self.exits.send(exit);
        }
        if restop {
            let _ = self.send(self.http.post(format!("{}/api/jobs/{key}/stop", self.base))).await;
        }
    }

    async fn fetch_logs(&self, run: &RunId, stream: Stream, tail: Option<u64>) -> Result<Vec<u8>, BackendError> {
        if stream == Stream::Stderr {
            return Ok(Vec::new()); // Ray merges stderr into the one log
        }
        let key = run.key();
        if let Some(log) = self.kept_log(&key, tail).await {
            return Ok(log);
        }
        let body = match self.get_json(&format!("/api/jobs/{key}/logs")).await {
            Ok(b) => b,
            // Deleted from Ray just now, after its copy was saved?
            Err(Failure::Status(404, _)) => match self.kept_log(&key, tail).await {
                Some(log) => return Ok(log),
                None => return Err(BackendError::Failed(format!("Ray has no logs of run {key} (the cluster restarted?)"))),
            },
            Err(f) => return Err(BackendError::Unavailable(self.describe(&f))),
        };
        let logs = body.get("logs").and_then(Value::as_str).unwrap_or_default().as_bytes();
        Ok(tail.map_or(logs, |t| kept::tail(logs, t)).to_vec())
    }

    async fn adopt_run(&self, spec: StartSpec, handle: Option<String>) -> Adopted {
        let run = spec.run.clone();
        let key = run.key();
        // Started before this server: it may be in any usage report still in use.
        let hold = || self.lock_ledger().hold(key.clone(), spec.node.clone(), spec.resources.clone(), 0);
        match self.job(&key).await {
            Ok(Some(job)) => match outcome_of(&job) {
                Some(outcome) => {
                    // Ended while the server was away: saved and deleted like any other.
                    if self.cfg.keep_dir.is_some() {
                        let _ = self.to_keep.send((key.clone(), job));
                    }
                    Adopted::Ended(outcome)
                }
                None => {
                    hold();
                    self.watch(&run, Instant::now());
                    Adopted::Running { handle: key }
                }
            },
            Ok(None) => match self.kept_record(&key).await {
                // Ended, saved and deleted from Ray before the server went away.
                Some(record) => Adopted::Ended(outcome_of(&record).unwrap_or_else(|| Outcome::Failed(LOST.into()))),
                None if handle.is_none() => Adopted::NeverStarted,
                None => Adopted::Ended(Outcome::Failed(LOST.into())),
            },
            Err(f) => match handle {
                // Cannot tell now, and its start was never acknowledged (the server died
                // while submitting it): back to its queue. If the submission did reach Ray,
                // starting it again finds it there ("already exists") and watches it.
                None => {
                    tracing::warn!(run = %key, error = %self.describe(&f), "cannot ask Ray about an unacknowledged start at recovery; requeueing it");
                    Adopted::NeverStarted
                }
                // Cannot tell now: watch it; the status task settles it once Ray answers.
                Some(handle) => {
                    tracing::warn!(run = %key, error = %self.describe(&f), "cannot ask Ray about a run at recovery; watching it");
                    hold();
                    self.watch(&run, Instant::now());
                    Adopted::Running { handle }
                }
            },
        }
    }
}

/// Most node shapes remembered after their nodes left (an autoscaling cluster makes a new
/// node id for every worker it starts, but few shapes).
const GONE_SHAPES: usize = 64;

/// Adds to `gone` the nodes of `before` missing from `now`, unless a node of the same shape
/// (labels but Ray's node id, and capacity) is listed now or remembered already.
fn remember_gone(gone: &mut Vec<Node>, before: &[Listed], now: &[Listed]) {
    fn shape(n: &Node) -> (BTreeMap<&str, &str>, &Resources) {
        let labels = n.labels.iter().filter(|(k, _)| !k.starts_with("ray.io/node")).map(|(k, v)| (k.as_str(), v.as_str())).collect();
        (labels, &n.capacity)
    }
    let left: Vec<&Node> = before.iter().map(|l| &l.node).filter(|n| !now.iter().any(|l| l.node.id == n.id)).collect();
    for node in left {
        let known = now.iter().map(|l| &l.node).chain(gone.iter()).any(|k| shape(k) == shape(node));
        if !known {
            gone.push(node.clone());
        }
    }
    // A shape listed again is a live node's, no longer a gone one's.
    gone.retain(|g| !now.iter().any(|l| shape(&l.node) == shape(g)));
    let excess = gone.len().saturating_sub(GONE_SHAPES);
    gone.drain(..excess);
}

impl Backend for RayBackend {
    fn stand_down(&self) {
        self.lock_watched().clear();
    }


    fn name(&self) -> &str {
        &self.cfg.name
    }

    /// Ray's nodes, each with what work Berth did not start uses there now (see [`usage`]).
    fn nodes(&self) -> Vec<Node> {
        let listed = self.nodes.read().unwrap_or_else(|e| e.into_inner());
        let report = self.lock_report();
        let ledger = self.lock_ledger();
        let now = now_us();
        listed
            .iter()
            .map(|l| Node { used_outside: usage::outside(report.as_ref(), &ledger, &l.node.id, now), ..l.node.clone() })
            .collect()
    }

    /// The nodes listed now and, one per shape, those listed before that are gone.
    fn known_nodes(&self) -> Vec<Node> {
        let mut known: Vec<Node> = self.nodes.read().unwrap_or_else(|e| e.into_inner()).iter().map(|l| l.node.clone()).collect();
        known.extend(self.gone.lock().unwrap_or_else(|e| e.into_inner()).iter().cloned());
        known
    }

    fn reported(&self) -> Option<Reported> {
        let report = self.lock_report().clone()?;
        Some(Reported { at_us: report.at_us, used: report.used })
    }

    fn start(&self, spec: StartSpec) -> BoxFuture<'_, Result<String, BackendError>> {
        Box::pin(self.submit(spec))
    }

    /// A cycle's runs, [`START_CONCURRENCY`](runs::START_CONCURRENCY) submissions at once.
    fn start_many<'a>(&'a self, specs: Vec<StartSpec>, done: &'a super::Report) -> BoxFuture<'a, ()> {
        Box::pin(super::start_each(self, specs, done, runs::START_CONCURRENCY))
    }

    fn stop(&self, run: RunId, _handle: String) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move { self.stop_run(&run).await })
    }

    fn adopt(&self, spec: StartSpec, handle: Option<String>) -> BoxFuture<'_, Adopted> {
        Box::pin(self.adopt_run(spec, handle))
    }

    fn logs(&self, run: RunId, stream: Stream, tail_bytes: Option<u64>) -> BoxFuture<'_, Result<Vec<u8>, BackendError>> {
        Box::pin(async move { self.fetch_logs(&run, stream, tail_bytes).await })
    }

    fn traits(&self) -> Traits {
        Traits { max_in_flight: Some(self.cfg.max_in_flight), ..Traits::default() }
    }
}
