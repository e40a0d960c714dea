//! The local backend: each run is a process group on the server's own host.
//!
//! A run is a few entries in `data_dir/runs/`: `{key}.run`, its record, `{key}.stdout` and
//! `{key}.stderr`, and `{key}/`, the default working directory (made only for a run that
//! names none). The record is created before the spawn; the server then appends
//! `pid {pid} {starttime}` (the kernel's start time, so a reused pid is never signalled) and
//! a wrapper shell around the entrypoint appends `exit {code}`. The job writes its logs to
//! those files itself (not through pipes to the server) and its code lands on disk, so a run
//! survives a restart of the server and is adopted after it.
//!
//! Few files, because creating an inode is most of what a start costs (ext4 scans past every
//! recently deleted inode on each create, and a directory costs several times a file). For
//! the same reason a working directory its run left empty is not kept: it moves to
//! `runs/.spare/` (at most [`MAX_SPARES`]) and becomes a later run's, by a rename. Runs of
//! older versions (`runs/{key}/` holding `pid`, `exit`, `stdout`, `stderr` and `work/`) are
//! still adopted and their logs read.
//!
//! Logs are bounded by rotation: every [`POLL`], a file past the limit moves its newest
//! `limit` bytes to `{stream}.1` and starts again empty (the job holds it with `O_APPEND`).
//! A run ends when its entrypoint does; whatever it left in its process group is stopped
//! before the [`Exit`] is sent, so the capacity it held is really free.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

use super::backend::{Adopted, Backend, BackendError, BoxFuture, Exit, Outcome, RunId, StartSpec, Stream};
use crate::engine::{Labels, Milli, Node, Resources};

/// How often logs are checked against their bound and an adopted run is looked at.
pub const POLL: Duration = Duration::from_millis(200);

/// Longest wait for a process group to vanish after SIGKILL (a process in `D` state can lag).
const KILL_WAIT: Duration = Duration::from_secs(2);

/// Most empty working directories kept for reuse.
pub const MAX_SPARES: usize = 64;

/// Runs the entrypoint in a subshell (so `exit 3` or `exec` in it still lets the code be
/// recorded; a fork, not another exec of the shell), then appends the code to the run's
/// record. The entrypoint comes in the environment, so it needs no quoting.
const WRAPPER: &str = r#"__berth_e=$BERTH_ENTRYPOINT __berth_f=$BERTH_RECORD
unset BERTH_ENTRYPOINT BERTH_RECORD
(eval "$__berth_e")
__berth_code=$?
echo "exit $__berth_code" >> "$__berth_f"
exit "$__berth_code""#;

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

/// The leader of a run's process group, as the pid file records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Proc {
    pid: i32,
    /// Field 22 of `/proc/{pid}/stat`: tells this process from a later one with its pid.
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
}

impl LocalBackend {
    /// A backend sending each run's end to `exits`; a relative `data_dir` is made absolute.
    pub fn new(mut cfg: LocalConfig, exits: UnboundedSender<Exit>) -> Arc<LocalBackend> {
        if let Ok(abs) = std::path::absolute(&cfg.data_dir) {
            cfg.data_dir = abs;
        }
        let spares = Arc::new(Spares::open(cfg.data_dir.join("runs").join(".spare")));
        Arc::new(LocalBackend { cfg, exits, live: Arc::default(), spares })
    }

    pub fn config(&self) -> &LocalConfig {
        &self.cfg
    }

    /// Where a run's files are (the current layout; [`Paths::find`] also knows the old one).
    fn paths(&self, run: &RunId) -> Paths {
        Paths::new(&self.cfg.data_dir.join("runs"), &run.key())
    }

    /// The default working directory of a run: `data_dir/runs/{key}`.
    pub fn work_dir(&self, run: &RunId) -> PathBuf {
        self.paths(run).work
    }

