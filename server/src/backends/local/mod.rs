//! The local backend: each run is a process group on the server's own host.
//!
//! A run's files are in `data_dir/runs/`: `{key}.stdout` and `{key}.stderr`, and `{key}/`,
//! the default working directory (for a run that names none). Its record is a line in the
//! journal, `runs/journal/{n}`: the server appends `pid {key} {pid} 0` after the spawn and
//! a wrapper shell around the entrypoint appends `exit {key} {code}`. A reused pid is never
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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

use super::{Adopted, Backend, BackendError, BoxFuture, Exit, Outcome, RunId, StartSpec, Stream};
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

fn hostname() -> String {
    let name = fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    match name.trim() {
        "" => "localhost".into(),
        n => n.to_string(),
    }
}

/// The leader of a run's process group, as the journal records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Proc {
    pid: i32,
    /// Field 22 of `/proc/{pid}/stat`, as older versions recorded it, to tell this process
    /// from a later one with its pid. 0 (now always): its environment tells it, since it
    /// holds the run's key (see [`leader_is`]); a start then reads nothing in `/proc`.
    start: u64,
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
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Backend for LocalBackend {
    fn name(&self) -> &str {
        &self.cfg.name
    }

    fn nodes(&self) -> Vec<Node> {
        vec![Node {
            id: self.cfg.node_id.as_str().into(),
            backend: self.cfg.name.as_str().into(),
            labels: self.cfg.labels.clone(),
            capacity: self.cfg.capacity.clone(),
            used_outside: Resources::default(),
        }]
    }

    fn start(&self, spec: StartSpec) -> BoxFuture<'_, Result<String, BackendError>> {
        Box::pin(async move { self.start_run(spec) })
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
    fn starts_at_once(&self) -> bool {
        true
    }

    /// The journal has a run's pid line before the loop hears of the start.
    fn records_starts(&self) -> bool {
        true
    }

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
}

/// Where an adopted run's exit code will appear.
enum ExitSource {
    Journal(Arc<Journal>, String),
    Legacy(Paths),
}

impl ExitSource {
    fn exit(&self) -> Option<i32> {
        match self {
            ExitSource::Journal(j, key) => j.lookup(key).and_then(|r| r.exit),
            ExitSource::Legacy(old) => old.read_legacy().exit,
        }
    }
}

/// One watched run: its own task rotates the logs, waits for the end and sends the [`Exit`].
struct Watch {
    run: RunId,
    proc: Proc,
    paths: Paths,
    /// For a run started before a restart (not our child): where its code will be.
    adopted: Option<ExitSource>,
    grace: Duration,
    log_limit: u64,
    /// A log was rotated: its `.1` holds output, so it is no spare.
    rotated: std::sync::atomic::AtomicBool,
    exits: UnboundedSender<Exit>,
    live: Arc<Mutex<HashMap<RunId, Proc>>>,
    spares: Arc<Spares>,
}

impl Watch {
    /// With the child, waits for it; without (an adopted run), polls for the leader to go.
    async fn run(self, child: Option<tokio::process::Child>) {
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let outcome = match child {
            Some(mut child) => loop {
                tokio::select! {
                    status = child.wait() => break match status {
                        Ok(s) => match (s.code(), s.signal()) {
                            (Some(code), _) => Outcome::Exited(code),
                            (None, Some(sig)) => Outcome::Signaled(sig),
                            (None, None) => Outcome::Failed(format!("process ended with status {s}")),
                        },
                        Err(e) => Outcome::Failed(format!("waiting for the process: {e}")),
                    },
                    _ = tick.tick() => self.bound_logs().await,
                }
            },
            None => loop {
                tick.tick().await;
                self.bound_logs().await;
                if !is_alive(self.proc, &self.run.key()) {
                    break match self.adopted.as_ref().and_then(ExitSource::exit) {
                        Some(code) => Outcome::Exited(code),
                        None => Outcome::Failed("process ended without recording an exit code (killed by a signal?)".into()),
                    };
                }
            },
        };
        end_group(self.proc, &self.run.key(), self.grace).await;
        self.bound_logs().await;
        self.live.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.run);
        // Before the send, so the start the exit lets in can take what this run left empty,
        // unless a spawn is under way (lease checks wait for it): then the next start takes
        // a spare kept ready (see `SPARE_FLOOR`), and the blocking pool recycles this run's
        // after the send. A log can also look held for a moment after its run ended: ask
        // again a few times, then leave it to an escaped process.
        let recycle = self.paths.legacy.is_none() && !group_exists(self.proc.pid);
        // Whether a `.1` may hold this run's output is known only for runs watched from
        // their start.
        let fresh = self.adopted.is_none() && !self.rotated.load(std::sync::atomic::Ordering::Relaxed);
        let recycled = recycle && self.spares.try_recycle(&self.paths, fresh) == Some(true);
        let _ = self.exits.send(Exit { run: self.run, outcome });
        if recycle && !recycled {
            let (spares, paths) = (self.spares, self.paths);
            tokio::task::spawn_blocking(move || {
                for ms in [0, 1, 4, 16, 64] {
                    std::thread::sleep(Duration::from_millis(ms));
                    if spares.recycle(&paths, fresh) {
                        break;
                    }
                }
            });
        }
    }

    /// Two stats; only a log past its bound goes to the blocking pool to be rotated.
    async fn bound_logs(&self) {
        let limit = self.log_limit.max(1);
        for stream in [Stream::Stdout, Stream::Stderr] {
            let path = self.paths.log(stream);
            if fs::metadata(&path).map_or(true, |m| m.len() <= limit) {
                continue;
            }
            self.rotated.store(true, std::sync::atomic::Ordering::Relaxed);
            let rotated = tokio::task::spawn_blocking({
                let path = path.clone();
                move || rotate(&path, limit)
            });
            if let Ok(Err(e)) = rotated.await {
                tracing::warn!(log = %path.display(), error = %e, "log rotation failed");
            }
        }
    }
}

