//! Jobs, stages, events, resource history and (on replicas) the leader's waiting list in the
//! database.
//!
//! The admission loop owns the live state; this module only writes what the loop decided
//! (one transaction per batch) and answers the API's reads. SQL is the subset SQLite and
//! PostgreSQL share, run through sqlx's `Any` driver.

mod admissions;
mod events;
mod history;
mod reads;
mod rows;
mod usage;
mod waiting;
#[cfg(test)]
mod tests;

pub use events::{EventFilter, NewEvent};
use events::bind_event;
pub use history::{HistoryQuery, NewSample};
use rows::*;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use app::jobs::{Event, FlavorUse, Job, JobPage, JobRequest, JobState, Parallelism, Sample, StageJob, StageStatus};
use chrono::{DateTime, Utc};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};
use tokio::sync::watch;

use crate::store::{Db, DbKind};

/// Store failures.
#[derive(Debug, thiserror::Error)]
pub enum JobStoreError {
    #[error("job `{0}` does not exist")]
    NotFound(String),
    /// Another job already has this submission id.
    #[error("a job with submission_id `{0}` already exists")]
    DuplicateSubmission(String),
    #[error("stored job `{id}` is unreadable: {message}")]
    Corrupt { id: String, message: String },
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    /// The write was refused: this replica no longer holds the leader lease.
    #[error("this replica lost the leader lease (epoch {0} is no longer current)")]
    Fenced(i64),
}

type Result<T, E = JobStoreError> = std::result::Result<T, E>;

/// Refuses the transaction unless the leader lease still has `epoch`. The row is read `FOR
/// SHARE`: a takeover's update of it waits until this transaction ends, so no write of a
/// deposed leader lands after the new leader took over.
async fn check_fence(tx: &mut sqlx::Transaction<'_, sqlx::Any>, epoch: i64) -> Result<()> {
    let current: Option<i64> = sqlx::query_scalar("SELECT epoch FROM leader_lease WHERE id = 1 FOR SHARE").fetch_optional(&mut **tx).await?;
    match current {
        Some(e) if e == epoch => Ok(()),
        _ => Err(JobStoreError::Fenced(epoch)),
    }
}

/// On PostgreSQL, tells the other replicas (when this transaction commits) that jobs or
/// events changed, so their live views refresh (see `replicas::notify`).
async fn notify_changed(tx: &mut sqlx::Transaction<'_, sqlx::Any>, kind: DbKind) -> Result<()> {
    if kind == DbKind::Postgres {
        sqlx::query("SELECT pg_notify('berth_changed', '')").execute(&mut **tx).await?;
    }
    Ok(())
}

/// Microseconds since the epoch as a UTC time (the epoch itself for absurd values).
pub fn time_of(us: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp_micros(us).unwrap_or_default()
}

/// A job as the loop keeps and writes it: the request plus every mutable column.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRow {
    pub id: String,
    pub name: String,
    pub submitter: String,
    pub stage_id: Option<String>,
    pub state: JobState,
    pub spec: JobRequest,
    pub queue: Option<String>,
    pub rule_index: Option<i64>,
    pub config_version: Option<i64>,
    pub priority: i64,
    pub submitted_at_us: i64,
    pub enqueued_at_us: i64,
    pub runs: i64,
    pub retries: i64,
    pub retry_at_us: Option<i64>,
    pub flavors: Vec<FlavorUse>,
    pub node: Option<String>,
    pub backend: Option<String>,
    pub handle: Option<String>,
    pub admitted_at_us: Option<i64>,
    pub started_at_us: Option<i64>,
    pub finished_at_us: Option<i64>,
    pub exit_code: Option<i64>,
    pub reason: Option<String>,
}

impl JobRow {
    /// A job just submitted at `at_us`: pending, not routed, placed or run yet.
    pub fn submitted(id: String, name: String, submitter: String, spec: JobRequest, priority: i64, config_version: i64, at_us: i64) -> JobRow {
        JobRow {
            id,
            name,
            submitter,
            stage_id: None,
            state: JobState::Pending,
            spec,
            queue: None,
            rule_index: None,
            config_version: Some(config_version),
            priority,
            submitted_at_us: at_us,
            enqueued_at_us: at_us,
            runs: 0,
            retries: 0,
            retry_at_us: None,
            flavors: Vec::new(),
            node: None,
            backend: None,
            handle: None,
            admitted_at_us: None,
            started_at_us: None,
            finished_at_us: None,
            exit_code: None,
            reason: None,
        }
    }

