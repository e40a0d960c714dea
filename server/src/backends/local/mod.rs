//! The local backend: each run is a process group on the server's own host.
//!
//! A run's files are in `data_dir/runs/`: `{key}.stdout` and `{key}.stderr`, and `{key}/`,
//! the default working directory (for a run that names none). Its record is a line in the
//! journal, `runs/journal/{n}`: the server appends `pid {key} {pid} 0` after the spawn and
//! a wrapper shell around the entrypoint appends `exit {key} {code}`; a run whose server died
//! between the spawn and the pid line is found at the next start by its environment
//! (`BERTH_RUN_KEY`, `BERTH_JOURNAL`) and recorded then. A reused pid is never
//! signalled: the leader is known by the run key in the environment it started with (older
//! versions wrote the kernel's start time in place of the 0, and still tell by that). The
//! job writes its logs to those files itself (not through pipes to the server) and its code
//! lands on disk, so a run survives a restart of the server and is adopted after it.
//!
//! A start creates no file it can avoid, because creating an inode is most of what a start
//! costs (ext4 without a journal scans past every recently deleted inode on each create; a
//! directory costs several times a file). Hence the shared journal, and hence spares: a
//! working directory or a log file that its run left empty becomes a later run's (at most
//! [`MAX_SPARES`] of each) when the run ends, and a later run takes it with a rename. A log
//! is only kept as a spare when nothing else has it open (a write lease says so), so no
//! escaped process of an old run can write into a new run's log. When starts take spares
//! faster than ends give them back (runs that write output), the blocking pool makes new
//! ones ahead of need ([`SPARE_FLOOR`]), so the inode is rarely made on a start's path.
//!
//! The journal is cut into segments of [`SEGMENT_RUNS`] runs; a new server starts a new one.
//! A segment is deleted once the database no longer lists any of its runs as unfinished (the
//! admission loop says so after a commit, [`Backend::forget_ended`]). Runs of older versions
//! (`runs/{key}/` holding `pid`, `exit`, `stdout`, `stderr` and `work/`) are still adopted
//! and their logs read.
//!
//! Logs are bounded by rotation: every [`POLL`], a file past the limit moves its newest
//! `limit` bytes to `{stream}.1` and starts again empty (the job holds it with `O_APPEND`).
//! A run ends when its entrypoint does; whatever it left in its process group is stopped
//! before the [`Exit`] is sent, so the capacity it held is really free.

mod journal;
mod logs;
mod packages;
mod procs;
mod spares;
#[cfg(test)]
mod tests;
mod watch;

use journal::*;
pub use logs::default_work_dir;
use logs::*;
use procs::*;
use spares::*;
use watch::*;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

use super::{lock, Adopted, Backend, BackendError, BoxFuture, Exit, Outcome, RunId, StartJournal, StartSpec, Stream, Traits};
use crate::engine::{Labels, Milli, Node, Resources};

/// How often logs are checked against their bound and an adopted run is looked at.
pub const POLL: Duration = Duration::from_millis(200);

/// Longest wait for a process group to vanish after SIGKILL (a process in `D` state can lag).
const KILL_WAIT: Duration = Duration::from_secs(2);

/// Most spare working directories, and most spare log files, kept for reuse.
pub const MAX_SPARES: usize = 64;

/// Spare directories kept ready by default (and twice as many files): made in the background
/// when starts take them faster than ended runs give them back, so a start rarely makes one.
pub const SPARE_FLOOR: usize = 4;

/// Runs begun in one journal segment before the next one is begun.
pub const SEGMENT_RUNS: usize = 4096;

/// Runs the entrypoint in the wrapper shell itself and appends its code to the run's journal
/// segment from an `EXIT` trap (one short `O_APPEND` write: lines of concurrent runs never
/// mix). The trap runs on `exit N` and at the end alike, so the usual entrypoint costs one
/// shell and no fork. The entrypoint comes in the environment, so it needs no quoting.
const WRAPPER: &str = r#"__berth_e=$BERTH_ENTRYPOINT __berth_j=$BERTH_JOURNAL __berth_k=$BERTH_RUN_KEY
unset BERTH_ENTRYPOINT BERTH_JOURNAL BERTH_RUN_KEY
trap 'echo "exit $__berth_k $?" >> "$__berth_j"' EXIT
eval "$__berth_e""#;