/// Empty working directories and log files of ended runs, each to become a new run's by a
/// rename (see the module doc). A spare stays where its run left it until a start takes it:
/// one rename per reuse. Those are known to this server only; `dir` holds the spares an
/// older version left, read at start.
#[derive(Debug)]
struct Spares {
    dir: PathBuf,
    /// Mode, owner and group of a directory made here: a spare that differs (a job chmod-ed
    /// its working directory) is not handed to another run.
    made: Option<(u32, u32, u32)>,
    dirs: Mutex<Vec<PathBuf>>,
    files: Mutex<Vec<PathBuf>>,
    /// Held by a spawn and by the lease checks of [`Spares::recycle`]: a child copies all of
    /// the server's descriptors until it execs, so a log opened for its check during a spawn
    /// would seem open elsewhere.
    spawning: Mutex<()>,
    /// Spare directories made ahead (see [`SPARE_FLOOR`]).
    floor: usize,
    /// Names spares: this server's start time, then a count.
    stamp: u128,
    count: std::sync::atomic::AtomicU64,
    /// A [`Spares::refill`] is under way.
    refilling: std::sync::atomic::AtomicBool,
}

impl Spares {
    /// `dir` and the empty directories and files already in it (from before a restart).
    fn open(dir: PathBuf, floor: usize) -> Spares {
        let _ = fs::create_dir_all(&dir);
        let made = fs::metadata(&dir).ok().map(|m| dir_identity(&m));
        let (mut dirs, mut files) = (Vec::new(), Vec::new());
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            match fs::symlink_metadata(&path) {
                Ok(m) if m.is_dir() && is_empty_dir(&path) => dirs.push(path),
                Ok(m) if m.is_file() && m.len() == 0 => files.push(path),
                _ => {}
            }
        }
        dirs.truncate(MAX_SPARES);
        files.truncate(MAX_SPARES);
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        Spares {
            dir,
            made,
            dirs: Mutex::new(dirs),
            files: Mutex::new(files),
            spawning: Mutex::new(()),
            floor,
            stamp,
            count: Default::default(),
            refilling: Default::default(),
        }
    }

    fn name(&self) -> PathBuf {
        let n = self.count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.dir.join(format!("{}-{n}", self.stamp))
    }

    /// Moves a spare directory to `to`; false when there is none. (It was empty when it
    /// became a spare, after its run's group was gone and no one held its logs.)
    fn take_dir(&self, to: &Path) -> bool {
        while let Some(spare) = lock(&self.dirs).pop() {
            if fs::rename(&spare, to).is_ok() {
                return true;
            }
        }
        false
    }

    /// Moves a spare file to `to` and opens it as a log; `None` when there is none.
    fn take_file(&self, to: &Path) -> Option<File> {
        while let Some(spare) = lock(&self.files).pop() {
            if fs::rename(&spare, to).is_err() {
                continue;
            }
            match open_log(to) {
                Ok(f) if f.metadata().is_ok_and(|m| m.len() == 0) => return Some(f),
                // Not empty after all: it stays that run's log; the caller makes a fresh one.
                Ok(_) | Err(_) => {
                    let _ = fs::rename(to, self.name().with_extension("stale"));
                }
            }
        }
        None
    }

    /// Keeps what an ended run left empty, where it is, as spares: its working directory if
    /// it is as this backend makes them, its logs if they were never rotated. Nothing is kept
    /// while some process (escaped from the run's group) still has one of its logs open: it
    /// could also still write into the working directory.
    ///
    /// `fresh`: the run's logs were never rotated, so an empty log is all its run wrote
    /// (else a log is kept only when it has no `.1`).
    ///
    /// False when a log is open elsewhere (nothing was kept). Waits for a spawn under way.
    fn recycle(&self, paths: &Paths, fresh: bool) -> bool {
        self.recycle_with(paths, fresh, lock(&self.spawning))
    }

    /// [`Spares::recycle`] unless a spawn is under way (`None`).
    fn try_recycle(&self, paths: &Paths, fresh: bool) -> Option<bool> {
        match self.spawning.try_lock() {
            Ok(guard) => Some(self.recycle_with(paths, fresh, guard)),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(self.recycle_with(paths, fresh, e.into_inner())),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    fn recycle_with(&self, paths: &Paths, fresh: bool, no_spawns: std::sync::MutexGuard<'_, ()>) -> bool {
        let mut empty = Vec::new();
        for log in [&paths.stdout, &paths.stderr] {
            let Ok(f) = File::open(log) else { continue };
            if !alone(&f) {
                return false;
            }
            if f.metadata().is_ok_and(|m| m.is_file() && m.len() == 0) && (fresh || !with_suffix(log, ".1").exists()) {
                empty.push(log);
            }
        }
        drop(no_spawns);
        let same = self.made.is_some() && fs::symlink_metadata(&paths.work).is_ok_and(|m| m.is_dir() && Some(dir_identity(&m)) == self.made);
        if same && is_empty_dir(&paths.work) {
            let mut dirs = lock(&self.dirs);
            if dirs.len() < MAX_SPARES {
                dirs.push(paths.work.clone());
            }
        }
        let mut files = lock(&self.files);
        for log in empty {
            if files.len() >= MAX_SPARES {
                break;
            }
            files.push(log.clone());
        }
        true
    }

    /// Tops the spares up to the floor on the blocking pool, once at a time (nothing outside
    /// a tokio runtime).
    fn refill(self: &Arc<Self>) {
        let low = lock(&self.dirs).len() < self.floor || lock(&self.files).len() < 2 * self.floor;
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        if !low || self.refilling.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        let spares = self.clone();
        rt.spawn_blocking(move || {
            while lock(&spares.dirs).len() < spares.floor {
                let path = spares.name();
                if fs::create_dir(&path).is_err() {
                    break;
                }
                lock(&spares.dirs).push(path);
            }
            while lock(&spares.files).len() < 2 * spares.floor {
                let path = spares.name();
                if OpenOptions::new().write(true).create_new(true).open(&path).is_err() {
                    break;
                }
                lock(&spares.files).push(path);
            }
            spares.refilling.store(false, std::sync::atomic::Ordering::Release);
        });
    }
}


fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// No other open file description of this file exists: the kernel grants a write lease only
/// then. Released at once; any failure (a file system without leases) says no.
fn alone(f: &File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl on a descriptor we own, with integer arguments.
    let granted = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLEASE, libc::F_WRLCK) } == 0;
    if granted {
        unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
    }
    granted
}