    /// The API's view of the row (no position or history: the caller adds them).
    pub fn to_job(&self) -> Job {
        Job {
            id: self.id.clone(),
            submission_id: self.spec.submission_id.clone(),
            name: self.name.clone(),
            submitter: self.submitter.clone(),
            state: self.state,
            entrypoint: self.spec.entrypoint.clone(),
            runtime_env: self.spec.runtime_env.clone(),
            labels: self.spec.labels.clone(),
            resources: self.spec.resources.clone(),
            priority: self.priority,
            requested_priority: self.spec.priority,
            timeout_s: self.spec.timeout_s,
            max_retries: self.spec.max_retries,
            retries: self.retries.try_into().unwrap_or(u32::MAX),
            runs: self.runs,
            stage_id: self.stage_id.clone(),
            queue: self.queue.clone(),
            rule_index: self.rule_index,
            config_version: self.config_version,
            flavors: self.flavors.clone(),
            node: self.node.clone(),
            backend: self.backend.clone(),
            submitted_at: time_of(self.submitted_at_us),
            enqueued_at: time_of(self.enqueued_at_us),
            admitted_at: self.admitted_at_us.map(time_of),
            started_at: self.started_at_us.map(time_of),
            finished_at: self.finished_at_us.map(time_of),
            exit_code: self.exit_code,
            reason: self.reason.clone(),
            reason_headline: None,
            position: None,
            outputs: self.spec.outputs.clone(),
            after_ok: self.spec.after_ok.clone(),
            after_any: self.spec.after_any.clone(),
            after_not_ok: self.spec.after_not_ok.clone(),
            held_by: self.spec.held_by.clone(),
            dependents: Vec::new(),
            history: Vec::new(),
        }
    }
}

/// A unique violation on a submission id as [`JobStoreError::DuplicateSubmission`] naming the
/// first of `jobs` whose id is already taken (the batch may hold several), else `e` as is.
fn duplicate_submission(e: JobStoreError, jobs: &[JobRow]) -> JobStoreError {
    let JobStoreError::Db(sqlx::Error::Database(db)) = &e else { return e };
    if !db.is_unique_violation() || !db.message().contains("submission_id") {
        return e;
    }
    match jobs.iter().find_map(|j| j.spec.submission_id.clone()) {
        Some(id) => JobStoreError::DuplicateSubmission(id),
        None => e,
    }
}

/// Filters of the job list; all given ones must hold.
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    pub queue: Option<String>,
    pub states: Vec<JobState>,
    pub label: Option<(String, String)>,
    pub submitter: Option<String>,
    pub stage_id: Option<String>,
    /// Case-insensitive substring of the id, the name or the submission id.
    pub search: Option<String>,
    pub submitted_after_us: Option<i64>,
    pub submitted_before_us: Option<i64>,
    /// Leave out jobs that Ray's API deleted from its view.
    pub ray_visible: bool,
}

const JOB_COLUMNS: &str = "id, name, submitter, stage_id, state, spec_json, queue, rule_index, config_version, priority, \
    submitted_at_us, enqueued_at_us, runs, retries, retry_at_us, flavors_json, node, backend, handle, admitted_at_us, \
    started_at_us, finished_at_us, exit_code, reason, seq";

/// The last column is the name of the event's job, so pages show names next to ids.
const EVENT_COLUMNS: &str = "seq, at_us, kind, job_id, queue, flavor, node, config_version, rule_index, message, detail_json, \
     (SELECT j.name FROM jobs j WHERE j.id = events.job_id) AS job_name";

/// Rows per multi-row `INSERT`: well under both engines' limit on bound parameters
/// (SQLite 32,766, PostgreSQL 65,535) at 14 per job.
const ROWS_PER_INSERT: usize = 500;

/// A job's mutable columns, in the order [`bind_job_update`] binds them; its id comes last.
const JOB_UPDATE_COLUMNS: [&str; 19] = [
    "state", "queue", "priority", "enqueued_at_us", "updated_at_us", "runs", "retries", "retry_at_us", "flavors_json", "node",
    "backend", "handle", "admitted_at_us", "started_at_us", "finished_at_us", "exit_code", "reason", "rule_index", "config_version",
];
const JOB_UPDATE_PARAMS: usize = JOB_UPDATE_COLUMNS.len() + 1;

/// One job's update: `UPDATE jobs SET state = $1, … WHERE id = $20`.
static JOB_UPDATE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let set: Vec<String> = JOB_UPDATE_COLUMNS.iter().enumerate().map(|(i, c)| format!("{c} = ${}", i + 1)).collect();
    format!("UPDATE jobs SET {} WHERE id = ${JOB_UPDATE_PARAMS}", set.join(", "))
});

