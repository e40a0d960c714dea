//! The Slurm backend: each run is a Slurm batch job, driven through Slurm's own client
//! commands (`sbatch`, `squeue`, `scontrol`, `scancel`, `sacct`), as any user of the cluster
//! would; no slurmrestd, no JWT to hand out (shared/recipes/SLURM.md §7 says why).
//!
//! A run's batch job is named by its [`RunId::key`] and pinned to the node the engine chose
//! (`--nodelist`), with the request as Slurm options (`--cpus-per-task`, `--mem`, GPUs and
//! other GRES as `--gres`, the flavor's `partition…`/`feature.…` labels as `--partition` and
//! `--constraint`, `timeout_s` as `--time` in whole minutes) and `--no-requeue` (Berth, not
//! Slurm, decides whether a run runs again). Its script, logs and job id are in
//! `run_dir/{key}/`, which must be on a filesystem the cluster's nodes share with Berth.
//!
//! Two background tasks per cluster: one reads `scontrol -d show node -o` every
//! [`SlurmConfig::nodes_interval`] into Berth nodes (usable ones only: down, drained and
//! silent nodes are absent) with labels, and with what Slurm has allocated there that is not
//! Berth's as used outside Berth; the other asks `squeue` about the watched jobs only
//! (`-j id,id,…`, never the whole queue) every [`SlurmConfig::poll_interval`], and once one
//! has ended reads its exit code with `scontrol show job` (or from the job-completion
//! record, `sacct -c`, once Slurm has purged it) and sends its [`Exit`].
//!
//! Recovery after a restart finds a run's job by the id Berth stored, else by the id file in
//! its run directory, and takes the outcome of one that ended meanwhile.
//!
//! With [`SlurmConfig::arrays`], the tasks of one Berth array started in one cycle go as one
//! Slurm job array (`array`).

mod array;
mod cli;
mod status;
mod tasks;
#[cfg(test)]
mod tests;
mod wire;

use array::*;
use cli::*;
use tasks::*;
use wire::*;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

use super::{lock, Adopted, Backend, BackendError, BoxFuture, Exit, Outcome, Report, RunId, StartSpec, Stream, Traits};
use crate::engine::{Labels, Milli, Name, Node, Resources};

/// Least time between two cancels of the same job.
const RESTOP: Duration = Duration::from_secs(2);

/// Status rounds a watched job may be missing from `squeue` before it is looked up in the
/// job-completion record (a just-submitted job is always listed; a purged one never again).
const MISSING_ROUNDS: u32 = 3;

/// The reason given for a run Slurm does not know any more.
pub const LOST: &str = "Slurm no longer knows this job and has no completion record of it";

/// One Slurm cluster.
#[derive(Debug, Clone)]
pub struct SlurmConfig {
    /// Registry name, also each node's `backend` and the prefix of its id.
    pub name: String,
    /// `SLURM_CONF` for every command; `None`: the environment's (or Slurm's default).
    pub conf: Option<PathBuf>,
    /// Directory of `sbatch`, `squeue`, …; `None`: found on `PATH`.
    pub bin_dir: Option<PathBuf>,
    /// Where runs' scripts, logs and job ids go (`{run_dir}/{key}/`); the cluster's nodes
    /// must see it at the same path.
    pub run_dir: PathBuf,
    /// Most runs Berth keeps admitted or running on this cluster at once (default 50), so
    /// Slurm's queue holds only what Berth admitted.
    pub max_in_flight: usize,
    /// How often the watched jobs are asked about, in one `squeue` (default 250 ms).
    pub poll_interval: Duration,
    /// How often the node list is read (default 2 s).
    pub nodes_interval: Duration,
    /// Bound of one command (default 10 s).
    pub command_timeout: Duration,
    /// Submit the tasks of a Berth array that start together as one Slurm job array;
    /// `false` (default): every run as its own batch job.
    pub arrays: bool,
}

impl SlurmConfig {
    /// A cluster with the defaults.
    pub fn new(name: impl Into<String>, conf: Option<PathBuf>, run_dir: PathBuf) -> SlurmConfig {
        SlurmConfig {
            name: name.into(),
            conf,
            bin_dir: None,
            run_dir,
            max_in_flight: 50,
            poll_interval: Duration::from_millis(250),
            nodes_interval: Duration::from_secs(2),
            command_timeout: Duration::from_secs(10),
            arrays: false,
        }
    }
}