fn dir_identity(m: &fs::Metadata) -> (u32, u32, u32) {
    use std::os::unix::fs::MetadataExt;
    (m.mode(), m.uid(), m.gid())
}

fn is_empty_dir(path: &Path) -> bool {
    fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_none())
}

/// The runs' pid and exit lines, by segment (see the module doc).
#[derive(Debug)]
struct Journal {
    dir: PathBuf,
    /// Runs a segment takes ([`SEGMENT_RUNS`]; fewer in tests).
    per_segment: usize,
    state: Mutex<Segments>,
}

#[derive(Debug, Default)]
struct Segments {
    /// The segment new runs are begun in: a fresh one per server.
    current: u64,
    /// Runs begun in `current`.
    begun: usize,
    /// `current`, open for appending once something was written to it.
    file: Option<File>,
    all: BTreeMap<u64, Segment>,
}

/// What one segment says, and how much of it has been read.
#[derive(Debug, Default)]
struct Segment {
    runs: HashMap<String, Record>,
    /// Bytes parsed, up to the last complete line.
    read: u64,
}

impl Journal {
    /// Reads every segment in `dir`; new runs go to a new one.
    fn open(dir: PathBuf, per_segment: usize) -> Journal {
        let _ = fs::create_dir_all(&dir);
        let mut all = BTreeMap::new();
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            if let Some(n) = entry.file_name().to_str().and_then(|n| n.parse::<u64>().ok()) {
                let mut segment = Segment::default();
                segment.refresh(&entry.path());
                all.insert(n, segment);
            }
        }
        let current = all.keys().next_back().map_or(1, |n| n + 1);
        all.insert(current, Segment::default());
        Journal { dir, per_segment, state: Mutex::new(Segments { current, begun: 0, file: None, all }) }
    }

    fn path(&self, segment: u64) -> PathBuf {
        self.dir.join(segment.to_string())
    }

    /// Enters a run about to be started; the segment its lines go to, or `None` when the
    /// run was started already.
    fn begin(&self, key: &str) -> Option<u64> {
        let mut s = lock(&self.state);
        if s.all.values().any(|seg| seg.runs.get(key).is_some_and(|r| r.pid.is_some() || r.exit.is_some())) {
            return None;
        }
        if s.begun >= self.per_segment {
            s.current += 1;
            s.begun = 0;
            s.file = None;
            let current = s.current;
            s.all.insert(current, Segment::default());
        }
        s.begun += 1;
        let current = s.current;
        s.all.entry(current).or_default().runs.entry(key.to_string()).or_default();
        Some(current)
    }

    /// Appends the pid line of a run begun in `segment` (one write).
    fn record_pid(&self, segment: u64, key: &str, proc: Proc) -> io::Result<()> {
        let line = format!("pid {key} {} {}\n", proc.pid, proc.start);
        let mut s = lock(&self.state);
        if segment == s.current {
            if s.file.is_none() {
                s.file = Some(OpenOptions::new().create(true).append(true).open(self.path(segment))?);
            }
            s.file.as_mut().expect("opened above").write_all(line.as_bytes())?;
        } else {
            OpenOptions::new().create(true).append(true).open(self.path(segment))?.write_all(line.as_bytes())?;
        }
        if let Some(seg) = s.all.get_mut(&segment) {
            seg.runs.entry(key.to_string()).or_default().pid = Some(proc);
        }
        Ok(())
    }

    /// A run's record, with its segment read up to now; `None` for a run not begun here.
    fn lookup(&self, key: &str) -> Option<Record> {
        let mut s = lock(&self.state);
        let n = *s.all.iter().find(|(_, seg)| seg.runs.contains_key(key))?.0;
        let path = self.path(n);
        let seg = s.all.get_mut(&n)?;
        seg.refresh(&path);
        seg.runs.get(key).cloned()
    }

    /// Keys of the runs with a pid or exit line, in every segment.
    fn begun(&self) -> Vec<String> {
        let s = lock(&self.state);
        s.all.values().flat_map(|seg| seg.runs.iter().filter(|(_, r)| r.pid.is_some() || r.exit.is_some()).map(|(k, _)| k.clone())).collect()
    }

    fn has_old_segments(&self) -> bool {
        lock(&self.state).all.len() > 1
    }

    /// Deletes every segment but the current one that holds none of `live`.
    fn retain(&self, live: &HashSet<String>) {
        let mut s = lock(&self.state);
        let current = s.current;
        let dead: Vec<u64> = s.all.iter().filter(|(n, seg)| **n != current && !seg.runs.keys().any(|k| live.contains(k))).map(|(n, _)| *n).collect();
        for n in dead {
            match fs::remove_file(self.path(n)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(segment = %self.path(n).display(), error = %e, "cannot delete a journal segment");
                    continue;
                }
            }
            s.all.remove(&n);
        }
    }
}