/// Many jobs' updates at once (SQLite): `UPDATE jobs SET state = v.column1, … FROM (VALUES `,
/// the rows' values in [`JOB_UPDATE`]'s order, then [`JOB_UPDATE_FROM_END`].
static JOB_UPDATE_FROM: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let set: Vec<String> = JOB_UPDATE_COLUMNS.iter().enumerate().map(|(i, c)| format!("{c} = v.column{}", i + 1)).collect();
    format!("UPDATE jobs SET {} FROM (VALUES ", set.join(", "))
});
static JOB_UPDATE_FROM_END: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!(") AS v WHERE jobs.id = v.column{JOB_UPDATE_PARAMS};\n"));

/// A changed request, with the columns accounting reads from it.
const SPEC_UPDATE: &str = "UPDATE jobs SET spec_json = $1, req_cpu = $2, req_gpu = $3, req_memory_gb = $4 WHERE id = $5";
const SPEC_UPDATE_PARAMS: usize = 5;

const INSERT_STAGE: &str = "INSERT INTO stages (id, name, submitter, created_at_us, parallelism_json) VALUES ($1, $2, $3, $4, $5)";
const STAGE_PARAMS: usize = 5;

/// A label of a job inserted in the same text, found by the job's id (SQLite's one trip).
const LABEL_ROW: &str = "(?, ?, (SELECT seq FROM jobs WHERE id = ?))";
const LABEL_PARAMS: usize = 3;

const INSERT_EVENTS: &str =
    "INSERT INTO events (at_us, kind, job_id, queue, flavor, node, config_version, rule_index, message, detail_json) VALUES";
const EVENT_PARAMS: usize = 10;

/// Most bound parameters in one multi-statement SQLite update; a bigger batch takes one
/// round trip per statement.
const SQLITE_ONE_TRIP_PARAMS: usize = 30_000;

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>;

/// Parameters of one [`JobStore::update`].
/// Parameters of [`JobStore::insert_in_one_trip`]: a stage's, the jobs', their labels' and
/// the events'.
fn insert_params(jobs: &[JobRow], events: &[NewEvent]) -> usize {
    let labels: usize = jobs.iter().map(|j| j.spec.labels.len()).sum();
    STAGE_PARAMS + jobs.len() * NEW_JOB_PARAMS + labels * LABEL_PARAMS + events.len() * EVENT_PARAMS
}

fn update_params(jobs: &[(&JobRow, bool)], events: &[NewEvent]) -> usize {
    jobs.iter().map(|(_, spec)| JOB_UPDATE_PARAMS + if *spec { SPEC_UPDATE_PARAMS } else { 0 }).sum::<usize>() + events.len() * EVENT_PARAMS
}

/// Binds [`JOB_UPDATE`]'s parameters, in its order.
fn bind_job_update<'q>(query: AnyQuery<'q>, job: &'q JobRow, now_us: i64) -> AnyQuery<'q> {
    query
        .bind(job.state.as_str())
        .bind(job.queue.as_deref())
        .bind(job.priority)
        .bind(job.enqueued_at_us)
        .bind(now_us)
        .bind(job.runs)
        .bind(job.retries)
        .bind(job.retry_at_us)
        .bind((!job.flavors.is_empty()).then(|| serde_json::to_string(&job.flavors).unwrap_or_default()))
        .bind(job.node.as_deref())
        .bind(job.backend.as_deref())
        .bind(job.handle.as_deref())
        .bind(job.admitted_at_us)
        .bind(job.started_at_us)
        .bind(job.finished_at_us)
        .bind(job.exit_code)
        .bind(job.reason.as_deref())
        .bind(job.rule_index)
        .bind(job.config_version)
        .bind(&job.id)
}

/// Jobs, stages, events and samples.
#[derive(Debug, Clone)]
pub struct JobStore {
    db: Db,
    /// Bumped after every committed write: what live views (SSE) wait on.
    changes: Arc<watch::Sender<u64>>,
    /// Held for each write transaction. SQLite has one writer at a time, and a second one
    /// waits in SQLite's busy handler, which sleeps 1, 2, 5, … up to 100 ms between tries:
    /// the admission loop's commit would often sleep behind a submission. Queued here, the
    /// next writer starts the moment the last one commits.
    writer: Arc<tokio::sync::Mutex<()>>,
    /// The leader lease epoch every [`JobStore::update`] checks in its transaction (the
    /// admission loop's copy on PostgreSQL replicas, see `replicas`).
    fence: Option<i64>,
}