/// For an entrypoint that may replace the shell (`exec`) or set its own `EXIT` trap, either
/// of which would lose the code: the entrypoint runs in a subshell (a fork), and the wrapper
/// records the subshell's code.
const WRAPPER_FORKED: &str = r#"__berth_e=$BERTH_ENTRYPOINT __berth_j=$BERTH_JOURNAL __berth_k=$BERTH_RUN_KEY
unset BERTH_ENTRYPOINT BERTH_JOURNAL BERTH_RUN_KEY
(eval "$__berth_e")
__berth_code=$?
echo "exit $__berth_k $__berth_code" >> "$__berth_j"
exit "$__berth_code""#;

/// The wrapper for an entrypoint: the forked one when the text could defeat the trap.
fn wrapper_for(entrypoint: &str) -> &'static str {
    if entrypoint.contains("exec") || entrypoint.contains("trap") {
        WRAPPER_FORKED
    } else {
        WRAPPER
    }
}

/// What the local backend offers and where it keeps runs.
#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// Registry name, also the node's `backend` (default `local`).
    pub name: String,
    /// The one node's id (default: the host name).
    pub node_id: String,
    /// The node's capacity (default: available cores as `cpu`, total RAM in GiB as `memory_gb`).
    pub capacity: Resources,
    /// The node's labels (default `backend=local`).
    pub labels: Labels,
    /// Runs live in `data_dir/runs/`.
    pub data_dir: PathBuf,
    /// Time between SIGTERM and SIGKILL when a run is stopped (default 5 s).
    pub kill_grace: Duration,
    /// Bound of each log file (default 64 MiB); with its `.1`, at most about twice that.
    pub log_limit_bytes: u64,
    /// A run's working dir must lie inside one of these (any, when empty).
    pub workdir_roots: Vec<PathBuf>,
    /// Spare directories kept ready, and half the spare log files ([`SPARE_FLOOR`]).
    pub spare_floor: usize,
    /// Run nothing: the node is offered as configured, and its runs are simulated
    /// ([`crate::backends::sim`]).
    pub simulate: bool,
}

impl LocalConfig {
    /// The defaults, with capacity read from this host.
    pub fn detect(data_dir: impl Into<PathBuf>) -> LocalConfig {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut capacity = vec![("cpu", Milli::units(i64::try_from(cpus).unwrap_or(1)))];
        if let Some(mem) = mem_total_gib() {
            capacity.push(("memory_gb", mem));
        }
        LocalConfig {
            name: "local".into(),
            node_id: hostname(),
            capacity: Resources::new(capacity),
            labels: Labels::from([("backend".to_string(), "local".to_string())]),
            data_dir: data_dir.into(),
            kill_grace: Duration::from_secs(5),
            log_limit_bytes: 64 * 1024 * 1024,
            workdir_roots: Vec::new(),
            spare_floor: SPARE_FLOOR,
            simulate: false,
        }
    }

    /// The one node this host is.
    pub fn node(&self) -> Node {
        Node {
            id: self.node_id.as_str().into(),
            backend: self.name.as_str().into(),
            labels: self.labels.clone(),
            capacity: self.capacity.clone(),
            used_outside: Resources::default(),
        }
    }
}

/// `MemTotal` of `/proc/meminfo`, in GiB.
fn mem_total_gib() -> Option<Milli> {
    let info = fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Milli::from_f64(kib as f64 / (1024.0 * 1024.0))
}

/// This host's name (the local node's id, and part of a replica's default name).
pub fn hostname() -> String {
    let name = fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    match name.trim() {
        "" => "localhost".into(),
        n => n.to_string(),
    }
}

/// Runs jobs as process groups on this host.
#[derive(Debug)]
pub struct LocalBackend {
    cfg: LocalConfig,
    exits: UnboundedSender<Exit>,
    /// Runs this server watches (and will send the [`Exit`] of).
    live: Arc<Mutex<HashMap<RunId, Proc>>>,
    spares: Arc<Spares>,
    journal: Arc<Journal>,
}

impl LocalBackend {
    /// A backend sending each run's end to `exits`; a relative `data_dir` is made absolute.
    /// Reads the journal and the spares left by an earlier server.
    pub fn new(mut cfg: LocalConfig, exits: UnboundedSender<Exit>) -> Arc<LocalBackend> {
        if let Ok(abs) = std::path::absolute(&cfg.data_dir) {
            cfg.data_dir = abs;
        }
        let runs = cfg.data_dir.join("runs");
        let spares = Arc::new(Spares::open(runs.join(".spare"), cfg.spare_floor));
        spares.refill();
        let journal = Arc::new(Journal::open(runs.join("journal"), SEGMENT_RUNS));
        Arc::new(LocalBackend { cfg, exits, live: Arc::default(), spares, journal })
    }

    pub fn config(&self) -> &LocalConfig {
        &self.cfg
    }

    fn runs_dir(&self) -> PathBuf {
        self.cfg.data_dir.join("runs")
    }