/// A node as Slurm lists it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Listed {
    pub node: Node,
    /// Slurm's name of it (`--nodelist`).
    pub slurm_name: String,
    pub partitions: Vec<String>,
    /// Everything Slurm has allocated there (Berth's jobs included).
    pub allocated: Resources,
    /// It can take work now (not down, drained, silent…); others are only known.
    pub usable: bool,
}

/// A job this server watches, by Slurm job id.
#[derive(Debug)]
struct Watch {
    run: RunId,
    /// Berth stopped it: its end is not reported (the loop already moved on).
    stopping: bool,
    last_stop: Option<Instant>,
    /// What Slurm has allocated to it and where, while it holds an allocation.
    held: Option<(Name, Resources)>,
    /// GRES it asked for (Slurm's TRES strings leave them out without accounting).
    gres: Resources,
    /// Rounds in a row `squeue` did not list it.
    missing: u32,
}

impl Watch {
    fn new(run: RunId, request: &Resources) -> Watch {
        let gres = Resources::new(request.iter().filter(|(n, _)| !matches!(&***n, "cpu" | "memory_gb")).map(|(n, m)| (n.clone(), Milli::units(m.as_f64().ceil() as i64))));
        Watch { run, stopping: false, last_stop: None, held: None, gres, missing: 0 }
    }
}

/// Runs jobs on one Slurm cluster.
pub struct SlurmBackend {
    cfg: SlurmConfig,
    exits: UnboundedSender<Exit>,
    nodes: RwLock<Vec<Listed>>,
    /// Why the last node refresh failed; `None` while Slurm answers.
    unreachable: Mutex<Option<String>>,
    watched: Mutex<HashMap<String, Watch>>,
    /// When the node list in `nodes` was asked for.
    nodes_at: Mutex<Option<Instant>>,
    /// Berth's jobs that ended since then (see [`outside`]).
    ended: Mutex<Vec<Ended>>,
}

impl std::fmt::Debug for SlurmBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlurmBackend").field("cfg", &self.cfg).finish_non_exhaustive()
    }
}

impl SlurmBackend {
    /// A backend sending each run's end to `exits`; starts its node and status tasks (they
    /// end when the backend is dropped). Call [`SlurmBackend::refresh_nodes`] once before
    /// the loop starts so the first snapshot has the cluster's nodes.
    pub fn new(cfg: SlurmConfig, exits: UnboundedSender<Exit>) -> Result<Arc<SlurmBackend>, String> {
        if !cfg.run_dir.is_absolute() {
            return Err(format!("slurm `{}`: the run directory `{}` must be absolute", cfg.name, cfg.run_dir.display()));
        }
        std::fs::create_dir_all(&cfg.run_dir).map_err(|e| format!("slurm `{}`: cannot create {}: {e}", cfg.name, cfg.run_dir.display()))?;
        let backend = Arc::new(SlurmBackend { cfg, exits, nodes: RwLock::default(), unreachable: Mutex::new(None), watched: Mutex::default(), nodes_at: Mutex::new(None), ended: Mutex::default() });
        tokio::spawn(nodes_task(Arc::downgrade(&backend)));
        tokio::spawn(status_task(Arc::downgrade(&backend)));
        Ok(backend)
    }

    pub fn config(&self) -> &SlurmConfig {
        &self.cfg
    }