impl JobStore {
    pub fn new(db: Db) -> Self {
        JobStore { db, changes: Arc::new(watch::channel(0).0), writer: Arc::default(), fence: None }
    }

    /// This store, whose updates are refused ([`JobStoreError::Fenced`]) once the leader
    /// lease has another epoch than `epoch`.
    pub fn fenced(&self, epoch: i64) -> JobStore {
        JobStore { fence: Some(epoch), ..self.clone() }
    }

    /// Tells live views this store's data changed elsewhere (another replica wrote).
    pub fn changed_elsewhere(&self) {
        self.changed();
    }

    /// Waits for the turn to write (see [`JobStore::writer`]).
    async fn write_turn(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.writer.lock().await
    }

    /// The pool, for writes that go beside the jobs' (the audit log).
    pub fn pool(&self) -> &crate::store::AnyPool {
        &self.db.pool
    }

    /// A receiver that sees a new value after each committed write.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Inserts new jobs (their labels too) and events, atomically; with `stage`, the stage row
    /// first.
    pub async fn insert(&self, stage: Option<(&str, &str, &str, i64, &Parallelism)>, jobs: &[JobRow], events: &[NewEvent]) -> Result<()> {
        let _turn = self.write_turn().await;
        if self.db.kind == DbKind::Sqlite && insert_params(jobs, events) <= SQLITE_ONE_TRIP_PARAMS {
            self.insert_in_one_trip(stage, jobs, events).await.map_err(|e| duplicate_submission(e, jobs))?;
            self.changed();
            return Ok(());
        }
        let mut tx = self.db.pool.begin().await?;
        if let Some((id, name, submitter, at_us, parallelism)) = stage {
            sqlx::query(INSERT_STAGE)
                .bind(id)
                .bind(name)
                .bind(submitter)
                .bind(at_us)
                .bind(serde_json::to_string(parallelism).unwrap_or_default())
                .execute(&mut *tx)
                .await?;
        }
        for chunk in jobs.chunks(ROWS_PER_INSERT) {
            insert_jobs(&mut tx, self.db.kind, chunk).await.map_err(|e| duplicate_submission(e, jobs))?;
        }
        insert_events(&mut tx, self.db.kind, events).await?;
        notify_changed(&mut tx, self.db.kind).await?;
        tx.commit().await?;
        self.changed();
        Ok(())
    }

    /// Writes the mutable columns of `jobs` and appends `events`, atomically; a job's spec
    /// (JSON) only when its flag says the spec changed (a new requested priority).
    pub async fn update(&self, now_us: i64, jobs: &[(&JobRow, bool)], events: &[NewEvent]) -> Result<()> {
        if jobs.is_empty() && events.is_empty() {
            return Ok(());
        }
        let _turn = self.write_turn().await;
        if self.db.kind == DbKind::Sqlite && update_params(jobs, events) <= SQLITE_ONE_TRIP_PARAMS {
            self.update_in_one_trip(now_us, jobs, events).await?;
            self.changed();
            return Ok(());
        }
        let mut tx = self.db.pool.begin().await?;
        if let Some(epoch) = self.fence {
            check_fence(&mut tx, epoch).await?;
        }
        for &(job, spec_changed) in jobs {
            if spec_changed {
                let spec = serde_json::to_string(&job.spec).map_err(|e| JobStoreError::Corrupt { id: job.id.clone(), message: e.to_string() })?;
                bind_requested(sqlx::query(SPEC_UPDATE).bind(spec), &job.spec).bind(&job.id).execute(&mut *tx).await?;
            }
            bind_job_update(sqlx::query(JOB_UPDATE.as_str()), job, now_us)
            .execute(&mut *tx)
            .await?;
        }
        insert_events(&mut tx, self.db.kind, events).await?;
        notify_changed(&mut tx, self.db.kind).await?;
        tx.commit().await?;
        self.changed();
        Ok(())
    }