    fn start_run(&self, spec: StartSpec) -> Result<String, BackendError> {
        let key = spec.run.key();
        let fail = |what: &str, e: io::Error| BackendError::Failed(format!("run {key}: {what}: {e}"));
        let paths = self.paths(&spec.run);
        let work = match &spec.working_dir {
            Some(d) if Path::new(d).is_dir() => Some(PathBuf::from(d)),
            Some(d) => return Err(BackendError::Failed(format!("working_dir `{d}` does not exist or is not a directory"))),
            None => None,
        };
        let mut record = match OpenOptions::new().append(true).create_new(true).open(&paths.record) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir_all(paths.record.parent().unwrap_or(Path::new("."))).map_err(|e| fail("creating the runs directory", e))?;
                OpenOptions::new().append(true).create_new(true).open(&paths.record).map_err(|e| fail("creating its record", e))?
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                // A record without a pid line: the server stopped before it spawned the process.
                let record = read_record(&paths.record);
                if record.pid.is_some() || record.exit.is_some() {
                    return Err(BackendError::Failed(format!("run {key} was already started")));
                }
                for stream in [Stream::Stdout, Stream::Stderr] {
                    let _ = fs::remove_file(paths.log(stream));
                    let _ = fs::remove_file(with_suffix(&paths.log(stream), ".1"));
                }
                OpenOptions::new().append(true).open(&paths.record).map_err(|e| fail("opening its record", e))?
            }
            Err(e) => return Err(fail("creating its record", e)),
        };
        let work = match work {
            Some(w) => w,
            None => {
                if !self.spares.take(&paths.work) {
                    fs::create_dir_all(&paths.work).map_err(|e| fail(&format!("creating {}", paths.work.display()), e))?;
                }
                paths.work.clone()
            }
        };
        let stdout = open_log(&paths.log(Stream::Stdout)).map_err(|e| fail("opening stdout", e))?;
        let stderr = open_log(&paths.log(Stream::Stderr)).map_err(|e| fail("opening stderr", e))?;

        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(WRAPPER)
            .current_dir(&work)
            .envs(&spec.env_vars)
            .env("BERTH_JOB_ID", &*spec.run.job)
            .env("BERTH_RUN", spec.run.run.to_string())
            .env("BERTH_ENTRYPOINT", &spec.entrypoint)
            .env("BERTH_RECORD", &paths.record)
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(stderr))
            .process_group(0);
        let child = cmd.spawn().map_err(|e| fail("starting /bin/sh", e))?;
        let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) else {
            return Err(BackendError::Failed(format!("run {key}: the process ended before it could be recorded")));
        };
        // The child is not reaped before `wait`, so its stat is readable even if it already
        // exited. One short append: a reader sees the whole line or none of it.
        let recorded = read_stat(pid)
            .ok_or_else(|| io::Error::other(format!("/proc/{pid}/stat is unreadable")))
            .and_then(|stat| record.write_all(format!("pid {pid} {}\n", stat.start).as_bytes()).map(|()| stat.start));
        let start = match recorded {
            Ok(start) => start,
            Err(e) => {
                let _ = signal_group(pid, libc::SIGKILL);
                return Err(fail("recording the pid", e));
            }
        };
        let proc = Proc { pid, start };
        self.lock_live().insert(spec.run.clone(), proc);
        tokio::spawn(self.watch(spec.run, paths, proc).run(Some(child)));
        Ok(pid.to_string())
    }

    fn stop_run(&self, run: &RunId) -> Result<(), BackendError> {
        let known = self.lock_live().get(run).copied();
        let Some(proc) = known.or_else(|| Paths::find(&self.cfg.data_dir.join("runs"), run).and_then(|p| p.read().pid)) else {
            return Ok(()); // never started: nothing to stop
        };
        if !is_ours(proc) {
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
            if is_ours(proc) {
                let _ = signal_group(proc.pid, libc::SIGKILL);
            }
        });
        Ok(())
    }

    fn adopt_run(&self, run: RunId) -> Adopted {
        let Some(paths) = Paths::find(&self.cfg.data_dir.join("runs"), &run) else {
            return Adopted::NeverStarted;
        };
        let record = paths.read();
        if let Some(code) = record.exit {
            return Adopted::Ended(Outcome::Exited(code));
        }
        let Some(proc) = record.pid else {
            return Adopted::NeverStarted; // the server died before it spawned the process
        };
        if is_alive(proc) {
            let handle = proc.pid.to_string();
            let new = self.lock_live().insert(run.clone(), proc).is_none();
            if new {
                tokio::spawn(self.watch(run, paths, proc).run(None));
            }
            return Adopted::Running { handle };
        }
        // It may have ended between the two reads.
        match paths.read().exit {
            Some(code) => Adopted::Ended(Outcome::Exited(code)),
            None => Adopted::Ended(Outcome::Failed("process is gone and left no exit code".into())),
        }
    }

    fn watch(&self, run: RunId, paths: Paths, proc: Proc) -> Watch {
        Watch {
            paths,
            run,
            proc,
            grace: self.cfg.kill_grace,
            log_limit: self.cfg.log_limit_bytes,
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
        }]
    }

    fn start(&self, spec: StartSpec) -> BoxFuture<'_, Result<String, BackendError>> {
        Box::pin(async move { self.start_run(spec) })
    }

    /// The pid file, not the handle, names the process: it carries the start time.
    fn stop(&self, run: RunId, _handle: String) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move { self.stop_run(&run) })
    }

    fn adopt(&self, run: RunId, _handle: Option<String>) -> BoxFuture<'_, Adopted> {
        Box::pin(async move { self.adopt_run(run) })
    }

    /// `None` reads the last `log_limit_bytes`, from `.1` too when the current file is shorter.
    fn logs(&self, run: RunId, stream: Stream, tail_bytes: Option<u64>) -> BoxFuture<'_, Result<Vec<u8>, BackendError>> {
        let runs = self.cfg.data_dir.join("runs");
        let want = tail_bytes.unwrap_or(self.cfg.log_limit_bytes);
        Box::pin(async move {
            let Some(paths) = Paths::find(&runs, &run) else {
                let record = Paths::new(&runs, &run.key()).record;
                return Err(BackendError::Failed(format!("run {} has no logs here ({} does not exist)", run.key(), record.display())));
            };
            let read = tokio::task::spawn_blocking(move || read_log(&paths.log(stream), want)).await;
            read.map_err(io::Error::other).and_then(|r| r).map_err(|e| BackendError::Failed(format!("reading the log of run {}: {e}", run.key())))
        })
    }
}