impl Segment {
    /// Parses what was appended to the file since the last read.
    fn refresh(&mut self, path: &Path) {
        let Ok(mut f) = File::open(path) else { return };
        if f.seek(SeekFrom::Start(self.read)).is_err() {
            return;
        }
        let mut text = String::new();
        if f.read_to_string(&mut text).is_err() {
            return;
        }
        // A line still being written waits for the next read.
        let Some(end) = text.rfind('\n') else { return };
        for line in text[..end].lines() {
            let mut words = line.split_whitespace();
            let (Some(kind), Some(key)) = (words.next(), words.next()) else { continue };
            let record = self.runs.entry(key.to_string()).or_default();
            match kind {
                "pid" => {
                    if let (Some(Ok(pid)), Some(Ok(start))) = (words.next().map(str::parse), words.next().map(str::parse)) {
                        record.pid = Some(Proc { pid, start });
                    }
                }
                "exit" => record.exit = words.next().and_then(|c| c.parse().ok()).or(record.exit),
                _ => {}
            }
        }
        self.read += end as u64 + 1;
    }
}

/// Stops what a run left in its group after its leader ended: SIGTERM, SIGKILL after `grace`.
async fn end_group(proc: Proc, key: &str, grace: Duration) {
    // The usual end: the group is gone, which a signal 0 says without reading `/proc`.
    if !group_exists(proc.pid) || !is_ours(proc, key) || signal_group(proc.pid, libc::SIGTERM).is_err() {
        return;
    }
    for (sig, wait) in [(None, grace), (Some(libc::SIGKILL), KILL_WAIT)] {
        if let Some(sig) = sig {
            if !is_ours(proc, key) || signal_group(proc.pid, sig).is_err() {
                return;
            }
        }
        let deadline = Instant::now() + wait;
        while group_exists(proc.pid) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if !group_exists(proc.pid) {
            return;
        }
    }
}

/// Where one run's files are.
#[derive(Debug, Clone)]
struct Paths {
    stdout: PathBuf,
    stderr: PathBuf,
    /// The default working directory.
    work: PathBuf,
    /// An old-layout run's directory, holding `pid` and `exit` files too.
    legacy: Option<PathBuf>,
}

impl Paths {
    /// The current layout: `runs/{key}.stdout`, `.stderr` and `runs/{key}/`.
    fn new(runs: &Path, key: &str) -> Paths {
        Paths { stdout: runs.join(format!("{key}.stdout")), stderr: runs.join(format!("{key}.stderr")), work: runs.join(key), legacy: None }
    }

    /// A run of the old layout (`runs/{key}/` with `pid`, `exit`, `stdout`, `stderr`, `work/`).
    fn legacy(runs: &Path, run: &RunId) -> Option<Paths> {
        let dir = runs.join(run.key());
        dir.join("pid").is_file().then(|| Paths { stdout: dir.join("stdout"), stderr: dir.join("stderr"), work: dir.join("work"), legacy: Some(dir) })
    }

    fn log(&self, stream: Stream) -> PathBuf {
        match stream {
            Stream::Stdout => self.stdout.clone(),
            Stream::Stderr => self.stderr.clone(),
        }
    }

    /// An old-layout run's `pid` (`{pid} {start}`) and `exit` (`{code}`) files.
    fn read_legacy(&self) -> Record {
        let Some(dir) = &self.legacy else { return Record::default() };
        let pid = fs::read_to_string(dir.join("pid")).ok().and_then(|text| {
            let mut parts = text.split_whitespace();
            Some(Proc { pid: parts.next()?.parse().ok()?, start: parts.next()?.parse().ok()? })
        });
        let exit = fs::read_to_string(dir.join("exit")).ok().and_then(|s| s.trim().parse().ok());
        Record { pid, exit }
    }
}

/// The working directory the local backend gave a run that named none (`data_dir` is the
/// server's, as [`LocalConfig::data_dir`]).
pub fn default_work_dir(data_dir: &Path, run: &RunId) -> PathBuf {
    let runs = data_dir.join("runs");
    Paths::legacy(&runs, run).unwrap_or_else(|| Paths::new(&runs, &run.key())).work
}

/// What is recorded of a run so far.
#[derive(Debug, Clone, Default)]
struct Record {
    pid: Option<Proc>,
    exit: Option<i32>,
}

/// `path` with `suffix` appended to its file name.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// A log file, opened for appending so it can be truncated under the writer. It is new, or
/// left empty by a start of the same run that never spawned (a restart then retries it).
fn open_log(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// [`open_log`], making its directory first if it went missing (the backend makes it when
/// it opens, so a start does not ask each time: an `mkdir` that fails costs a path walk).
fn open_log_in_dir(path: &Path) -> io::Result<File> {
    match open_log(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))?;
            open_log(path)
        }
        other => other,
    }
}

/// Keeps a log under `limit`: past it, its newest `limit` bytes (plus what arrives during the
/// copy) become `{path}.1` and it starts again empty. Bytes written between the copy and the
/// truncation, a few system calls, are lost.
fn rotate(path: &Path, limit: u64) -> io::Result<()> {
    let limit = limit.max(1);
    let len = match fs::metadata(path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if len <= limit {
        return Ok(());
    }
    let tmp = with_suffix(path, ".1.tmp");
    let mut src = File::open(path)?;
    src.seek(SeekFrom::Start(len - limit))?;
    let mut dst = File::create(&tmp)?;
    io::copy(&mut (&mut src).take(limit), &mut dst)?;
    io::copy(&mut src.take(limit), &mut dst)?;
    fs::rename(&tmp, with_suffix(path, ".1"))?;
    OpenOptions::new().write(true).open(path)?.set_len(0)
}

/// The last `want` bytes of a log, reaching into `{path}.1` when the file is shorter.
fn read_log(path: &Path, want: u64) -> io::Result<Vec<u8>> {
    let current = read_tail(path, want)?;
    let have = current.len() as u64;
    if have >= want {
        return Ok(current);
    }
    let mut out = read_tail(&with_suffix(path, ".1"), want - have)?;
    out.extend_from_slice(&current);
    Ok(out)
}

/// The last `want` bytes of a file; a missing file is empty.
fn read_tail(path: &Path, want: u64) -> io::Result<Vec<u8>> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(want)))?;
    let mut buf = Vec::new();
    f.take(want).read_to_end(&mut buf)?;
    Ok(buf)
}