    /// [`JobStore::update`] on SQLite as one multi-statement query (`BEGIN IMMEDIATE; UPDATE
    /// …; INSERT …; COMMIT`, see [`JobStore::one_trip`]): one round trip to the connection's
    /// worker thread instead of one per statement, which was most of what the admission
    /// loop's commit cost. Its parameters are `?`, which sqlx binds in turn across the
    /// statements.
    async fn update_in_one_trip(&self, now_us: i64, jobs: &[(&JobRow, bool)], events: &[NewEvent]) -> Result<()> {
        let mut sql = String::from("BEGIN IMMEDIATE;\n");
        let mut specs = Vec::new();
        for &(job, _) in jobs.iter().filter(|(_, spec_changed)| *spec_changed) {
            let spec = serde_json::to_string(&job.spec).map_err(|e| JobStoreError::Corrupt { id: job.id.clone(), message: e.to_string() })?;
            specs.push((job, spec));
            sql.push_str(&anonymous(SPEC_UPDATE));
            sql.push_str(";\n");
        }
        // The jobs' rows in one statement per chunk (SQLite prepares each statement of the
        // text: one per job was most of this write's cost).
        for chunk in jobs.chunks(ROWS_PER_INSERT) {
            sql.push_str(&JOB_UPDATE_FROM);
            sql.push_str(&placeholders(DbKind::Sqlite, chunk.len(), JOB_UPDATE_PARAMS, ""));
            sql.push_str(&JOB_UPDATE_FROM_END);
        }
        for chunk in events.chunks(ROWS_PER_INSERT) {
            sql.push_str(&format!("{INSERT_EVENTS} {};\n", placeholders(DbKind::Sqlite, chunk.len(), EVENT_PARAMS, "")));
        }
        sql.push_str("COMMIT;");
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).persistent(false);
        for (job, spec) in specs {
            query = bind_requested(query.bind(spec), &job.spec).bind(&job.id);
        }
        for &(job, _) in jobs {
            query = bind_job_update(query, job, now_us);
        }
        for e in events {
            query = bind_event(query, e);
        }
        self.one_trip(query).await
    }

    /// [`JobStore::insert`] on SQLite as one multi-statement query, like
    /// [`JobStore::update_in_one_trip`]: a submission is one round trip to the connection's
    /// worker thread, not one per statement. Labels find their job's row by its id.
    async fn insert_in_one_trip(&self, stage: Option<(&str, &str, &str, i64, &Parallelism)>, jobs: &[JobRow], events: &[NewEvent]) -> Result<()> {
        let mut sql = String::from("BEGIN IMMEDIATE;\n");
        if stage.is_some() {
            sql.push_str(&anonymous(INSERT_STAGE));
            sql.push_str(";\n");
        }
        for chunk in jobs.chunks(ROWS_PER_INSERT) {
            sql.push_str(&format!("{INSERT_JOBS} {};\n", placeholders(DbKind::Sqlite, chunk.len(), NEW_JOB_PARAMS, NEW_JOB_TAIL)));
        }
        let labels: Vec<(&str, &str, &str)> =
            jobs.iter().flat_map(|j| j.spec.labels.iter().map(move |(k, v)| (k.as_str(), v.as_str(), j.id.as_str()))).collect();
        for chunk in labels.chunks(ROWS_PER_INSERT * 4) {
            sql.push_str(&format!("INSERT INTO job_labels (key, value, job_seq) VALUES {};\n", vec![LABEL_ROW; chunk.len()].join(", ")));
        }
        for chunk in events.chunks(ROWS_PER_INSERT) {
            sql.push_str(&format!("{INSERT_EVENTS} {};\n", placeholders(DbKind::Sqlite, chunk.len(), EVENT_PARAMS, "")));
        }
        sql.push_str("COMMIT;");
        let parallelism = stage.map(|(.., p)| serde_json::to_string(p).unwrap_or_default());
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).persistent(false);
        if let Some((id, name, submitter, at_us, _)) = stage {
            query = query.bind(id).bind(name).bind(submitter).bind(at_us).bind(parallelism.unwrap_or_default());
        }
        for job in jobs {
            query = bind_new_job(query, job);
        }
        for &(key, value, id) in &labels {
            query = query.bind(key).bind(value).bind(id);
        }
        for e in events {
            query = bind_event(query, e);
        }
        self.one_trip(query).await
    }

    /// Runs a multi-statement query that begins and commits its own transaction. A failing
    /// statement leaves the transaction open: it is rolled back before the connection goes
    /// back to the pool, and the connection closed if even that fails.
    async fn one_trip(&self, query: AnyQuery<'_>) -> Result<()> {
        let mut conn = self.db.pool.acquire().await?;
        if let Err(e) = query.execute(&mut *conn).await {
            if sqlx::query("ROLLBACK").execute(&mut *conn).await.is_err() {
                // Not known to be outside a transaction: never hand it out again.
                use sqlx::Connection;
                let _ = conn.detach().close().await;
            }
            return Err(e.into());
        }
        Ok(())
    }
}