    /// Where a run's files are in the current layout.
    fn paths(&self, run: &RunId) -> Paths {
        Paths::new(&self.runs_dir(), &run.key())
    }

    /// The default working directory of a run: `data_dir/runs/{key}`.
    pub fn work_dir(&self, run: &RunId) -> PathBuf {
        self.paths(run).work
    }

    fn start_run(&self, spec: StartSpec) -> Result<String, BackendError> {
        let key = spec.run.key();
        let fail = |what: &str, e: io::Error| BackendError::Failed(format!("run {key}: {what}: {e}"));
        let paths = self.paths(&spec.run);
        if let Some(d) = &spec.working_dir {
            crate::services::request::workdir_allowed(&self.cfg.workdir_roots, d).map_err(BackendError::Failed)?;
        }
        let work = match &spec.working_dir {
            Some(d) if Path::new(d).is_dir() => Some(PathBuf::from(d)),
            Some(d) => return Err(BackendError::Failed(format!("working_dir `{d}` does not exist or is not a directory"))),
            None => None,
        };
        let Some(segment) = self.journal.begin(&key) else {
            return Err(BackendError::Failed(format!("run {key} was already started")));
        };
        let work = match work {
            Some(w) => w,
            None => {
                if !self.spares.take_dir(&paths.work) {
                    fs::create_dir_all(&paths.work).map_err(|e| fail(&format!("creating {}", paths.work.display()), e))?;
                }
                paths.work.clone()
            }
        };
        let mut logs = Vec::with_capacity(2);
        for stream in [Stream::Stdout, Stream::Stderr] {
            let path = paths.log(stream);
            let file = match self.spares.take_file(&path) {
                Some(f) => f,
                None => open_log_in_dir(&path).map_err(|e| fail(&format!("opening {}", path.display()), e))?,
            };
            logs.push(file);
        }
        let (stderr, stdout) = (logs.pop().expect("two logs"), logs.pop().expect("two logs"));
        self.spares.refill();

        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(wrapper_for(&spec.entrypoint))
            .current_dir(&work)
            .envs(&spec.env_vars)
            .env("BERTH_JOB_ID", &*spec.run.job)
            .env("BERTH_RUN", spec.run.run.to_string())
            .env("BERTH_ENTRYPOINT", &spec.entrypoint)
            .env("BERTH_JOURNAL", self.journal.path(segment))
            .env("BERTH_RUN_KEY", &key)
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(stderr))
            .process_group(0);
        let child = {
            let _no_lease_checks = lock(&self.spares.spawning);
            cmd.spawn().map_err(|e| fail("starting /bin/sh", e))?
        };
        let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) else {
            return Err(BackendError::Failed(format!("run {key}: the process ended before it could be recorded")));
        };
        let proc = Proc { pid, start: 0 };
        if let Err(e) = self.journal.record_pid(segment, &key, proc) {
            let _ = signal_group(pid, libc::SIGKILL);
            return Err(fail("recording the pid", e));
        }
        self.lock_live().insert(spec.run.clone(), proc);
        tokio::spawn(self.watch(spec.run, paths, proc, None).run(Some(child)));
        Ok(pid.to_string())
    }

    /// What is known of a run started here: its journal record, or an old-layout run's files.
    fn record(&self, run: &RunId) -> Option<(Record, Option<Paths>)> {
        if let Some(record) = self.journal.lookup(&run.key()) {
            return Some((record, None));
        }
        let old = Paths::legacy(&self.runs_dir(), run)?;
        Some((old.read_legacy(), Some(old)))
    }

    fn stop_run(&self, run: &RunId) -> Result<(), BackendError> {
        let known = self.lock_live().get(run).copied();
        let Some(proc) = known.or_else(|| self.record(run).and_then(|(r, _)| r.pid)) else {
            return Ok(()); // never started: nothing to stop
        };
        let key = run.key();
        if !is_ours(proc, &key) {
            return Ok(());
        }
        match signal_group(proc.pid, libc::SIGTERM) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(()),
            Err(e) => return Err(BackendError::Failed(format!("stopping run {} (process group {}): {e}", run.key(), proc.pid))),
        }
        let grace = self.cfg.kill_grace;
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            if is_ours(proc, &key) {
                let _ = signal_group(proc.pid, libc::SIGKILL);
            }
        });
        Ok(())
    }

    fn adopt_run(&self, run: RunId) -> Adopted {
        let Some((record, legacy)) = self.record(&run) else {
            return Adopted::NeverStarted;
        };
        if let Some(code) = record.exit {
            return Adopted::Ended(Outcome::Exited(code));
        }
        let Some(proc) = record.pid else {
            return Adopted::NeverStarted; // the server died before it spawned the process
        };
        let exit_now = || match &legacy {
            Some(old) => old.read_legacy().exit,
            None => self.journal.lookup(&run.key()).and_then(|r| r.exit),
        };
        if is_alive(proc, &run.key()) {
            let handle = proc.pid.to_string();
            let new = self.lock_live().insert(run.clone(), proc).is_none();
            if new {
                let paths = legacy.clone().unwrap_or_else(|| self.paths(&run));
                let source = match legacy {
                    Some(old) => ExitSource::Legacy(old),
                    None => ExitSource::Journal(self.journal.clone(), run.key()),
                };
                tokio::spawn(self.watch(run, paths, proc, Some(source)).run(None));
            }
            return Adopted::Running { handle };
        }
        // It may have ended between the two reads.
        match exit_now() {
            Some(code) => Adopted::Ended(Outcome::Exited(code)),
            None => Adopted::Ended(Outcome::Failed("process is gone and left no exit code".into())),
        }
    }

    fn watch(&self, run: RunId, paths: Paths, proc: Proc, adopted: Option<ExitSource>) -> Watch {
        Watch {
            paths,
            run,
            proc,
            adopted,
            grace: self.cfg.kill_grace,
            log_limit: self.cfg.log_limit_bytes,
            rotated: Default::default(),
            exits: self.exits.clone(),
            live: self.live.clone(),
            spares: self.spares.clone(),
        }
    }

    fn lock_live(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, Proc>> {
        lock(&self.live)
    }
}

