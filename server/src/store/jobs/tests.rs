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

#[tokio::test]
async fn events_filter_by_queues_flavors_owners_and_outcome() {
    let store = store("event-filters").await;
    let (mut a, mut b) = (job("a"), job("b"));
    a.submitter = "ann".into();
    a.backend = Some("ray".into());
    b.submitter = "bob".into();
    let on = |kind, job: &str, queue: &str, flavor: Option<&str>, message: &str| NewEvent {
        queue: Some(queue.into()),
        flavor: flavor.map(Into::into),
        message: message.into(),
        ..event(kind, job)
    };
    let events = [
        on("admitted", "a", "research", Some("spot,big_gpu"), "admitted"),
        on("finished", "a", "research", Some("spot,big_gpu"), "succeeded"),
        on("admitted", "b", "batch", Some("SPOT"), "admitted"),
        on("finished", "b", "batch", Some("SPOT"), "exited with code 1"),
        on("submitted", "b", "other", None, "submitted"),
    ];
    store.insert(None, &[a.clone(), b], &events).await.expect("insert");
    // A job's backend is written when it is placed, not at submit.
    store.update(2, &[(&a, false)], &[]).await.expect("placed");
    let messages = |f: EventFilter| {
        let store = store.clone();
        async move {
            let (events, _) = store.events(&f, None, 100).await.expect("events");
            events.into_iter().map(|e| format!("{} {}", e.job_id.unwrap_or_default(), e.message)).collect::<Vec<_>>()
        }
    };
    let queues = EventFilter { queues: vec!["research".into(), "other".into()], ..Default::default() };
    assert_eq!(messages(queues).await, ["a admitted", "a succeeded", "b submitted"]);
    // A flavor is matched whole and with its case, wherever it stands in the list.
    for (flavor, want) in [("spot", vec!["a admitted", "a succeeded"]), ("big_gpu", vec!["a admitted", "a succeeded"]), ("big", vec![]), ("SPOT", vec!["b admitted", "b exited with code 1"])] {
        let f = EventFilter { flavors: vec![flavor.into()], ..Default::default() };
        assert_eq!(messages(f).await, want, "flavor {flavor}");
    }
    let failed = EventFilter { finished_succeeded: Some(false), ..Default::default() };
    assert_eq!(messages(failed).await, ["b exited with code 1"]);
    let succeeded_or_submitted = EventFilter { kinds: vec!["submitted".into()], finished_succeeded: Some(true), ..Default::default() };
    assert_eq!(messages(succeeded_or_submitted).await, ["a succeeded", "b submitted"]);
    let bobs = EventFilter { user: Some("bob".into()), kinds: vec!["admitted".into()], ..Default::default() };
    assert_eq!(messages(bobs).await, ["b admitted"]);
    let on_ray = EventFilter { backend: Some("ray".into()), ..Default::default() };
    assert_eq!(messages(on_ray).await.len(), 2);
    let owners = store.owners(&["a".into(), "b".into(), "nobody".into()]).await.expect("owners");
    assert_eq!(owners.get("a"), Some(&("ann".to_string(), Some("ray".to_string()))));
    assert_eq!(owners.get("b"), Some(&("bob".to_string(), None)));
    assert_eq!(owners.len(), 2);
}

#[tokio::test]
async fn admissions_are_the_queues_jobs_admitted_in_the_range_with_their_waits() {
    let store = store("admissions").await;
    // (id, queue, enqueued, admitted)
    let rows: Vec<JobRow> = [("early", "q", 0, Some(5)), ("a", "q", 10, Some(40)), ("b", "q", 20, Some(25)), ("other", "r", 10, Some(30)), ("waiting", "q", 10, None)]
        .into_iter()
        .map(|(id, queue, enqueued, admitted)| JobRow { queue: Some(queue.into()), enqueued_at_us: enqueued, admitted_at_us: admitted, ..job(id) })
        .collect();
    let submitted: Vec<JobRow> = rows.iter().map(|r| job(&r.id)).collect();
    store.insert(None, &submitted, &[]).await.expect("insert");
    let changes: Vec<(&JobRow, bool)> = rows.iter().map(|r| (r, false)).collect();
    store.update(2, &changes, &[]).await.expect("update");
    let got = store.admissions("q", 10, 100).await.expect("admissions");
    assert_eq!(got, vec![(25, 5), (40, 30)], "oldest first, only queue q, only admitted in [10, 100)");
}
