//! What the admission loop needs from a place that runs jobs: one trait, a registry by name.
//!
//! A backend reports its nodes (labels and capacity, so flavors can select them), starts and
//! stops *runs* of jobs, and tells the loop when a run ends through the [`Exit`] channel it was
//! built with. A run is one attempt of a job: [`RunId`] is `{job}-r{n}`, unique for ever, so a
//! late exit of a preempted or cancelled run is never mistaken for the current one, and Ray
//! (which refuses to reuse a submission id) gets a fresh id per attempt.


pub mod local;
pub mod ray;
pub mod sim;
pub mod slurm;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::engine::{FlavorAssignment, InFlightLimit, Name, Node, Resources};

/// A boxed, sendable future (the trait must be object-safe).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where [`Backend::start_many`] reports each start; false: nobody listens any more.
pub type Report = dyn Fn(RunId, Result<String, BackendError>) -> bool + Send + Sync;

/// Starts `specs` on `backend`, `at_once` of them under way at a time, and reports each
/// result to `done` in order. Once the backend says it is unavailable, the runs not yet
/// started get that answer without asking it again; once `done` answers false, no more are
/// started (those under way are dropped: a next leader adopts what the backend got).
pub async fn start_each<B: Backend + ?Sized>(backend: &B, specs: Vec<StartSpec>, done: &Report, at_once: usize) {
    use futures_util::StreamExt;
    let down: std::sync::Mutex<Option<BackendError>> = std::sync::Mutex::new(None);
    let down = &down;
    let mut results = futures_util::stream::iter(specs)
        .map(|spec| async move {
            let run = spec.run.clone();
            let known_down = down.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let result = match known_down {
                Some(e) => Err(e),
                None => backend.start(spec).await,
            };
            if let Err(e @ BackendError::Unavailable(_)) = &result {
                *down.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.clone());
            }
            (run, result)
        })
        .buffered(at_once.max(1));
    while let Some((run, result)) = results.next().await {
        if !done(run, result) {
            return;
        }
    }
}

/// One attempt of one job.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunId {
    pub job: Arc<str>,
    /// 1 for the first start, incremented on every restart (retry or after preemption).
    pub run: i64,
}

impl RunId {
    /// `{job}-r{run}`: safe for file names and Ray submission ids (`[A-Za-z0-9_-]`).
    pub fn key(&self) -> String {
        format!("{}-r{}", self.job, self.run)
    }

    /// The run a [`RunId::key`] names.
    pub fn from_key(key: &str) -> Option<RunId> {
        let (job, run) = key.rsplit_once("-r")?;
        let run = run.parse().ok().filter(|r| *r > 0 && !run.starts_with('+'))?;
        (!job.is_empty()).then(|| RunId { job: job.into(), run })
    }
}

/// Everything a backend needs to start a run.
#[derive(Debug, Clone)]
pub struct StartSpec {
    pub run: RunId,
    /// Shell command line (run with `/bin/sh -c`, like Ray's entrypoint).
    pub entrypoint: String,
    /// Working directory; `None`: the backend picks one of its own for the run.
    pub working_dir: Option<String>,
    /// Environment variables added to the backend's own.
    pub env_vars: BTreeMap<String, String>,
    /// The rest of the job's `runtime_env` (pip, conda, …), passed through where supported.
    pub runtime_env: serde_json::Map<String, serde_json::Value>,
    /// What the job asked for.
    pub resources: Resources,
    /// The job's `timeout_s` (0: none). The loop enforces it; a backend with its own time
    /// limits (Slurm) also passes it on, so the cluster stops a run Berth cannot reach.
    pub timeout_s: u64,
    /// Node the engine placed it on.
    pub node: Arc<str>,
    /// Flavors it was admitted under, with their selectors (Ray turns them into a label
    /// selector).
    pub flavors: Vec<FlavorAssignment>,
    pub selector_labels: BTreeMap<String, String>,
    /// Strings for the backend's own bookkeeping (queue, flavor, submitter…).
    pub metadata: BTreeMap<String, String>,
    /// The uploaded packages `working_dir` and `runtime_env.py_modules` name, with the file
    /// holding each (see `store::packages`).
    pub packages: Vec<PackageFile>,
}