impl Backend for LocalBackend {
    fn name(&self) -> &str {
        &self.cfg.name
    }

    fn nodes(&self) -> Vec<Node> {
        vec![self.cfg.node()]
    }

    /// At once, unless the run has packages to unpack first.
    fn start(&self, spec: StartSpec) -> BoxFuture<'_, Result<String, BackendError>> {
        Box::pin(async move {
            let env = app::jobs::RuntimeEnv { working_dir: spec.working_dir.clone(), env_vars: Default::default(), other: spec.runtime_env.clone() };
            if let Some(why) = packages::refusal(&env) {
                return Err(BackendError::Failed(why));
            }
            let spec = if spec.packages.is_empty() { spec } else { self.unpack(spec, env).await? };
            self.start_run(spec)
        })
    }

    fn refuses(&self, runtime_env: &app::jobs::RuntimeEnv) -> Option<String> {
        packages::refusal(runtime_env)
    }

    /// The journal, not the handle, names the process: it carries the start time.
    fn stop(&self, run: RunId, _handle: String) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move { self.stop_run(&run) })
    }

    fn adopt(&self, spec: StartSpec, _handle: Option<String>) -> BoxFuture<'_, Adopted> {
        let run = spec.run;
        Box::pin(async move { self.adopt_run(run) })
    }

    /// `None` reads the last `log_limit_bytes`, from `.1` too when the current file is shorter.
    /// A log that is not there is empty (a run that wrote nothing gave its file away).
    fn logs(&self, run: RunId, stream: Stream, tail_bytes: Option<u64>) -> BoxFuture<'_, Result<Vec<u8>, BackendError>> {
        let runs = self.runs_dir();
        let want = tail_bytes.unwrap_or(self.cfg.log_limit_bytes);
        Box::pin(async move {
            let paths = Paths::legacy(&runs, &run).unwrap_or_else(|| Paths::new(&runs, &run.key()));
            let read = tokio::task::spawn_blocking(move || read_log(&paths.log(stream), want)).await;
            read.map_err(io::Error::other).and_then(|r| r).map_err(|e| BackendError::Failed(format!("reading the log of run {}: {e}", run.key())))
        })
    }

    /// The start is synchronous: a spawn and a few file operations.
    fn traits(&self) -> Traits {
        Traits { starts_at_once: true, ..Traits::default() }
    }

    /// The journal has a run's pid line before the loop hears of the start.
    fn journal(&self) -> Option<&dyn StartJournal> {
        Some(self)
    }
}

impl StartJournal for LocalBackend {
    fn begun_runs(&self) -> Vec<RunId> {
        self.journal.begun().iter().filter_map(|key| RunId::from_key(key)).collect()
    }

    fn has_ended_runs(&self) -> bool {
        self.journal.has_old_segments()
    }

    fn forget_ended(&self, live: &HashSet<RunId>) {
        let keys: HashSet<String> = live.iter().map(RunId::key).collect();
        self.journal.retain(&keys);
    }

    fn reload(&self) {
        self.journal.reopen();
    }
}
