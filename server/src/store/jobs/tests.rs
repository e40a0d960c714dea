//! The job store on a real SQLite database.

use super::*;

async fn store(name: &str) -> JobStore {
    let dir = std::env::temp_dir().join(format!("berth-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    JobStore::new(Db::connect(&format!("sqlite://{}/berth.db", dir.display())).await.expect("database opens"))
}

fn event(kind: &'static str, job: &str) -> NewEvent {
    NewEvent {
        at_us: 1,
        kind,
        job_id: Some(job.into()),
        queue: None,
        flavor: None,
        node: None,
        config_version: None,
        rule_index: None,
        message: format!("{kind} {job}"),
        detail: Some(serde_json::json!({"n": 1})),
    }
}

fn job(id: &str) -> JobRow {
    JobRow::submitted(id.into(), id.into(), "ann".into(), JobRequest { entrypoint: "true".into(), ..Default::default() }, 0, 1, 1)
}

#[tokio::test]
async fn an_update_is_written_whole_or_not_at_all() {
    let store = store("whole").await;
    let (mut a, mut b) = (job("a"), job("b"));
    store.insert(None, &[a.clone(), b.clone()], &[]).await.expect("insert");

    a.state = JobState::Running;
    a.node = Some("n1".into());
    b.state = JobState::Succeeded;
    b.exit_code = Some(0);
    b.spec.priority = Some(7);
    store.update(2, &[(&a, false), (&b, true)], &[event("started", "a"), event("finished", "b")]).await.expect("update");
    let (got_a, got_b) = (store.get("a").await.expect("a"), store.get("b").await.expect("b"));
    assert_eq!((got_a.state, got_a.node.as_deref()), (JobState::Running, Some("n1")));
    assert_eq!((got_b.state, got_b.exit_code, got_b.spec.priority), (JobState::Succeeded, Some(0), Some(7)));
    let (events, _) = store.events(&EventFilter::default(), None, 10).await.expect("events");
    assert_eq!(events.len(), 2);
    assert!(events.iter().any(|e| e.message == "finished b" && e.detail == serde_json::json!({"n": 1})));

    // A statement that fails half-way: nothing of the update stays, and the connection
    // it ran on is not left inside a transaction.
    sqlx::query("CREATE TRIGGER refuse BEFORE INSERT ON events WHEN NEW.kind = 'refused' BEGIN SELECT RAISE(ABORT, 'refused'); END")
        .execute(&store.db().pool)
        .await
        .expect("trigger");
    a.state = JobState::Failed;
    assert!(store.update(3, &[(&a, false)], &[event("failed", "a"), event("refused", "a")]).await.is_err());
    assert_eq!(store.get("a").await.expect("a").state, JobState::Running, "the failed update left no trace");
    assert_eq!(store.events(&EventFilter::default(), None, 10).await.expect("events").0.len(), 2);
    for _ in 0..8 {
        // Every pooled connection takes a write and sees it commit.
        store.update(4, &[(&a, false)], &[]).await.expect("the pool still writes");
    }
    assert_eq!(store.get("a").await.expect("a").state, JobState::Failed);
}

#[test]
fn sqlite_statements_bind_in_order_of_appearance() {
    assert_eq!(anonymous("UPDATE t SET a = $1, b = $12 WHERE id = $13 AND c = '$x'"), "UPDATE t SET a = ?, b = ? WHERE id = ? AND c = '$x'");
    assert_eq!(placeholders(DbKind::Sqlite, 2, 2, ", 0"), "(?, ?, 0), (?, ?, 0)");
    assert_eq!(placeholders(DbKind::Postgres, 2, 2, ""), "($1, $2), ($3, $4)");
}

#[tokio::test]
async fn multi_row_writes_put_every_value_in_its_column() {
    let store = store("rows").await;
    // More rows than one statement takes, so the batches span several statements.
    let mut jobs: Vec<JobRow> = (0..ROWS_PER_INSERT + 20).map(|i| job(&format!("j{i:04}"))).collect();
    for (i, j) in jobs.iter_mut().enumerate() {
        j.spec.labels.insert("team".into(), format!("t{}", i % 3));
        j.priority = i as i64;
    }
    let events: Vec<NewEvent> = jobs.iter().map(|j| event("submitted", &j.id)).collect();
    store.insert(None, &jobs, &events).await.expect("insert");
    let last = store.get("j0519").await.expect("last job");
    assert_eq!((last.priority, last.spec.labels.get("team").map(String::as_str)), (519, Some("t0")));
    let filter = JobFilter { label: Some(("team".into(), "t1".into())), ..Default::default() };
    let page = store.list(&filter, None, 1000).await.expect("list");
    assert_eq!(page.jobs.len(), (ROWS_PER_INSERT + 20) / 3, "every job's labels went to that job");

    // One update of many jobs, one with a new spec, and more events than one statement.
    for (i, j) in jobs.iter_mut().enumerate() {
        j.state = JobState::Running;
        j.node = Some(format!("n{i}"));
    }
    jobs[7].spec.priority = Some(42);
    let changed: Vec<(&JobRow, bool)> = jobs.iter().enumerate().map(|(i, j)| (j, i == 7)).collect();
    let started: Vec<NewEvent> = jobs.iter().map(|j| event("started", &j.id)).collect();
    store.update(5, &changed, &started).await.expect("update");
    let seven = store.get("j0007").await.expect("j0007");
    assert_eq!((seven.state, seven.node.as_deref(), seven.spec.priority), (JobState::Running, Some("n7"), Some(42)));
    assert_eq!(store.get("j0400").await.expect("j0400").node.as_deref(), Some("n400"));
    let (all, _) = store.events(&EventFilter::default(), None, 5000).await.expect("events");
    assert_eq!(all.len(), 2 * (ROWS_PER_INSERT + 20));
    assert!(all.iter().any(|e| e.message == "started j0519" && e.job_id.as_deref() == Some("j0519")));
}