/// A package a run uses, uploaded to Berth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageFile {
    /// As the job names it: `gcs://_ray_pkg_<hex>.zip`.
    pub uri: String,
    /// The zip archive.
    pub path: std::path::PathBuf,
}

impl StartSpec {
    /// The archive of package `uri`, if the run uses it.
    pub fn package(&self, uri: &str) -> Option<&PackageFile> {
        self.packages.iter().find(|p| p.uri == uri)
    }
}

/// How a run ended, as the backend saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The process exited with this code (0 is success).
    Exited(i32),
    /// Killed by this signal (not by Berth: stops are reported by the loop itself).
    Signaled(i32),
    /// The backend failed it or lost it; the message says why (shown to the user).
    Failed(String),
    /// The backend's own time limit ended it (Slurm's `TIMEOUT`): the job is timed out, as
    /// when the loop stops it at its `timeout_s`, and not retried.
    TimedOut(String),
}

/// A run ended.
#[derive(Debug, Clone)]
pub struct Exit {
    pub run: RunId,
    pub outcome: Outcome,
}

/// What a backend knows of a run after a restart of the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Adopted {
    /// Still running: the backend now watches it again and will send its [`Exit`].
    Running { handle: String },
    /// It ended while the server was away.
    Ended(Outcome),
    /// The backend never started it (the server died between deciding and starting).
    NeverStarted,
}

/// What a backend's own monitoring last said is in use on its nodes (all work, Berth's
/// included), for display: Ray's `/api/cluster_status`.
#[derive(Debug, Clone, PartialEq)]
pub struct Reported {
    /// When the backend took the figures (µs since the epoch, its clock).
    pub at_us: i64,
    /// Used amounts per node id.
    pub used: HashMap<Name, Resources>,
}

/// Which log stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Stdout,
    Stderr,
}

/// A backend failure; the loop shows the message as the job's reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// This request failed (bad working dir, refused by the backend…): a start that fails
    /// so ends the run, which is retried per the job's `max_retries`.
    #[error("{0}")]
    Failed(String),
    /// The backend cannot be reached or is saturated right now: the loop puts the job back
    /// in its queue and tries again after a backoff, without consuming a retry.
    #[error("{0}")]
    Unavailable(String),
}

/// A place that runs jobs: what every backend must do. The loop's hooks into it are kept
/// apart: [`Traits`] it plans with, and a [`StartJournal`] for backends that record starts.
pub trait Backend: Send + Sync + 'static {
    /// Registry name (`local`, `ray`, …); also each node's `backend`.
    fn name(&self) -> &str;
    /// The nodes it offers now.
    fn nodes(&self) -> Vec<Node>;
    /// Every node its configuration has, also those absent now (down, drained): what a
    /// submission is checked against, so a job only such a node could take waits for it
    /// rather than being refused. The default: the nodes it offers now.
    fn known_nodes(&self) -> Vec<Node> {
        self.nodes()
    }
    /// Starts a run; returns a handle to store (pid, submission id…). Must not block long.
    fn start(&self, spec: StartSpec) -> BoxFuture<'_, Result<String, BackendError>>;
    /// Starts a cycle's runs on this backend in order, calling `done` with each result as
    /// it comes; `done` answers false once nobody listens, and then no more are started.
    /// The default starts them one by one (see [`start_each`]). Slurm overrides it to
    /// submit the tasks of one Berth array as one job array, Ray to send several
    /// submissions at once.
    fn start_many<'a>(&'a self, specs: Vec<StartSpec>, done: &'a Report) -> BoxFuture<'a, ()> {
        Box::pin(start_each(self, specs, done, 1))
    }
    /// Stops a run and everything it spawned. Returns once the stop is under way; the
    /// backend escalates on its own (SIGTERM, then SIGKILL after a grace period).
    fn stop(&self, run: RunId, handle: String) -> BoxFuture<'_, Result<(), BackendError>>;
    /// Re-attaches to a run started before a server restart; `spec` is what it was started
    /// with (as far as the job's row tells).
    fn adopt(&self, spec: StartSpec, handle: Option<String>) -> BoxFuture<'_, Adopted>;
    /// The last `tail_bytes` of a run's log (`None`: all of it, up to the backend's bound).
    fn logs(&self, run: RunId, stream: Stream, tail_bytes: Option<u64>) -> BoxFuture<'_, Result<Vec<u8>, BackendError>>;
    /// The working directory it gives a run that names none, when that directory is one
    /// the server can read (a stage's declared outputs are read from it).
    fn default_work_dir(&self, _run: &RunId) -> Option<std::path::PathBuf> {
        None
    }
    /// Facts the admission loop plans with; the defaults suit a remote cluster.
    fn traits(&self) -> Traits {
        Traits::default()
    }
    /// This replica stopped leading (see `replicas`): stop watching runs, whose ends the new
    /// leader now reads. A later term adopts them again.
    fn stand_down(&self) {}
    /// Its own record of the runs it started, if it keeps one (see [`StartJournal`]).
    fn journal(&self) -> Option<&dyn StartJournal> {
        None
    }
    /// What the backend's own monitoring reports in use, if it has any.
    fn reported(&self) -> Option<Reported> {
        None
    }
    /// Why it cannot run a job with this `runtime_env` (`runtime_env.pip: …`), if it cannot.
    fn refuses(&self, _runtime_env: &app::jobs::RuntimeEnv) -> Option<String> {
        None
    }
}

