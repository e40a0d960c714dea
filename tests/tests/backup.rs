//! `berth db backup` and `berth db restore` on the real binary: a backup taken while the
//! server runs and jobs finish, restored after a later change, gives back exactly the state
//! at the backup (config versions, jobs, their events), and a server starts on it. Bad
//! requests are refused with what to do instead, and change nothing.

mod common;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::berth::{berth_bin, Berth};
use common::Backend;
use serde_json::json;

fn queue_config(quota: u32) -> String {
    format!(
        "resource_flavors:\n  - name: local\n    selector:\n      - {{key: backend, operator: in, values: [local]}}\n\
         resource_queues:\n  - name: team\n    resource_groups:\n      - covered_resources: [cpu]\n        \
         flavors: [{{name: local, resources: [{{name: cpu, nominal_quota: {quota}}}]}}]\n\
         scheduling_rules:\n  - resource_queue: team\n"
    )
}

async fn db(args: &[&str], database_url: &str) -> Output {
    let run = tokio::process::Command::new(berth_bin()).arg("db").args(args).args(["--database-url", database_url]).output();
    tokio::time::timeout(Duration::from_secs(60), run).await.expect("berth db ends within 60 s").unwrap()
}

fn said(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

async fn active_version(b: &Berth) -> i64 {
    let (status, active) = b.get("/api/v1/scheduler/config").await;
    assert_eq!(status, 200, "{active}");
    active["version"].as_i64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_while_serving_restores_that_state() {
    let mut b = Berth::start(Backend::Sqlite, &[]).await;
    let backed_up_version = b.apply(&queue_config(2)).await;
    let job = b.submit(json!({"entrypoint": "echo kept", "name": "before-backup"})).await;
    b.wait_state(&job, &["succeeded"], Duration::from_secs(30)).await;

    // Taken while the server runs and a job is running.
    let busy = b.submit(json!({"entrypoint": "sleep 2", "name": "running-during-backup"})).await;
    b.wait_state(&busy, &["running"], Duration::from_secs(30)).await;
    let file = b.dir.join("berth-backup.db");
    let file_s = file.display().to_string();
    let o = db(&["backup", &file_s], &b.db_url).await;
    assert!(o.status.success(), "{}", said(&o));
    assert!(said(&o).contains(&format!("to {file_s}")), "{}", said(&o));

    // A second backup to the same name is refused, and the first is untouched.
    let before = std::fs::read(&file).unwrap();
    let o = db(&["backup", &file_s], &b.db_url).await;
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    assert!(said(&o).contains("already exists"), "{}", said(&o));
    assert_eq!(std::fs::read(&file).unwrap(), before);

    // Later changes, which the restore must take back.
    let later_version = b.apply(&queue_config(3)).await;
    assert!(later_version > backed_up_version);
    let later_job = b.submit(json!({"entrypoint": "true", "name": "after-backup"})).await;
    b.wait_state(&later_job, &["succeeded"], Duration::from_secs(30)).await;
    // A restore while the server runs is refused.
    let o = db(&["restore", &file_s, "--replace"], &b.db_url).await;
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    assert!(said(&o).contains("stop it before restoring"), "{}", said(&o));
    b.kill9();

    // Without --replace the database in place is not touched.
    let o = db(&["restore", &file_s], &b.db_url).await;
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    assert!(said(&o).contains("pass --replace"), "{}", said(&o));

    let o = db(&["restore", &file_s, "--replace"], &b.db_url).await;
    assert!(o.status.success(), "{}", said(&o));
    let kept = said(&o).lines().find_map(|l| l.strip_prefix("the database it replaced is kept as ")).map(str::to_string);
    let kept = kept.unwrap_or_else(|| panic!("the restore says where the old database went: {}", said(&o)));
    assert!(Path::new(&kept).is_file(), "{kept}");

    b.spawn().await;
    assert_eq!(active_version(&b).await, backed_up_version, "the restored database has the config of the backup");
    assert_eq!(b.job(&job).await["state"], "succeeded");
    let (status, _) = b.get(&format!("/api/v1/jobs/{later_job}")).await;
    assert_eq!(status, 404, "a job submitted after the backup is not in the restored database");
    let events = b.events(&format!("job={job}")).await;
    assert!(events.iter().any(|e| e["kind"] == "finished"), "{events:?}");
    // The job that was running at the backup is recovered like after any restart: its
    // process ended while no server ran, and the local backend's journal has its outcome.
    b.wait_state(&busy, &["succeeded"], Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_backup_and_restore_requests_say_what_to_do() {
    let dir = std::env::temp_dir().join(format!("berth_backup_bad_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = format!("sqlite://{}/nothing-here.db", dir.display());
    let target = dir.join("b.db").display().to_string();

    let o = db(&["backup", &target], &missing).await;
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    assert!(said(&o).contains("no database at"), "{}", said(&o));
    assert!(!Path::new(&target).exists(), "nothing written");
    assert!(!dir.join("nothing-here.db").exists(), "the backup did not create the database it looked for");

    let o = db(&["backup", &target], "postgres://berth@127.0.0.1:1/berth").await;
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    assert!(said(&o).contains("pg_dump"), "{}", said(&o));

    let not_berth = dir.join("notes.txt");
    std::fs::write(&not_berth, "not a database\n").unwrap();
    let fresh = format!("sqlite://{}/restored.db", dir.display());
    let o = db(&["restore", &not_berth.display().to_string()], &fresh).await;
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    assert!(said(&o).contains("is not a Berth database"), "{}", said(&o));
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(left, vec!["notes.txt".to_string()], "a failed restore leaves no file behind");

    let o = db(&["restore", &dir.join("absent.db").display().to_string()], &fresh).await;
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    assert!(said(&o).contains("does not exist"), "{}", said(&o));
    std::fs::remove_dir_all(&dir).ok();
}