/// One watched run: its own task rotates the logs, waits for the end and sends the [`Exit`].
struct Watch {
    run: RunId,
    proc: Proc,
    paths: Paths,
    grace: Duration,
    log_limit: u64,
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
                if !is_alive(self.proc) {
                    break match self.paths.read().exit {
                        Some(code) => Outcome::Exited(code),
                        None => Outcome::Failed("process ended without recording an exit code (killed by a signal?)".into()),
                    };
                }
            },
        };
        end_group(self.proc, self.grace).await;
        self.bound_logs().await;
        // Nothing of the run is left to write into its working directory.
        if self.paths.exit_file.is_none() && !group_exists(self.proc.pid) {
            self.spares.recycle(&self.paths.work);
        }
        self.live.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.run);
        let _ = self.exits.send(Exit { run: self.run, outcome });
    }

    /// Two stats; only a log past its bound goes to the blocking pool to be rotated.
    async fn bound_logs(&self) {
        let limit = self.log_limit.max(1);
        for stream in [Stream::Stdout, Stream::Stderr] {
            let path = self.paths.log(stream);
            if fs::metadata(&path).is_ok_and(|m| m.len() <= limit) {
                continue;
            }
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

/// Empty working directories of ended runs, each to become a new run's by a rename: making
/// a directory is the dearest part of a start (see the module doc).
#[derive(Debug)]
struct Spares {
    dir: PathBuf,
    /// Mode, owner and group of a directory made here: a spare that differs (a job chmod-ed
    /// its working directory) is not handed to another run.
    made: Option<(u32, u32, u32)>,
    free: Mutex<Vec<PathBuf>>,
    /// Names spares: this server's start time, then a count.
    stamp: u128,
    count: std::sync::atomic::AtomicU64,
}

impl Spares {
    /// `dir` and the empty directories already in it (from before a restart).
    fn open(dir: PathBuf) -> Spares {
        let _ = fs::create_dir_all(&dir);
        let made = fs::metadata(&dir).ok().map(|m| dir_identity(&m));
        let mut free: Vec<PathBuf> = fs::read_dir(&dir).into_iter().flatten().flatten().map(|e| e.path()).filter(|p| is_empty_dir(p)).collect();
        free.truncate(MAX_SPARES);
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        Spares { dir, made, free: Mutex::new(free), stamp, count: Default::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<PathBuf>> {
        self.free.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves a spare to `to`; false when there is none (or none that is still empty).
    fn take(&self, to: &Path) -> bool {
        while let Some(spare) = self.lock().pop() {
            if is_empty_dir(&spare) && fs::rename(&spare, to).is_ok() {
                return true;
            }
        }
        false
    }

    /// Keeps `work` as a spare if it is an empty directory as this backend makes them.
    fn recycle(&self, work: &Path) {
        if self.made.is_none() || self.lock().len() >= MAX_SPARES {
            return;
        }
        let same = fs::symlink_metadata(work).is_ok_and(|m| m.is_dir() && Some(dir_identity(&m)) == self.made);
        if !same || !is_empty_dir(work) {
            return;
        }
        let n = self.count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let spare = self.dir.join(format!("{}-{n}", self.stamp));
        if fs::rename(work, &spare).is_ok() {
            self.lock().push(spare);
        }
    }
}

fn dir_identity(m: &fs::Metadata) -> (u32, u32, u32) {
    use std::os::unix::fs::MetadataExt;
    (m.mode(), m.uid(), m.gid())
}

fn is_empty_dir(path: &Path) -> bool {
    fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_none())
}

/// Stops what a run left in its group after its leader ended: SIGTERM, SIGKILL after `grace`.
async fn end_group(proc: Proc, grace: Duration) {
    if !is_ours(proc) || !group_exists(proc.pid) || signal_group(proc.pid, libc::SIGTERM).is_err() {
        return;
    }
    for (sig, wait) in [(None, grace), (Some(libc::SIGKILL), KILL_WAIT)] {
        if let Some(sig) = sig {
            if !is_ours(proc) || signal_group(proc.pid, sig).is_err() {
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
    /// The record: `pid …` then `exit …` lines (the old layout: the `pid` file).
    record: PathBuf,
    /// The old layout's `exit` file; `None` in the current one (the record holds the code).
    exit_file: Option<PathBuf>,
    stdout: PathBuf,
    stderr: PathBuf,
    /// The default working directory.
    work: PathBuf,
}

impl Paths {
    /// The current layout: `runs/{key}.run`, `.stdout`, `.stderr` and `runs/{key}/`.
    fn new(runs: &Path, key: &str) -> Paths {
        Paths {
            record: runs.join(format!("{key}.run")),
            exit_file: None,
            stdout: runs.join(format!("{key}.stdout")),
            stderr: runs.join(format!("{key}.stderr")),
            work: runs.join(key),
        }
    }

    /// The paths of a run that was started here, in whichever layout it was; `None` when
    /// it has no record.
    fn find(runs: &Path, run: &RunId) -> Option<Paths> {
        let key = run.key();
        let current = Paths::new(runs, &key);
        if current.record.exists() {
            return Some(current);
        }
        let dir = runs.join(&key);
        dir.join("pid").exists().then(|| Paths {
            record: dir.join("pid"),
            exit_file: Some(dir.join("exit")),
            stdout: dir.join("stdout"),
            stderr: dir.join("stderr"),
            work: dir.join("work"),
        })
    }

    fn log(&self, stream: Stream) -> PathBuf {
        match stream {
            Stream::Stdout => self.stdout.clone(),
            Stream::Stderr => self.stderr.clone(),
        }
    }

    fn read(&self) -> Record {
        let mut record = read_record(&self.record);
        if let Some(f) = &self.exit_file {
            record.exit = fs::read_to_string(f).ok().and_then(|s| s.trim().parse().ok());
        }
        record
    }
}

/// The working directory the local backend gave a run that named none (`data_dir` is the
/// server's, as [`LocalConfig::data_dir`]).
pub fn default_work_dir(data_dir: &Path, run: &RunId) -> PathBuf {
    let runs = data_dir.join("runs");
    Paths::find(&runs, run).unwrap_or_else(|| Paths::new(&runs, &run.key())).work
}

/// What a run's record says so far.
#[derive(Debug, Default)]
struct Record {
    pid: Option<Proc>,
    exit: Option<i32>,
}

/// Parses `pid {pid} {start}` and `exit {code}` lines in any order (a fast job's wrapper can
/// append its code before the server appends the pid); the old layout's pid file is the
/// bare `{pid} {start}`. A missing file or a half-written line says nothing.
fn read_record(path: &Path) -> Record {
    let mut record = Record::default();
    let Ok(text) = fs::read_to_string(path) else { return record };
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let first = words.next();
        let (pid, start) = match first {
            Some("exit") => {
                record.exit = words.next().and_then(|c| c.parse().ok()).or(record.exit);
                continue;
            }
            Some("pid") => (words.next(), words.next()),
            other => (other, words.next()),
        };
        if let (Some(Ok(pid)), Some(Ok(start))) = (pid.map(str::parse), start.map(str::parse)) {
            record.pid = Some(Proc { pid, start });
        }
    }
    record
}

/// `path` with `suffix` appended to its file name.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// A log file, opened for appending so it can be truncated under the writer. The run's
/// record was just created, so the log is new (or left empty by a start that never spawned).
fn open_log(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
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

/// The run's leader itself is still running.
fn is_alive(proc: Proc) -> bool {
    read_stat(proc.pid).is_some_and(|s| s.start == proc.start && !matches!(s.state, 'Z' | 'X' | 'x'))
}

/// The group with the leader's pid can only be the run's: the leader is that process, or it is
/// gone (the kernel does not hand out a pid still used as a group id). A pid now held by
/// another process means the group died long ago.
fn is_ours(proc: Proc) -> bool {
    read_stat(proc.pid).is_none_or(|s| s.start == proc.start)
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
            assert_eq!(b.paths(&run).read().exit, Some(code));
            b.stop(run.clone(), handle).await.expect("stopping a finished run");
            assert!(b.start(spec(job, entry)).await.is_err(), "a run starts once");
        }
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
        assert!(b.logs(RunId { job: "nope".into(), run: 1 }, Stream::Stdout, None).await.is_err());
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
    async fn empty_working_dirs_are_reused() {
        let (b, mut rx) = backend(config("spares"));
        let spare_dir = b.config().data_dir.join("runs/.spare");
        let spares = || fs::read_dir(&spare_dir).expect("spare dir").count();
        let run = |job: &str| RunId { job: job.into(), run: 1 };
        b.start(spec("a", "true")).await.expect("start");
        next_exit(&mut rx).await;
        assert!(!b.work_dir(&run("a")).exists(), "an empty working dir is kept as a spare");
        assert_eq!(spares(), 1);
        b.start(spec("b", "touch kept; ls")).await.expect("start");
        next_exit(&mut rx).await;
        assert_eq!(spares(), 0, "b took the spare");
        assert_eq!(stdout(&b, "b", None).await, "kept\n", "the spare was empty");
        assert!(b.work_dir(&run("b")).join("kept").exists(), "a working dir with files stays");
        b.start(spec("c", "chmod 700 .")).await.expect("start");
        next_exit(&mut rx).await;
        assert!(b.work_dir(&run("c")).exists(), "a working dir whose mode changed stays");
        assert_eq!(spares(), 0);

        // A restart finds the spares left before it.
        b.start(spec("d", "true")).await.expect("start");
        next_exit(&mut rx).await;
        let (again, mut rx) = backend(b.config().clone());
        again.start(spec("e", "pwd")).await.expect("start");
        next_exit(&mut rx).await;
        assert_eq!(spares(), 1, "e's dir, left empty, replaced d's");
        assert_eq!(b.adopt(run("e"), None).await, Adopted::Ended(Outcome::Exited(0)));
    }

    #[tokio::test]
    async fn adopt_after_a_restart() {
        let cfg = config("adopt");
        let (first, _rx) = backend(cfg.clone());
        let handle = first.start(spec("j", "sleep 1; exit 7")).await.expect("start");
        drop(first);

        let (second, mut rx) = backend(cfg);
        let run = RunId { job: "j".into(), run: 1 };
        assert_eq!(second.adopt(run.clone(), Some(handle.clone())).await, Adopted::Running { handle });
        let exit = next_exit(&mut rx).await;
        assert_eq!((exit.run, exit.outcome), (run.clone(), Outcome::Exited(7)));
        assert_eq!(second.adopt(run, None).await, Adopted::Ended(Outcome::Exited(7)));
        assert_eq!(second.adopt(RunId { job: "nope".into(), run: 1 }, None).await, Adopted::NeverStarted);

        let gone = RunId { job: "gone".into(), run: 1 };
        let record = second.paths(&gone).record;
        fs::write(&record, "").expect("a record without a pid");
        assert_eq!(second.adopt(gone.clone(), None).await, Adopted::NeverStarted);
        fs::write(&record, "pid 999999999 1\n").expect("a record");
        assert!(matches!(second.adopt(gone.clone(), None).await, Adopted::Ended(Outcome::Failed(_))));
        second.stop(gone.clone(), "999999999".into()).await.expect("stopping a vanished run");
        // The wrapper may append the code before the server appends the pid.
        fs::write(&record, "exit 4\npid 999999999 1\n").expect("a record");
        assert_eq!(second.adopt(gone, None).await, Adopted::Ended(Outcome::Exited(4)));
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
        assert_eq!(b.adopt(run.clone(), None).await, Adopted::Ended(Outcome::Exited(3)));
        assert_eq!(stdout(&b, "old", None).await, "from before\n");

        let mut child = std::process::Command::new("sleep").arg("0.5").spawn().expect("sleep");
        let pid = child.id() as i32;
        let start = read_stat(pid).expect("its stat").start;
        fs::remove_file(dir.join("exit")).expect("no exit yet");
        fs::write(dir.join("pid"), format!("{pid} {start}\n")).expect("old pid file");
        assert_eq!(b.adopt(run.clone(), None).await, Adopted::Running { handle: pid.to_string() });
        child.wait().expect("sleep ends");
        let exit = next_exit(&mut rx).await;
        assert!(matches!(exit.outcome, Outcome::Failed(_)), "no exit file: {:?}", exit.outcome);
    }
}