    fn lock_watched(&self) -> std::sync::MutexGuard<'_, HashMap<String, Watch>> {
        self.watched.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_unreachable(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.unreachable.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads the node list once; on failure the last known nodes stay.
    pub async fn refresh_nodes(&self) -> Result<(), BackendError> {
        let args: Vec<String> = ["-d", "show", "node", "-o"].map(String::from).to_vec();
        let asked = Instant::now();
        match self.run("scontrol", &args).await {
            Ok(text) => {
                *self.nodes.write().unwrap_or_else(|e| e.into_inner()) = parse_nodes(&self.cfg.name, &text);
                *lock(&self.nodes_at) = Some(asked);
                lock(&self.ended).retain(|e| e.at > asked);
                if self.lock_unreachable().take().is_some() {
                    tracing::info!(backend = %self.cfg.name, "Slurm answers again");
                }
                Ok(())
            }
            Err(e) => {
                let why = format!("Slurm cluster `{}` unavailable: {}", self.cfg.name, e.text());
                if self.lock_unreachable().replace(why.clone()).is_none() {
                    tracing::warn!(backend = %self.cfg.name, error = %why, "Slurm node list unavailable; keeping the last known nodes");
                }
                Err(BackendError::Unavailable(why))
            }
        }
    }

    fn run_dir(&self, run: &RunId) -> PathBuf {
        self.cfg.run_dir.join(run.key())
    }

    /// The job id written down when the run was submitted (`ARRAYID_INDEX` for an array's
    /// task).
    fn recorded_id(&self, run: &RunId) -> Option<String> {
        std::fs::read_to_string(self.run_dir(run).join("slurm_job_id")).ok().and_then(|t| job_ref(&t))
    }

    /// The job Slurm has under `name` (an array's: its array id), for a run whose id was
    /// never written down (the server stopped between `sbatch` and writing it). Any state:
    /// also an ended one.
    async fn find_by_name(&self, name: &str) -> Result<Option<String>, CliError> {
        let args: Vec<String> = vec!["-h".into(), "-t".into(), "all".into(), format!("--name={name}"), "-o".into(), "%F".into()];
        let text = self.run("squeue", &args).await?;
        Ok(text.split_whitespace().filter_map(parsable_id).max_by_key(|id| id.parse::<u64>().unwrap_or(0)))
    }

    fn watch(&self, id: &str, run: &RunId, request: &Resources) {
        self.lock_watched().entry(id.to_string()).or_insert_with(|| Watch::new(run.clone(), request));
    }

    async fn submit(&self, spec: StartSpec) -> Result<String, BackendError> {
        match self.earlier_start(&spec).await? {
            Some(id) => Ok(id),
            None => self.submit_fresh(spec).await,
        }
    }

    /// The job an earlier start of this run submitted (the server stopped before recording
    /// it), now watched: that job is the run. `None`: Slurm has none.
    async fn earlier_start(&self, spec: &StartSpec) -> Result<Option<String>, BackendError> {
        if let Some(why) = self.lock_unreachable().clone() {
            return Err(BackendError::Unavailable(why));
        }
        let id = match self.recorded_id(&spec.run) {
            Some(id) => Some(id),
            // A script but no id: an earlier start of this run may have reached Slurm.
            None if self.run_dir(&spec.run).join("job.sh").exists() => {
                let found = self.find_earlier(&spec.run).await.map_err(|e| e.into_backend("cannot ask Slurm about an earlier start"))?;
                if let Some(id) = &found {
                    let _ = std::fs::write(self.run_dir(&spec.run).join("slurm_job_id"), format!("{id}\n"));
                }
                found
            }
            None => None,
        };
        if let Some(id) = &id {
            tracing::info!(run = %spec.run.key(), job = %id, "Slurm already has this run; watching it");
            self.watch(id, &spec.run, &spec.resources);
        }
        Ok(id)
    }

    /// The Slurm node a run goes to and the partitions and features to ask for.
    fn placement(&self, spec: &StartSpec) -> Result<(String, Vec<String>, Vec<String>), BackendError> {
        let (slurm_node, node_partitions) = {
            let nodes = self.nodes.read().unwrap_or_else(|e| e.into_inner());
            match nodes.iter().find(|l| *l.node.id == *spec.node) {
                Some(l) if l.usable => (l.slurm_name.clone(), l.partitions.clone()),
                Some(_) => return Err(BackendError::Unavailable(format!("Slurm node {} cannot take work now", spec.node))),
                None => return Err(BackendError::Unavailable(format!("Slurm node {} is not available now", spec.node))),
            }
        };
        let (mut partitions, features) = selection(&spec.selector_labels);
        if partitions.is_empty() {
            partitions = node_partitions;
        }
        Ok((slurm_node, partitions, features))
    }

    /// Writes the run's directory and script (and its `work/` when it names no working
    /// directory); its working directory.
    fn prepare_run(&self, spec: &StartSpec) -> Result<PathBuf, BackendError> {
        let dir = self.run_dir(&spec.run);
        let workdir = match &spec.working_dir {
            Some(w) => PathBuf::from(w),
            None => dir.join("work"),
        };
        let script = script(spec).map_err(BackendError::Failed)?;
        let prepared = (|| -> std::io::Result<()> {
            std::fs::create_dir_all(&dir)?;
            if spec.working_dir.is_none() {
                std::fs::create_dir_all(&workdir)?;
            }
            std::fs::write(dir.join("job.sh"), script)
        })();
        prepared.map_err(|e| BackendError::Failed(format!("cannot write the run's files under {}: {e}", dir.display())))?;
        Ok(workdir)
    }

    /// Submits a run Slurm does not have yet as a batch job of its own.
    async fn submit_fresh(&self, spec: StartSpec) -> Result<String, BackendError> {
        let (slurm_node, partitions, features) = self.placement(&spec)?;
        let dir = self.run_dir(&spec.run);
        let workdir = self.prepare_run(&spec)?;
        clear_mark(&dir).map_err(|e| BackendError::Failed(format!("cannot clear the run's files under {}: {e}", dir.display())))?;
        let mut args = sbatch_args(&spec, &slurm_node, &partitions, &features, &dir, &workdir);
        args.push(dir.join("job.sh").display().to_string());
        let out = self.run("sbatch", &args).await.map_err(|e| e.into_backend("Slurm refused the job"))?;
        let Some(id) = parsable_id(&out) else {
            return Err(BackendError::Failed(format!("sbatch printed no job id: {}", last_line(&out))));
        };
        if let Err(e) = std::fs::write(dir.join("slurm_job_id"), format!("{id}\n")) {
            tracing::warn!(run = %spec.run.key(), error = %e, "cannot record the Slurm job id");
        }
        self.watch(&id, &spec.run, &spec.resources);
        Ok(id)
    }

    async fn cancel(&self, id: &str) -> Result<(), BackendError> {
        self.run("scancel", &[id.to_string()]).await.map(|_| ()).map_err(|e| e.into_backend("cannot cancel the Slurm job"))
    }

    async fn stop_run(&self, run: &RunId, handle: &str) -> Result<(), BackendError> {
        let id = job_ref(handle).or_else(|| self.recorded_id(run));
        let Some(id) = id else { return Ok(()) };
        {
            let mut w = self.lock_watched();
            let e = w.entry(id.clone()).or_insert_with(|| Watch::new(run.clone(), &Resources::default()));
            e.stopping = true;
            e.last_stop = Some(Instant::now());
        }
        // scancel says nothing of unknown or ended ids; the status task sees the end (and
        // cancels again while the job lives on).
        self.cancel(&id).await
    }

    async fn fetch_logs(&self, run: &RunId, stream: Stream, tail: Option<u64>) -> Result<Vec<u8>, BackendError> {
        let name = match stream {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        };
        let path = self.run_dir(run).join(name);
        let read = tokio::task::spawn_blocking(move || read_tail(&path, tail)).await;
        match read {
            Ok(Ok(bytes)) => Ok(bytes),
            // Not written yet (the job waits in Slurm's queue).
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Ok(Err(e)) => Err(BackendError::Failed(format!("cannot read the {name} of run {}: {e}", run.key()))),
            Err(e) => Err(BackendError::Failed(format!("reading the log failed: {e}"))),
        }
    }

    async fn adopt_run(&self, spec: StartSpec, handle: Option<String>) -> Adopted {
        let run = spec.run.clone();
        let mut id = handle.as_deref().and_then(job_ref).or_else(|| self.recorded_id(&run));
        if id.is_none() && self.run_dir(&run).join("job.sh").exists() {
            // Its script was written, so `sbatch` may have run: ask Slurm by name (its
            // array's, for an array's task). If Slurm cannot say now, the run goes back to
            // its queue, and its next start asks again.
            id = self.find_earlier(&run).await.ok().flatten();
        }
        let Some(id) = id else { return Adopted::NeverStarted };
        match self.final_state(&id, &run).await {
            Ok(Some(outcome)) => Adopted::Ended(outcome),
            Ok(None) => {
                self.watch(&id, &run, &spec.resources);
                Adopted::Running { handle: id }
            }
            // Cannot tell now: watch it; the status task settles it once Slurm answers.
            Err(e) => {
                tracing::warn!(run = %run.key(), error = %e.text(), "cannot ask Slurm about a run at recovery; watching it");
                self.watch(&id, &run, &spec.resources);
                Adopted::Running { handle: id }
            }
        }
    }
}

/// What Slurm has allocated on `listed` to work that is not Berth's: its allocation as the
/// node list was read at `listed_at`, minus Berth's jobs holding there now (`held`) and
/// minus those that ended after that read (`ended`: end time, node, what they held), which
/// that allocation still counts. Without the second part, capacity a Berth job frees would
/// look taken by someone else until the next node read.
fn outside<'a>(listed: &Listed, listed_at: Option<Instant>, held: impl Iterator<Item = &'a (Name, Resources)>, ended: &'a [Ended]) -> Resources {
    let mut mine: BTreeMap<Name, Milli> = BTreeMap::new();
    let after_read = ended.iter().filter(|e| listed_at.is_none_or(|at| e.at > at)).map(|e| &e.held);
    for (node, res) in held.chain(after_read) {
        if *node == listed.node.id {
            for (n, m) in res.iter() {
                let e = mine.entry(n.clone()).or_default();
                *e = e.plus(m);
            }
        }
    }
    Resources::new(listed.allocated.iter().map(|(n, m)| (n.clone(), Milli(m.minus(mine.get(n).copied().unwrap_or_default()).0.max(0)))))
}

