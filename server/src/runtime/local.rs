//! The local backend: each run is a process group on the server's own host.
//!
//! A run lives in `data_dir/runs/{key}/`: `stdout` and `stderr`, `pid` (`{pid} {starttime}`,
//! the kernel's start time, so a reused pid is never signalled), `work/` (the default working
//! directory) and `exit`, which a wrapper shell around the entrypoint writes. The job writes
//! its logs to those files itself (not through pipes to the server) and its code lands on
//! disk, so a run survives a restart of the server and is adopted after it.
//!
//! Logs are bounded by rotation: every [`POLL`], a file past the limit moves its newest
//! `limit` bytes to `{stream}.1` and starts again empty (the job holds it with `O_APPEND`).
//! A run ends when its entrypoint does; whatever it left in its process group is stopped
//! before the [`Exit`] is sent, so the capacity it held is really free.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
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

/// Runs the entrypoint in a subshell (so `exit 3` in it is the run's code; a fork, not
/// another exec of the shell), then records the code. The entrypoint comes in the
/// environment, so it needs no quoting.
const WRAPPER: &str = r#"__berth_e=$BERTH_ENTRYPOINT __berth_f=$BERTH_EXIT_FILE
unset BERTH_ENTRYPOINT BERTH_EXIT_FILE
(eval "$__berth_e")
__berth_code=$?
echo "$__berth_code" > "$__berth_f"
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
    /// A run's working dir must lie inside one of these (any, when empty).
    pub workdir_roots: Vec<PathBuf>,
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
}

impl LocalBackend {
    /// A backend sending each run's end to `exits`; a relative `data_dir` is made absolute.
    pub fn new(mut cfg: LocalConfig, exits: UnboundedSender<Exit>) -> Arc<LocalBackend> {
        if let Ok(abs) = std::path::absolute(&cfg.data_dir) {
            cfg.data_dir = abs;
        }
        Arc::new(LocalBackend { cfg, exits, live: Arc::default() })
    }

    pub fn config(&self) -> &LocalConfig {
        &self.cfg
    }

    /// `data_dir/runs/{key}`.
    pub fn run_dir(&self, run: &RunId) -> PathBuf {
        self.cfg.data_dir.join("runs").join(run.key())
    }