/// Facts about a backend that the admission loop plans with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traits {
    /// At most this many of its runs may hold capacity at once (`None`: only its nodes'
    /// capacity bounds it). The engine admits no more beyond it (see [`Registry::limits`]).
    pub max_in_flight: Option<usize>,
    /// [`Backend::start`] is ready at its first poll (a few system calls, no waiting on a
    /// network): the loop then starts runs itself rather than on a task.
    pub starts_at_once: bool,
}

/// A backend that writes each run down as it starts it, before its start returns, and
/// lists those runs after a restart. The loop then starts a run without waiting for its
/// admission to be written: recovery finds any run the database missed here.
pub trait StartJournal: Send + Sync {
    /// Every run the records say was started and has not been forgotten.
    fn begun_runs(&self) -> Vec<RunId>;
    /// Whether [`StartJournal::forget_ended`] has anything to drop now.
    fn has_ended_runs(&self) -> bool;
    /// The database lists exactly `live` as this backend's unfinished runs (the loop calls
    /// this right after a commit, with nothing of its own unwritten): what the backend keeps
    /// so as to recover any other run after a restart may go.
    fn forget_ended(&self, live: &HashSet<RunId>);
    /// Reads the records again from where they are kept: what another process (a replica
    /// that led before, on the same host and data dir) wrote since they were first read.
    fn reload(&self) {}
}

/// Backends by name.
#[derive(Clone, Default)]
pub struct Registry {
    backends: BTreeMap<String, Arc<dyn Backend>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.backends.keys()).finish()
    }
}

impl Registry {
    /// Adds a backend under its own name; a second one of the same name is refused.
    pub fn register(&mut self, backend: Arc<dyn Backend>) -> Result<(), String> {
        let name = backend.name().to_string();
        if self.backends.contains_key(&name) {
            return Err(format!("backend `{name}` is configured twice"));
        }
        self.backends.insert(name, backend);
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Backend>> {
        self.backends.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Backend>> + '_ {
        self.backends.values()
    }

    /// Every node of every backend.
    pub fn nodes(&self) -> Vec<Node> {
        self.backends.values().flat_map(|b| b.nodes()).collect()
    }

    /// Every node any backend's configuration has (see [`Backend::known_nodes`]).
    pub fn known_nodes(&self) -> Vec<Node> {
        self.backends.values().flat_map(|b| b.known_nodes()).collect()
    }

    /// The in-flight caps of the backends that have one, as the engine applies them.
    pub fn limits(&self) -> Vec<InFlightLimit> {
        self.backends
            .values()
            .filter_map(|b| Some(InFlightLimit { backend: b.name().into(), max_in_flight: b.traits().max_in_flight? }))
            .collect()
    }
}

/// A mutex's guard, also after a thread panicked while holding it, so one panic does not turn
/// every later call on a backend into another.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::RunId;

    #[test]
    fn run_keys_name_their_run() {
        let run = RunId { job: "j-0a1b-r2x".into(), run: 12 };
        assert_eq!(RunId::from_key(&run.key()), Some(run));
        for bad in ["j", "j-r", "j-rx", "-r1", "j-r0", "j-r+1", "j-r-1"] {
            assert_eq!(RunId::from_key(bad), None, "{bad}");
        }
    }
}