/// A Berth job seen to end while it held an allocation.
#[derive(Debug, Clone)]
struct Ended {
    at: Instant,
    held: (Name, Resources),
}

/// The last `tail` bytes of a file (all of it, up to 64 MiB, when `None`).
fn read_tail(path: &Path, tail: Option<u64>) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let want = tail.unwrap_or(64 * 1024 * 1024).min(len);
    f.seek(SeekFrom::Start(len - want))?;
    let mut buf = Vec::with_capacity(want as usize);
    f.take(want).read_to_end(&mut buf)?;
    Ok(buf)
}

/// `runtime_env` keys a Slurm batch job cannot honour.
const UNSUPPORTED: [&str; 10] = ["pip", "uv", "conda", "container", "image_uri", "java_jars", "mpi", "nsight", "rocprof_sys", "py_modules"];

impl Backend for SlurmBackend {
    fn stand_down(&self) {
        self.lock_watched().clear();
    }

    fn name(&self) -> &str {
        &self.cfg.name
    }

    /// Slurm's usable nodes, each with what Slurm allocated there to work Berth did not
    /// submit.
    fn nodes(&self) -> Vec<Node> {
        let listed = self.nodes.read().unwrap_or_else(|e| e.into_inner());
        let watched = self.lock_watched();
        let (listed_at, ended) = (*lock(&self.nodes_at), lock(&self.ended).clone());
        listed
            .iter()
            .filter(|l| l.usable)
            .map(|l| Node { used_outside: outside(l, listed_at, watched.values().filter_map(|w| w.held.as_ref()), &ended), ..l.node.clone() })
            .collect()
    }