    fn start_run(&self, spec: StartSpec) -> Result<String, BackendError> {
        let key = spec.run.key();
        let fail = |what: &str, e: io::Error| BackendError::Failed(format!("run {key}: {what}: {e}"));
        let dir = self.run_dir(&spec.run);
        if dir.join("pid").exists() {
            return Err(BackendError::Failed(format!("run {key} was already started")));
        }
        fs::create_dir_all(&dir).map_err(|e| fail(&format!("creating {}", dir.display()), e))?;
        if let Some(d) = &spec.working_dir {
            super::request::workdir_allowed(&self.cfg.workdir_roots, d).map_err(BackendError::Failed)?;
        }
        let work = match &spec.working_dir {
            Some(d) if Path::new(d).is_dir() => PathBuf::from(d),
            Some(d) => return Err(BackendError::Failed(format!("working_dir `{d}` does not exist or is not a directory"))),
            None => {
                let w = dir.join("work");
                fs::create_dir_all(&w).map_err(|e| fail(&format!("creating {}", w.display()), e))?;
                w
            }
        };
        let stdout = open_log(&dir.join(stream_file(Stream::Stdout))).map_err(|e| fail("opening stdout", e))?;
        let stderr = open_log(&dir.join(stream_file(Stream::Stderr))).map_err(|e| fail("opening stderr", e))?;

        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(WRAPPER)
            .current_dir(&work)
            .envs(&spec.env_vars)
            .env("BERTH_JOB_ID", &*spec.run.job)
            .env("BERTH_RUN", spec.run.run.to_string())
            .env("BERTH_ENTRYPOINT", &spec.entrypoint)
            .env("BERTH_EXIT_FILE", dir.join("exit"))
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(stderr))
            .process_group(0);
        let child = cmd.spawn().map_err(|e| fail("starting /bin/sh", e))?;
        let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) else {
            return Err(BackendError::Failed(format!("run {key}: the process ended before it could be recorded")));
        };
        // The child is not reaped before `wait`, so its stat is readable even if it already exited.
        let recorded = read_stat(pid)
            .ok_or_else(|| io::Error::other(format!("/proc/{pid}/stat is unreadable")))
            .and_then(|stat| write_pid_file(&dir, Proc { pid, start: stat.start }).map(|()| stat.start));
        let start = match recorded {
            Ok(start) => start,
            Err(e) => {
                let _ = signal_group(pid, libc::SIGKILL);
                return Err(fail("recording the pid", e));
            }
        };
        let proc = Proc { pid, start };
        self.lock_live().insert(spec.run.clone(), proc);
        tokio::spawn(self.watch(spec.run, proc).run(Some(child)));
        Ok(pid.to_string())
    }

    fn stop_run(&self, run: &RunId) -> Result<(), BackendError> {
        let known = self.lock_live().get(run).copied();
        let Some(proc) = known.or_else(|| read_pid_file(&self.run_dir(run))) else {
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
        let dir = self.run_dir(&run);
        if !dir.is_dir() {
            return Adopted::NeverStarted;
        }
        if let Some(code) = read_exit(&dir) {
            return Adopted::Ended(Outcome::Exited(code));
        }
        let Some(proc) = read_pid_file(&dir) else {
            return Adopted::NeverStarted; // the server died before it spawned the process
        };
        if is_alive(proc) {
            let handle = proc.pid.to_string();
            let new = self.lock_live().insert(run.clone(), proc).is_none();
            if new {
                tokio::spawn(self.watch(run, proc).run(None));
            }
            return Adopted::Running { handle };
        }
        // It may have ended between the two reads.
        match read_exit(&dir) {
            Some(code) => Adopted::Ended(Outcome::Exited(code)),
            None => Adopted::Ended(Outcome::Failed("process is gone and left no exit code".into())),
        }
    }

    fn watch(&self, run: RunId, proc: Proc) -> Watch {
        Watch {
            dir: self.run_dir(&run),
            run,
            proc,
            grace: self.cfg.kill_grace,
            log_limit: self.cfg.log_limit_bytes,
            exits: self.exits.clone(),
            live: self.live.clone(),
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

    /// The pid file, not the handle, names the process: it carries the start time.
    fn stop(&self, run: RunId, _handle: String) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move { self.stop_run(&run) })
    }

    fn adopt(&self, spec: StartSpec, _handle: Option<String>) -> BoxFuture<'_, Adopted> {
        let run = spec.run;
        Box::pin(async move { self.adopt_run(run) })
    }

    /// `None` reads the last `log_limit_bytes`, from `.1` too when the current file is shorter.
    fn logs(&self, run: RunId, stream: Stream, tail_bytes: Option<u64>) -> BoxFuture<'_, Result<Vec<u8>, BackendError>> {
        let dir = self.run_dir(&run);
        let want = tail_bytes.unwrap_or(self.cfg.log_limit_bytes);
        Box::pin(async move {
            if !dir.is_dir() {
                return Err(BackendError::Failed(format!("run {} has no logs here ({} does not exist)", run.key(), dir.display())));
            }
            let read = tokio::task::spawn_blocking(move || read_log(&dir.join(stream_file(stream)), want)).await;
            read.map_err(io::Error::other).and_then(|r| r).map_err(|e| BackendError::Failed(format!("reading the log of run {}: {e}", run.key())))
        })
    }
}