/// What `/proc/{pid}/stat` says of a process.
struct Stat {
    state: char,
    start: u64,
}

fn read_stat(pid: i32) -> Option<Stat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields resume after the last `)`.
    let mut fields = text.get(text.rfind(')')? + 1..)?.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let start = fields.nth(18)?.parse().ok()?; // field 22, counting from the state (field 3)
    Some(Stat { state, start })
}

/// True when `pid` is a running (not zombie) process.
pub fn pid_alive(pid: i32) -> bool {
    read_stat(pid).is_some_and(|s| !matches!(s.state, 'Z' | 'X' | 'x'))
}

/// Whether the process holding the leader's pid is the run's leader (`None`: no process
/// holds it). A leader recorded without a start time is known by the run key it was started
/// with: the kernel keeps a process's first environment, whatever its shell unsets. A zombie
/// has none left, so it never counts as the leader here.
fn leader_is(proc: Proc, key: &str) -> Option<bool> {
    if proc.start != 0 {
        return read_stat(proc.pid).map(|s| s.start == proc.start);
    }
    let env = match fs::read(format!("/proc/{}/environ", proc.pid)) {
        Ok(env) => env,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(_) => return Some(false),
    };
    let want = format!("BERTH_RUN_KEY={key}");
    Some(env.split(|b| *b == 0).any(|var| var == want.as_bytes()))
}

/// The run's leader itself is still running.
fn is_alive(proc: Proc, key: &str) -> bool {
    if proc.start != 0 {
        return read_stat(proc.pid).is_some_and(|s| s.start == proc.start && !matches!(s.state, 'Z' | 'X' | 'x'));
    }
    leader_is(proc, key) == Some(true)
}

/// The group with the leader's pid can only be the run's: the leader is that process, or it is
/// gone (the kernel does not hand out a pid still used as a group id). A pid now held by
/// another process means the group died long ago.
fn is_ours(proc: Proc, key: &str) -> bool {
    leader_is(proc, key) != Some(false)
}

fn group_exists(pgid: i32) -> bool {
    pgid > 1 && unsafe { libc::killpg(pgid, 0) } == 0
}

