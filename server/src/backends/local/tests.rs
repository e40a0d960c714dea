//! The local backend against real processes and files.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;

use tokio::sync::mpsc::{self, UnboundedReceiver};

use super::*;
use crate::backends::PackageFile;

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
        timeout_s: 0,
        node: "n".into(),
        flavors: Vec::new(),
        selector_labels: BTreeMap::new(),
        metadata: BTreeMap::new(),
        packages: Vec::new(),
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

#[tokio::test]
async fn a_run_spawned_just_before_the_server_died_is_adopted_not_started_again() {
    // The server was killed between the spawn and the pid line: the journal knows nothing
    // of the run, but its process runs, and will write its code to the segment.
    let cfg = config("unrecorded");
    let journal = cfg.data_dir.join("runs/journal");
    fs::create_dir_all(&journal).expect("journal dir");
    let mut orphan = std::process::Command::new("/bin/sh")
        .args(["-c", WRAPPER])
        .env("BERTH_ENTRYPOINT", "sleep 1; exit 5")
        .env("BERTH_JOURNAL", journal.join("1"))
        .env("BERTH_RUN_KEY", "orphan-r1")
        .process_group(0)
        .spawn()
        .expect("sh");
    // Another server's run (another data dir) is not taken.
    let mut other = std::process::Command::new("/bin/sh")
        .args(["-c", WRAPPER])
        .env("BERTH_ENTRYPOINT", "sleep 5")
        .env("BERTH_JOURNAL", temp_dir("unrecorded-other").join("1"))
        .env("BERTH_RUN_KEY", "other-r1")
        .process_group(0)
        .spawn()
        .expect("sh");

    let (b, mut rx) = backend(cfg);
    let run = RunId { job: "orphan".into(), run: 1 };
    assert!(b.begun_runs().contains(&run), "recovery sees the run as begun");
    assert!(!b.begun_runs().iter().any(|r| &*r.job == "other"), "{:?}", b.begun_runs());
    assert_eq!(b.adopt(spec("orphan", ""), None).await, Adopted::Running { handle: orphan.id().to_string() });
    assert!(b.start(spec("orphan", "true")).await.is_err(), "a run that is running is not started again");
    let exit = next_exit(&mut rx).await;
    assert_eq!((exit.run, exit.outcome), (run, Outcome::Exited(5)));
    orphan.wait().expect("reaped");
    let _ = other.kill();
    let _ = other.wait();
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

#[tokio::test]
async fn a_working_dir_package_is_unpacked_into_the_run_and_py_modules_go_on_the_path() {
    let (b, mut rx) = backend(config("packages"));
    let dir = temp_dir("packages-files");
    let work = dir.join("work.zip");
    fs::write(&work, crate::zipfile::tests::archive(&[("data.txt", b"from the package\n", true), ("run.sh", b"cat data.txt\n", false)])).unwrap();
    let module = dir.join("module.zip");
    fs::write(&module, crate::zipfile::tests::archive(&[("greet/", b"", false), ("greet/__init__.py", b"HELLO = 1\n", false)])).unwrap();
    let mut s = spec("pkg", "./run.sh; echo \"$PYTHONPATH\"; pwd");
    s.working_dir = Some("gcs://_ray_pkg_01.zip".into());
    s.runtime_env.insert("py_modules".into(), serde_json::json!(["gcs://_ray_pkg_02.zip"]));
    s.packages = vec![
        PackageFile { uri: "gcs://_ray_pkg_01.zip".into(), path: work },
        PackageFile { uri: "gcs://_ray_pkg_02.zip".into(), path: module },
    ];
    b.start(s).await.expect("start");
    assert_eq!(next_exit(&mut rx).await.outcome, Outcome::Exited(0));
    let out = stdout(&b, "pkg", None).await;
    let run_dir = b.work_dir(&RunId { job: "pkg".into(), run: 1 });
    let modules = b.runs_dir().join("pkg-r1.py_modules").join("_ray_pkg_02");
    assert_eq!(out, format!("from the package\n{}\n{}\n", modules.display(), run_dir.display()), "{out}");
    assert!(modules.join("greet/__init__.py").is_file());

    // What a plain process cannot give fails the start, naming the key.
    let mut s = spec("pip", "true");
    s.runtime_env.insert("pip".into(), serde_json::json!(["requests"]));
    let err = b.start(s).await.unwrap_err();
    assert!(err.to_string().starts_with("runtime_env.pip:"), "{err}");
}
