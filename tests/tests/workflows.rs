//! Job workflows as a user of sbatch or `ray job submit` expects them, through the real
//! `berth` CLI against a real server (SQLite and PostgreSQL): `submit --wait` with exit
//! codes, the current directory as the working directory, `logs -f` with both streams,
//! exit codes in `jobs list`, negative numbers on the command line.

mod common;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::berth::{berth_bin, Berth};
use common::Backend;

const SECS: fn(u64) -> Duration = Duration::from_secs;

/// Runs `berth ARGS` against `b` from directory `cwd`, as a user in a shell would.
async fn cli(b: &Berth, cwd: &Path, args: &[&str]) -> Output {
    let run = tokio::process::Command::new(berth_bin()).args(["--server", &b.url]).args(args).current_dir(cwd).output();
    tokio::time::timeout(SECS(60), run).await.expect("the CLI ends within 60 s").unwrap()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fresh directory inside the test's own, to submit from.
fn workdir(b: &Berth, name: &str) -> std::path::PathBuf {
    let dir = b.dir.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn wait_and_exit_codes(backend: Backend) {
    let b = Berth::start(backend, &[]).await;
    let here = workdir(&b, "project");
    std::fs::write(here.join("train.py"), "print('training')\n").unwrap();

    // Succeeded: the output, from the current directory (where train.py is), exit 0.
    let o = cli(&b, &here, &["jobs", "submit", "--wait", "--", "sh", "-c", "cat train.py; pwd"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(out(&o), format!("print('training')\n{}\n", here.display()));
    assert!(err(&o).contains(&format!("runs in {} (the current directory", here.display())), "{}", err(&o));

    // Failed: the job's own code, both streams (stderr marked), one line saying why.
    let o = cli(&b, &here, &["jobs", "submit", "--wait", "--", "echo working; echo broken >&2; exit 3"]).await;
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    assert_eq!(out(&o), "working\n[stderr] broken\n");
    assert!(err(&o).lines().last().unwrap().contains("failed: exited with code 3"), "{}", err(&o));

    // Timed out: 124.
    let o = cli(&b, &here, &["jobs", "submit", "--wait", "--timeout", "1", "--", "sleep 30"]).await;
    assert_eq!(o.status.code(), Some(124), "{}", err(&o));
    assert!(err(&o).contains("timed out after 1 s"), "{}", err(&o));

    // Rejected at submit (more CPUs than any node has): 65, with the reason.
    let o = cli(&b, &here, &["jobs", "submit", "--wait", "--cpu", "100000", "--", "true"]).await;
    assert_eq!(o.status.code(), Some(65), "{}", err(&o));
    assert!(err(&o).contains("error:"), "{}", err(&o));

    // Cancelled while waited for: 130.
    let waiting = tokio::process::Command::new(berth_bin())
        .args(["--server", &b.url, "jobs", "submit", "--wait", "--name", "to-cancel", "--", "echo started; sleep 60"])
        .current_dir(&here)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let id = common::wait_until("the job to start", SECS(30), async || {
        let (_, page) = b.get("/api/v1/jobs?q=to-cancel&state=running").await;
        page["jobs"][0]["id"].as_str().map(str::to_string).ok_or_else(|| page.to_string())
    })
    .await;
    let o = cli(&b, &here, &["jobs", "cancel", &id]).await;
    assert!(o.status.success(), "{}", err(&o));
    let o = tokio::time::timeout(SECS(30), waiting.wait_with_output()).await.expect("--wait returns once cancelled").unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", err(&o));
    assert!(out(&o).starts_with("started\n"), "{}", out(&o));
    assert!(err(&o).contains("was cancelled"), "{}", err(&o));

    // `jobs list` shows each job's exit code.
    let o = cli(&b, &here, &["jobs", "list"]).await;
    let text = out(&o);
    assert!(text.lines().next().unwrap().contains("EXIT"), "{text}");
    assert!(text.lines().any(|l| l.contains("failed") && l.split_whitespace().any(|w| w == "3")), "{text}");
}

on_both_databases!(wait_and_exit_codes);

/// `logs -f` of a failing job: both streams, then the job's code; `--stdout` / `--stderr`
/// pick one; `--fresh-workdir` runs elsewhere than the current directory.
#[tokio::test]
async fn logs_follow_a_failing_job() {
    let b = Berth::start(Backend::Sqlite, &[]).await;
    let here = workdir(&b, "logs");
    let o = cli(&b, &here, &["jobs", "submit", "--fresh-workdir", "--", "sleep 1; echo one; echo two >&2; pwd; exit 7"]).await;
    assert!(o.status.success(), "{}", err(&o));
    let id = out(&o).trim().to_string();
    let o = cli(&b, &here, &["jobs", "logs", "-f", &id]).await;
    assert_eq!(o.status.code(), Some(7), "{}", err(&o));
    let text = out(&o);
    assert!(text.starts_with("one\n"), "{text}");
    assert!(text.contains("[stderr] two\n") && !text.contains(&here.display().to_string()), "{text}");
    assert!(err(&o).contains(&format!("job {id} failed")), "{}", err(&o));
    let o = cli(&b, &here, &["jobs", "logs", "--stderr", &id]).await;
    assert_eq!(out(&o), "two\n");
    let o = cli(&b, &here, &["jobs", "logs", "--stdout", "--tail", "1", &id]).await;
    assert!(out(&o).trim().ends_with(&format!("{id}-r1")), "{}", out(&o));
}

/// A negative number where none is taken gets Berth's own message, not clap's `-- -1` tip;
/// where one is taken, it is accepted.
#[tokio::test]
async fn negative_numbers_on_the_command_line() {
    let b = Berth::start(Backend::Sqlite, &[]).await;
    let here = workdir(&b, "neg");
    let o = cli(&b, &here, &["jobs", "submit", "--priority", "-5", "--", "true"]).await;
    assert!(o.status.success(), "{}", err(&o));
    let id = out(&o).trim().to_string();
    assert_eq!(b.job(&id).await["priority"], -5);
    let o = cli(&b, &here, &["jobs", "list", "-1"]).await;
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("`--priority -1`") && !err(&o).contains("'-- -1'"), "{}", err(&o));
}

/// The README's quick start, step 3 ("Run a job"), run as written by `sh` with `berth` on
/// the PATH and a fresh home directory: its comments' promises hold.
#[tokio::test]
async fn the_readme_quick_start_runs_as_written() {
    let b = Berth::start(Backend::Sqlite, &[]).await;
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let step = readme.split("**3. Run a job.**").nth(1).expect("README has step 3");
    let script = step.split("```sh\n").nth(1).and_then(|s| s.split("```").next()).expect("step 3 has a sh block");
    let home = workdir(&b, "home");
    let bin = workdir(&b, "bin");
    std::os::unix::fs::symlink(berth_bin(), bin.join("berth")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let run = tokio::process::Command::new("sh").arg("-c").arg(script).env("HOME", &home).env("PATH", path).env("BERTH_SERVER", &b.url).current_dir(&home).output();
    let o = tokio::time::timeout(SECS(60), run).await.expect("step 3 ends within 60 s").unwrap();
    let (text, errs) = (out(&o), err(&o));
    let demo = home.join("berth-demo");
    assert!(text.contains(&format!("hello from {}\n", demo.display())), "{text}\n{errs}");
    assert!(text.contains("[stderr] oops\n"), "{text}\n{errs}");
    assert!(demo.join("when.txt").is_file(), "{text}\n{errs}");
    assert!(text.lines().any(|l| l.starts_with("ID") && l.contains("EXIT")), "{text}");
    assert!(errs.contains("failed: exited with code 3"), "{errs}");
    assert!(!errs.contains("error:"), "{errs}");
}