/// `killpg`, refusing the groups that would hit the server itself.
fn signal_group(pgid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: getpgrp and killpg take plain integers and touch no memory of ours.
    if pgid <= 1 || pgid == unsafe { libc::getpgrp() } {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("refusing to signal process group {pgid}")));
    }
    if unsafe { libc::killpg(pgid, sig) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use tokio::sync::mpsc::{self, UnboundedReceiver};

    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("berth-local-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    fn config(name: &str) -> LocalConfig {
        let mut cfg = LocalConfig::detect(temp_dir(name));
        cfg.kill_grace = Duration::from_millis(500);
        cfg
    }

    fn backend(cfg: LocalConfig) -> (Arc<LocalBackend>, UnboundedReceiver<Exit>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (LocalBackend::new(cfg, tx), rx)
    }

    fn spec(job: &str, entrypoint: &str) -> StartSpec {
        StartSpec {
            run: RunId { job: job.into(), run: 1 },
            entrypoint: entrypoint.into(),
            working_dir: None,
            env_vars: BTreeMap::new(),
            runtime_env: Default::default(),
            resources: Resources::default(),
            node: "n".into(),
            flavors: Vec::new(),
            selector_labels: BTreeMap::new(),
            metadata: BTreeMap::new(),
        }
    }

    async fn next_exit(rx: &mut UnboundedReceiver<Exit>) -> Exit {
        tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.expect("an exit within 10 s").expect("channel open")
    }

    async fn stdout(b: &LocalBackend, job: &str, tail: Option<u64>) -> String {
        let bytes = b.logs(RunId { job: job.into(), run: 1 }, Stream::Stdout, tail).await.expect("logs");
        String::from_utf8(bytes).expect("utf-8")
    }

    /// Waits for a file a job writes, then reads the pid in it.
    async fn pid_in(path: &Path) -> i32 {
        for _ in 0..100 {
            if let Some(pid) = fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok()) {
                return pid;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{} never appeared", path.display());
    }

    #[test]
    fn detect_reads_the_host() {
        let cfg = LocalConfig::detect("d");
        assert!(cfg.capacity.get("cpu") >= Milli::units(1));
        assert!(cfg.capacity.get("memory_gb") > Milli::ZERO);
        assert_eq!(cfg.capacity.get("gpu"), Milli::ZERO);
        assert_eq!(cfg.labels.get("backend").map(String::as_str), Some("local"));
        assert!(!cfg.node_id.is_empty());
    }

    #[tokio::test]
    async fn exit_codes_are_reported_and_stopping_a_dead_run_is_fine() {
        let (b, mut rx) = backend(config("codes"));
        let node = &b.nodes()[0];
        assert_eq!((&*node.backend, &node.labels), ("local", &b.config().labels));
        for (job, entry, code) in [("ok", "true", 0), ("three", "echo x; exit 3", 3)] {
            let handle = b.start(spec(job, entry)).await.expect("start");
            assert!(handle.parse::<i32>().is_ok_and(|p| p > 1));
            let exit = next_exit(&mut rx).await;
            assert_eq!((&*exit.run.job, exit.outcome), (job, Outcome::Exited(code)));
            let run = RunId { job: job.into(), run: 1 };
            assert_eq!(b.journal.lookup(&run.key()).and_then(|r| r.exit), Some(code));
            b.stop(run.clone(), handle).await.expect("stopping a finished run");
            assert!(b.start(spec(job, entry)).await.is_err(), "a run starts once");
        }
    }

    /// A restarted server reads a run's code from the journal, so every way an entrypoint
    /// can end must leave its line there: plain, `exit`, `exec`, or with a trap of its own.
    #[tokio::test]
    async fn every_code_reaches_the_journal() {
        let (b, mut rx) = backend(config("journal-codes"));
        let cases = [("plain", "false", 1), ("exit", "echo x; exit 3", 3), ("exec", "exec sh -c 'exit 4'", 4), ("trap", "trap 'exit 5' EXIT; true", 5)];
        for (job, entry, code) in cases {
            b.start(spec(job, entry)).await.expect("start");
            assert_eq!(next_exit(&mut rx).await.outcome, Outcome::Exited(code), "{entry}");
            let recorded = b.journal.lookup(&RunId { job: job.into(), run: 1 }.key()).and_then(|r| r.exit);
            assert_eq!(recorded, Some(code), "{entry}");
        }
        let mut begun = b.begun_runs();
        begun.sort();
        assert_eq!(begun.iter().map(|r| (&*r.job, r.run)).collect::<Vec<_>>(), [("exec", 1), ("exit", 1), ("plain", 1), ("trap", 1)]);
    }

    #[tokio::test]
    async fn logs_are_captured_and_tailed() {
        let (b, mut rx) = backend(config("logs"));
        b.start(spec("j", "echo hello; echo oops >&2; printf abcdef")).await.expect("start");
        next_exit(&mut rx).await;
        assert_eq!(stdout(&b, "j", None).await, "hello\nabcdef");
        assert_eq!(stdout(&b, "j", Some(3)).await, "def");
        assert_eq!(stdout(&b, "j", Some(0)).await, "");
        let err = b.logs(RunId { job: "j".into(), run: 1 }, Stream::Stderr, None).await.expect("stderr");
        assert_eq!(err, b"oops\n");
        let never = b.logs(RunId { job: "nope".into(), run: 1 }, Stream::Stdout, None).await.expect("a log never written");
        assert!(never.is_empty());
    }

    #[tokio::test]
    async fn env_vars_and_working_dir_are_honoured() {
        let (b, mut rx) = backend(config("env"));
        let work = fs::canonicalize(temp_dir("env-work")).expect("work dir");
        let mut s = spec("j", r#"pwd; echo "$FOO $BERTH_JOB_ID $BERTH_RUN [$BERTH_ENTRYPOINT]""#);
        s.working_dir = Some(work.display().to_string());
        s.env_vars.insert("FOO".into(), "bar baz".into());
        b.start(s).await.expect("start");
        next_exit(&mut rx).await;
        assert_eq!(stdout(&b, "j", None).await, format!("{}\nbar baz j 1 []\n", work.display()));

        b.start(spec("k", "pwd")).await.expect("start");
        next_exit(&mut rx).await;
        let runs = fs::canonicalize(b.config().data_dir.join("runs")).expect("runs dir");
        assert_eq!(stdout(&b, "k", None).await, format!("{}\n", runs.join("k-r1").display()));

        let mut s = spec("m", "true");
        s.working_dir = Some("/no/such/dir".into());
        let err = b.start(s).await.expect_err("a missing working_dir");
        assert!(err.to_string().contains("/no/such/dir"), "{err}");
    }

    #[tokio::test]
    async fn stop_kills_the_whole_tree() {
        let (b, mut rx) = backend(config("stop"));
        let handle = b.start(spec("j", "sleep 300 & echo $! > child.pid; wait")).await.expect("start");
        let run = RunId { job: "j".into(), run: 1 };
        let child = pid_in(&b.work_dir(&run).join("child.pid")).await;
        let leader: i32 = handle.parse().expect("pid");
        assert!(pid_alive(leader) && pid_alive(child));
        b.stop(run, handle).await.expect("stop");
        let exit = next_exit(&mut rx).await;
        assert_eq!(exit.outcome, Outcome::Signaled(libc::SIGTERM));
        assert!(!pid_alive(leader) && !pid_alive(child));
    }

    #[tokio::test]
    async fn stop_escalates_to_sigkill() {
        let (b, mut rx) = backend(config("kill"));
        let handle = b.start(spec("j", r#"sh -c 'trap "" TERM; echo $$ > inner.pid; sleep 300'"#)).await.expect("start");
        let run = RunId { job: "j".into(), run: 1 };
        let inner = pid_in(&b.work_dir(&run).join("inner.pid")).await;
        let stopped = Instant::now();
        b.stop(run, handle).await.expect("stop");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(pid_alive(inner), "it ignores SIGTERM");
        next_exit(&mut rx).await;
        assert!(!pid_alive(inner));
        assert!(stopped.elapsed() >= Duration::from_millis(500), "the exit waits for the tree");
    }

    #[tokio::test]
    async fn logs_are_bounded_and_rotated() {
        let mut cfg = config("rotate");
        cfg.log_limit_bytes = 1000;
        let (b, mut rx) = backend(cfg);
        let line = |i: usize| format!("{i:099}\n");
        // 15 lines of 100 bytes, a pause for a rotation, then a burst of 25 lines.
        let entry = "i=0; while [ $i -lt 15 ]; do printf '%099d\\n' $i; i=$((i+1)); done; sleep 2; \
                     while [ $i -lt 40 ]; do printf '%099d\\n' $i; i=$((i+1)); done";
        b.start(spec("j", entry)).await.expect("start");
        let out = b.paths(&RunId { job: "j".into(), run: 1 }).stdout;
        let old = with_suffix(&out, ".1");
        let size = |p: &Path| fs::metadata(p).map_or(0, |m| m.len());
        for _ in 0..30 {
            if size(&old) > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await; // the truncation follows the rename
        assert_eq!(fs::read_to_string(&old).expect("rotated"), (5..15).map(line).collect::<String>());
        assert_eq!(size(&out), 0);
        next_exit(&mut rx).await;
        assert!(size(&out) <= 1000 && size(&old) <= 1000, "{} {}", size(&out), size(&old));
        assert_eq!(stdout(&b, "j", None).await, (30..40).map(line).collect::<String>());
        assert_eq!(stdout(&b, "j", Some(150)).await, format!("{}{}", &line(38)[50..], line(39)));
    }

    #[tokio::test]
    async fn empty_working_dirs_and_logs_are_reused() {
        // No spares made ahead: the pool holds exactly what ended runs left.
        let (b, mut rx) = backend(LocalConfig { spare_floor: 0, ..config("spares") });
        let run = |job: &str| RunId { job: job.into(), run: 1 };
        let files = |job: &str| {
            let p = b.paths(&run(job));
            [p.work.exists(), p.stdout.exists(), p.stderr.exists()]
        };
        // A run's leftovers are spares soon after its exit is sent.
        let pool = b.spares.clone();
        let spares = |n: (usize, usize)| {
            let pool = pool.clone();
            async move {
                let count = || (lock(&pool.dirs).len(), lock(&pool.files).len());
                let deadline = Instant::now() + Duration::from_secs(5);
                while count() != n && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                count()
            }
        };
        b.start(spec("a", "true")).await.expect("start");
        next_exit(&mut rx).await;
        assert_eq!(spares((1, 2)).await, (1, 2), "a left its dir and both logs empty");
        assert_eq!(files("a"), [true; 3], "spares stay where their run left them until taken");
        b.start(spec("b", "touch kept; ls")).await.expect("start");
        next_exit(&mut rx).await;
        assert_eq!(files("a"), [false; 3], "b took a's dir and logs");
        assert_eq!(stdout(&b, "a", None).await, "", "a log given away reads as empty");
        assert_eq!(stdout(&b, "b", None).await, "kept\n", "the spare dir was empty");
        assert!(b.work_dir(&run("b")).join("kept").exists(), "a working dir with files stays");
        assert_eq!(spares((0, 1)).await, (0, 1), "b's empty stderr is a spare");
        b.start(spec("c", "chmod 700 .")).await.expect("start");
        next_exit(&mut rx).await;
        assert_eq!(spares((0, 2)).await, (0, 2), "a working dir whose mode changed is not a spare");
        b.start(spec("d", "true")).await.expect("start");
        next_exit(&mut rx).await;
        assert_eq!(files("c"), [true, false, false], "d took c's logs, not its dir");
        assert_eq!(spares((1, 2)).await, (1, 2));
        // A log that an escaped process still holds is not given to another run.
        b.start(spec("e", "setsid sleep 2 & sleep 0.5")).await.expect("start");
        next_exit(&mut rx).await;
        tokio::time::sleep(Duration::from_millis(300)).await; // past the recycling's retries
        assert_eq!(spares((0, 0)).await, (0, 0), "e took d's leftovers and left none");
        assert_eq!(files("e"), [true; 3], "held logs and their dir stay");

        // A restart starts without this server's spares, and still takes those an older version
        // left in runs/.spare.
        let old = b.config().data_dir.join("runs/.spare/old");
        fs::create_dir(&old).expect("an old spare dir");
        let (again, mut rx) = backend(b.config().clone());
        assert_eq!((lock(&again.spares.dirs).len(), lock(&again.spares.files).len()), (1, 0));
        again.start(spec("g", "pwd")).await.expect("start");
        next_exit(&mut rx).await;
        assert!(!old.exists(), "g took the old spare dir");
        assert_eq!(again.adopt(spec("g", ""), None).await, Adopted::Ended(Outcome::Exited(0)));
        assert_eq!(again.adopt(spec("d", ""), None).await, Adopted::Ended(Outcome::Exited(0)), "the journal of the first server is read");
    }

    /// Two runs at a time, each start racing the other's end, as in a busy queue: what every
    /// run leaves empty is reused (no spawn makes a log look held elsewhere), so a handful of
    /// directories serves hundreds of runs instead of each making its own.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn spares_keep_up_with_back_to_back_runs() {
        use std::os::unix::fs::MetadataExt;
        let (b, mut rx) = backend(config("churn"));
        let mut dirs = HashSet::new();
        let start = |n: usize| {
            let b = b.clone();
            async move {
                b.start(spec(&format!("j{n}"), "true")).await.expect("start");
                fs::metadata(b.work_dir(&RunId { job: format!("j{n}").into(), run: 1 })).expect("its dir").ino()
            }
        };
        dirs.insert(start(0).await);
        dirs.insert(start(1).await);
        for n in 2..300 {
            next_exit(&mut rx).await;
            dirs.insert(start(n).await);
        }
        // Two runs' own, the spares kept ready, and a little slack for their refills.
        assert!(dirs.len() <= SPARE_FLOOR + 4, "{} working dirs made for 300 runs", dirs.len());
    }

    #[tokio::test]
    async fn adopt_after_a_restart() {
        let cfg = config("adopt");
        let (first, _rx) = backend(cfg.clone());
        let handle = first.start(spec("j", "sleep 1; exit 7")).await.expect("start");
        drop(first);

        let (second, mut rx) = backend(cfg.clone());
        let run = RunId { job: "j".into(), run: 1 };
        assert_eq!(second.adopt(spec("j", ""), Some(handle.clone())).await, Adopted::Running { handle });
        let exit = next_exit(&mut rx).await;
        assert_eq!((exit.run, exit.outcome), (run.clone(), Outcome::Exited(7)));
        assert_eq!(second.adopt(spec("j", ""), None).await, Adopted::Ended(Outcome::Exited(7)));
        assert_eq!(second.adopt(spec("nope", ""), None).await, Adopted::NeverStarted);

        // Lines as a crashed server and its wrappers may have left them: a pid whose process
        // is gone, a code appended before the pid (a fast job), a line cut short.
        let segment = cfg.data_dir.join("runs/journal/99");
        fs::write(&segment, "pid gone-r1 999999999 1\nexit fast-r1 4\npid fast-r1 999999998 1\npid cut-r1 99999").expect("a segment");
        let (third, _rx) = backend(cfg);
        let id = |job: &str| RunId { job: job.into(), run: 1 };
        assert!(matches!(third.adopt(spec("gone", ""), None).await, Adopted::Ended(Outcome::Failed(_))));
        third.stop(id("gone"), "999999999".into()).await.expect("stopping a vanished run");
        assert_eq!(third.adopt(spec("fast", ""), None).await, Adopted::Ended(Outcome::Exited(4)));
        assert_eq!(third.adopt(spec("cut", ""), None).await, Adopted::NeverStarted);
        assert!(third.start(spec("gone", "true")).await.is_err(), "a run with a pid line was started");
    }

    #[test]
    fn a_leader_is_known_by_the_run_key_it_was_started_with() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "unset BERTH_RUN_KEY; sleep 5"])
            .env("BERTH_RUN_KEY", "job-r1")
            .spawn()
            .expect("sh");
        let proc = Proc { pid: child.id() as i32, start: 0 };
        // Until the child has exec'd, /proc shows the environment it was forked with.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while leader_is(proc, "job-r1") != Some(true) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(leader_is(proc, "job-r1"), Some(true), "even after its shell unset the variable");
        assert!(is_alive(proc, "job-r1") && is_ours(proc, "job-r1"));
        assert_eq!(leader_is(proc, "job-r2"), Some(false), "another run's key");
        assert!(!is_alive(proc, "job-r2") && !is_ours(proc, "job-r2"), "a pid reused by another process is not signalled");
        let me = Proc { pid: std::process::id() as i32, start: 0 };
        assert_eq!(leader_is(me, "job-r1"), Some(false), "a process started without the key");
        child.kill().expect("kill");
        child.wait().expect("reaped");
        assert_eq!(leader_is(proc, "job-r1"), None, "gone");
        assert!(!is_alive(proc, "job-r1") && is_ours(proc, "job-r1"), "a gone leader's group may still be the run's");
    }

    #[test]
    fn journal_segments_go_once_none_of_their_runs_is_live() {
        let dir = temp_dir("segments").join("journal");
        let j = Journal::open(dir.clone(), 2);
        let proc = Proc { pid: 999999999, start: 1 };
        for key in ["a-r1", "b-r1", "c-r1", "d-r1", "e-r1"] {
            let seg = j.begin(key).expect("begun");
            j.record_pid(seg, key, proc).expect("recorded");
        }
        let segments = || fs::read_dir(&dir).expect("journal dir").count();
        assert_eq!(segments(), 3, "two runs a segment");
        assert!(j.begin("a-r1").is_none(), "a run starts once");
        assert!(j.has_old_segments());
        j.retain(&HashSet::from(["b-r1".to_string()]));
        assert_eq!(segments(), 2, "the segment of c and d went; a's stays for b");
        assert!(j.lookup("c-r1").is_none() && j.lookup("a-r1").is_some_and(|r| r.pid == Some(proc)));
        j.retain(&HashSet::new());
        assert_eq!(segments(), 1, "the current segment (e) stays");
        assert!(!j.has_old_segments());
        let again = Journal::open(dir.clone(), 2);
        assert!(again.lookup("e-r1").is_some_and(|r| r.pid == Some(proc)), "a new server reads it");
        assert!(again.begin("f-r1").is_some());
    }

    #[tokio::test]
    async fn runs_of_the_old_layout_are_adopted_and_their_logs_read() {
        let cfg = config("legacy");
        let (b, mut rx) = backend(cfg.clone());
        let run = RunId { job: "old".into(), run: 1 };
        let dir = cfg.data_dir.join("runs").join(run.key());
        fs::create_dir_all(dir.join("work")).expect("old run dir");
        fs::write(dir.join("stdout"), "from before\n").expect("old stdout");
        fs::write(dir.join("exit"), "3\n").expect("old exit file");
        fs::write(dir.join("pid"), "999999999 1\n").expect("old pid file");
        assert_eq!(b.adopt(spec("old", ""), None).await, Adopted::Ended(Outcome::Exited(3)));
        assert_eq!(stdout(&b, "old", None).await, "from before\n");

        let mut child = std::process::Command::new("sleep").arg("0.5").spawn().expect("sleep");
        let pid = child.id() as i32;
        let start = read_stat(pid).expect("its stat").start;
        fs::remove_file(dir.join("exit")).expect("no exit yet");
        fs::write(dir.join("pid"), format!("{pid} {start}\n")).expect("old pid file");
        assert_eq!(b.adopt(spec("old", ""), None).await, Adopted::Running { handle: pid.to_string() });
        child.wait().expect("sleep ends");
        let exit = next_exit(&mut rx).await;
        assert!(matches!(exit.outcome, Outcome::Failed(_)), "no exit file: {:?}", exit.outcome);
    }
}