/// One watched run: its own task rotates the logs, waits for the end and sends the [`Exit`].
struct Watch {
    run: RunId,
    proc: Proc,
    dir: PathBuf,
    grace: Duration,
    log_limit: u64,
    exits: UnboundedSender<Exit>,
    live: Arc<Mutex<HashMap<RunId, Proc>>>,
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
                    break match read_exit(&self.dir) {
                        Some(code) => Outcome::Exited(code),
                        None => Outcome::Failed("process ended without recording an exit code (killed by a signal?)".into()),
                    };
                }
            },
        };
        end_group(self.proc, self.grace).await;
        self.bound_logs().await;
        self.live.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.run);
        let _ = self.exits.send(Exit { run: self.run, outcome });
    }

    async fn bound_logs(&self) {
        let (dir, limit) = (self.dir.clone(), self.log_limit);
        let done = tokio::task::spawn_blocking(move || {
            for stream in [Stream::Stdout, Stream::Stderr] {
                let path = dir.join(stream_file(stream));
                if let Err(e) = rotate(&path, limit) {
                    tracing::warn!(log = %path.display(), error = %e, "log rotation failed");
                }
            }
        });
        let _ = done.await;
    }
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

fn stream_file(stream: Stream) -> &'static str {
    match stream {
        Stream::Stdout => "stdout",
        Stream::Stderr => "stderr",
    }
}

/// `path` with `suffix` appended to its file name.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// A fresh log file, opened for appending so it can be truncated under the writer.
fn open_log(path: &Path) -> io::Result<File> {
    let _ = fs::remove_file(path);
    let _ = fs::remove_file(with_suffix(path, ".1"));
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

/// Written to a temporary name first, so a reader never sees half of it.
fn write_pid_file(dir: &Path, proc: Proc) -> io::Result<()> {
    let tmp = dir.join("pid.tmp");
    fs::write(&tmp, format!("{} {}\n", proc.pid, proc.start))?;
    fs::rename(&tmp, dir.join("pid"))
}

fn read_pid_file(dir: &Path) -> Option<Proc> {
    let text = fs::read_to_string(dir.join("pid")).ok()?;
    let mut parts = text.split_whitespace();
    let pid = parts.next()?.parse().ok()?;
    let start = parts.next()?.parse().ok()?;
    Some(Proc { pid, start })
}

/// The wrapper's record of the entrypoint's code; `None` while absent or half written.
fn read_exit(dir: &Path) -> Option<i32> {
    fs::read_to_string(dir.join("exit")).ok()?.trim().parse().ok()
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
            assert_eq!(read_exit(&b.run_dir(&run)), Some(code));
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
        let own = fs::canonicalize(b.run_dir(&RunId { job: "k".into(), run: 1 }).join("work")).expect("own work dir");
        assert_eq!(stdout(&b, "k", None).await, format!("{}\n", own.display()));

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
        let child = pid_in(&b.run_dir(&run).join("work/child.pid")).await;
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
        let inner = pid_in(&b.run_dir(&run).join("work/inner.pid")).await;
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
        let dir = b.run_dir(&RunId { job: "j".into(), run: 1 });
        let (out, old) = (dir.join("stdout"), dir.join("stdout.1"));
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
    async fn adopt_after_a_restart() {
        let cfg = config("adopt");
        let (first, _rx) = backend(cfg.clone());
        let handle = first.start(spec("j", "sleep 1; exit 7")).await.expect("start");
        drop(first);

        let (second, mut rx) = backend(cfg);
        let run = RunId { job: "j".into(), run: 1 };
        assert_eq!(second.adopt(spec("j", ""), Some(handle.clone())).await, Adopted::Running { handle });
        let exit = next_exit(&mut rx).await;
        assert_eq!((exit.run, exit.outcome), (run.clone(), Outcome::Exited(7)));
        assert_eq!(second.adopt(spec("j", ""), None).await, Adopted::Ended(Outcome::Exited(7)));
        assert_eq!(second.adopt(spec("nope", ""), None).await, Adopted::NeverStarted);

        let gone = RunId { job: "gone".into(), run: 1 };
        fs::create_dir_all(second.run_dir(&gone)).expect("run dir");
        assert_eq!(second.adopt(spec("gone", ""), None).await, Adopted::NeverStarted);
        fs::write(second.run_dir(&gone).join("pid"), "999999999 1\n").expect("pid file");
        assert!(matches!(second.adopt(spec("gone", ""), None).await, Adopted::Ended(Outcome::Failed(_))));
        second.stop(gone, "999999999".into()).await.expect("stopping a vanished run");
    }
}