    /// Every node of the cluster, down and drained ones too: a job only they could take
    /// waits for them.
    fn known_nodes(&self) -> Vec<Node> {
        self.nodes.read().unwrap_or_else(|e| e.into_inner()).iter().map(|l| l.node.clone()).collect()
    }

    /// `work/` in the run's directory, which Berth shares with the cluster's nodes.
    fn default_work_dir(&self, run: &RunId) -> Option<PathBuf> {
        Some(self.run_dir(run).join("work"))
    }

    fn start(&self, spec: StartSpec) -> BoxFuture<'_, Result<String, BackendError>> {
        Box::pin(self.submit(spec))
    }

    /// The tasks of one Berth array that start together go as one Slurm job array.
    fn start_many<'a>(&'a self, specs: Vec<StartSpec>, done: &'a Report) -> BoxFuture<'a, ()> {
        Box::pin(self.start_batches(specs, done))
    }

    fn stop(&self, run: RunId, handle: String) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move { self.stop_run(&run, &handle).await })
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

    fn refuses(&self, env: &app::jobs::RuntimeEnv) -> Option<String> {
        if let Some(key) = UNSUPPORTED.iter().find(|k| env.other.contains_key(**k)) {
            return Some(format!(
                "runtime_env.{key}: the Slurm backend cannot honour it: it runs the entrypoint as a batch job in a directory the cluster shares, and installs nothing; leave `{key}` out or route the job elsewhere"
            ));
        }
        if let Some(dir) = env.working_dir.as_deref().filter(|d| app::request::is_uri(d)) {
            return Some(format!("runtime_env.working_dir: the Slurm backend takes a directory the cluster's nodes share, not `{dir}`"));
        }
        None
    }
}
