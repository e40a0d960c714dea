//! The runtime: jobs go in, the admission loop decides with the engine, backends run them.
//!
//! [`Runtime`] is the handle the API holds. Submissions are checked and stored here (so a
//! `201` means the job is durable), then handed to the loop ([`admission`]), the single task
//! that changes live jobs. Reads go to the database, plus the loop's live view for what only
//! it knows (positions and reasons of waiting jobs, usage).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use app::auth::Role;
use app::jobs::{
    CohortView, EventPage, Job, JobPage, JobRequest, JobState, NodeView, QueueView, ReportedUse, Sample,
    StageCreated, StageRejection, StageRequest,
};
use tokio::sync::{mpsc, oneshot};

mod prepare;
mod reads;
mod stages;
mod usage;
mod workflows;

pub use prepare::prepare;

use prepare::{check_workdir, prepare_coded};
use super::request;
use super::views::{cohort_views, live_jobs, observe_gauges, queue_views};
use crate::admission::intake::{submit_event, write_submissions, Submission};
use crate::admission::{self, Cmd, LoopError, Loop, Settings, Shared, State};
use crate::backends::{self as backend, Registry, RunId, Stream};
use crate::clock::{new_id, now_us, SystemClock};
use crate::store::jobs::{self as store, EventFilter, HistoryQuery, JobFilter, JobRow, JobStore, NewEvent};

use crate::services::auth::Caller;
use crate::store::auth::AuditRecord;
use crate::engine::{self, Compiled, InFlightLimit, Node};
use crate::services::config::ConfigService;
use crate::services::packages::{PackageError, Packages};
use crate::metrics::Metrics;
use crate::replicas::{self, Lease, ReplicaOptions};

/// What the runtime refuses or fails at; mapped to HTTP in `http::error`.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// Bad input: `field: problem`.
    #[error("{0}")]
    Invalid(String),
    /// Refused at submit; the job is recorded as `rejected`.
    #[error("rejected: {}", .0.reason.as_deref().unwrap_or(""))]
    Rejected(Box<Job>),
    #[error("job `{0}` does not exist")]
    NotFound(String),
    #[error("stage `{0}` does not exist")]
    StageNotFound(String),
    /// The job exists but has ended.
    #[error("job `{0}` has already ended")]
    NotLive(String),
    /// The caller may not do this.
    #[error(transparent)]
    Forbidden(#[from] crate::services::auth::Denied),
    #[error("the admission loop is not running")]
    Stopped,
    #[error("{0}")]
    Backend(String),
    #[error("database error: {0}")]
    Store(String),
}

impl From<LoopError> for RuntimeError {
    fn from(e: LoopError) -> Self {
        match e {
            LoopError::NotLive(id) => RuntimeError::NotLive(id),
            LoopError::Invalid(m) => RuntimeError::Invalid(m),
            LoopError::Store(m) => RuntimeError::Store(m),
            LoopError::Stopped => RuntimeError::Stopped,
        }
    }
}

impl From<PackageError> for RuntimeError {
    fn from(e: PackageError) -> Self {
        match e {
            PackageError::Forbidden(d) => RuntimeError::Forbidden(d),
            PackageError::Store(m) => RuntimeError::Store(m),
            other => RuntimeError::Invalid(other.to_string()),
        }
    }
}

impl From<store::JobStoreError> for RuntimeError {
    fn from(e: store::JobStoreError) -> Self {
        match e {
            store::JobStoreError::NotFound(id) => RuntimeError::NotFound(id),
            e @ store::JobStoreError::DuplicateSubmission(_) => RuntimeError::Invalid(format!("submission_id: {e}")),
            other => RuntimeError::Store(other.to_string()),
        }
    }
}

/// A read of a job's log: the bytes of its latest run, which run that is, and the job's state.
#[derive(Debug, Clone)]
pub struct LogRead {
    pub bytes: Vec<u8>,
    pub state: JobState,
    /// 0 before its first start.
    pub run: i64,
}

/// The handle the API and the dashboard use.
#[derive(Clone)]
pub struct Runtime {
    cmds: mpsc::UnboundedSender<Cmd>,
    /// Single submissions on their way to [`write_submissions`].
    submits: mpsc::UnboundedSender<Submission>,
    shared: Arc<RwLock<Shared>>,
    store: JobStore,
    backends: Registry,
    settings: Settings,
    config: Arc<ConfigService>,
    packages: Arc<Packages>,
    metrics: Arc<Metrics>,
    /// The leader lease, on PostgreSQL replicas.
    lease: Option<Arc<Lease>>,
}

/// Who runs the admission loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leadership {
    /// The leading replica's name.
    pub leader: String,
    /// Whether it is this process.
    pub this: bool,
    /// Whether this is one of several replicas (PostgreSQL), not the only server.
    pub replicated: bool,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("backends", &self.backends).finish_non_exhaustive()
    }
}


/// The nodes the backends know (drained ones included: what submissions are checked
/// against), for the config checks.
fn node_source(shared: Arc<RwLock<Shared>>) -> crate::services::config::NodeSource {
    Arc::new(move || {
        let known = shared.read().unwrap_or_else(|e| e.into_inner()).known.clone();
        known
            .iter()
            .map(|n| app::config::NodeInfo {
                name: n.id.to_string(),
                labels: n.labels.clone(),
                capacity: n.capacity.iter().map(|(k, v)| (k.to_string(), v.as_f64())).collect(),
            })
            .collect()
    })
}

impl Runtime {
    /// Recovers unfinished jobs and starts the admission loop on the current tokio runtime;
    /// with `replica`, starts the replica driver, which runs the loop while this replica
    /// holds the leader lease.
    #[allow(clippy::too_many_arguments)]
    pub async fn start(
        store: JobStore,
        config: Arc<ConfigService>,
        backends: Registry,
        exits: mpsc::UnboundedReceiver<backend::Exit>,
        settings: Settings,
        packages: Arc<Packages>,
        metrics: Arc<Metrics>,
        replica: Option<ReplicaOptions>,
    ) -> anyhow::Result<Runtime> {
        let shared = Arc::new(RwLock::new(Shared::of(&backends)));
        config.know_nodes(node_source(shared.clone()));
        let (tx, rx) = mpsc::unbounded_channel();
        let lease = match replica {
            // One of several replicas: the loop runs while this one holds the lease.
            Some(r) => {
                // Its own connections: a busy API must not hold up the renewals.
                let lease_pool = sqlx::any::AnyPoolOptions::new().max_connections(2).acquire_timeout(r.lease / 3).connect_lazy(&r.url)?;
                let lease = Arc::new(Lease::new(lease_pool, r.name, r.lease));
                let parts = replicas::Parts {
                    lease: lease.clone(),
                    pool: store.pool().clone(),
                    store: store.clone(),
                    backends: backends.clone(),
                    settings: settings.clone(),
                    shared: shared.clone(),
                    config: config.clone(),
                    metrics: metrics.clone(),
                    awaited: Default::default(),
                    stale: Default::default(),
                };
                replicas::start(parts, r.url, tx.clone(), rx, exits);
                Some(lease)
            }
            None => {
                let mut lp = Loop::new(store.clone(), backends.clone(), settings.clone(), shared.clone(), config.subscribe(), rx, exits, Arc::new(SystemClock));
                lp.metrics = metrics.clone();
                lp.recover().await?;
                tokio::spawn(async move { drop(lp.run().await) });
                None
            }
        };
        let (submits, submit_rx) = mpsc::unbounded_channel();
        tokio::spawn(write_submissions(store.clone(), tx.clone(), submit_rx));
        Ok(Runtime { cmds: tx, submits, shared, store, backends, settings, config, packages, metrics, lease })
    }

    /// The leader lease, when this is one of several replicas on PostgreSQL.
    pub fn lease(&self) -> Option<&Arc<Lease>> {
        self.lease.as_ref()
    }

    /// Which replica leads (runs the admission loop): this process when it is the only one,
    /// else the lease's holder (`None` while no replica holds it).
    pub async fn leader(&self) -> Result<Option<Leadership>, RuntimeError> {
        let Some(lease) = &self.lease else { return Ok(Some(Leadership { leader: "this server".into(), this: true, replicated: false })) };
        let leader = lease.leader().await.map_err(|e| RuntimeError::Store(e.to_string()))?;
        Ok(leader.map(|name| Leadership { this: lease.is_leading() && name == lease.name, leader: name, replicated: true }))
    }

    pub fn store(&self) -> &JobStore {
        &self.store
    }

    /// The config in force (as the last apply published it) and the nodes.
    fn shared(&self) -> (Arc<Compiled>, i64, Arc<Vec<Node>>) {
        let active = self.config.active();
        let s = self.shared.read().unwrap_or_else(|e| e.into_inner());
        (active.compiled.clone(), active.version, s.nodes.clone())
    }

    /// Every node the backends' configurations have, absent ones included (what a
    /// submission is checked against, see [`crate::backends::Backend::known_nodes`]).
    fn known_nodes(&self) -> Arc<Vec<Node>> {
        self.shared.read().unwrap_or_else(|e| e.into_inner()).known.clone()
    }

    /// The nodes every backend reported at the last snapshot (what a preview replays on).
    pub fn nodes_now(&self) -> Arc<Vec<Node>> {
        self.shared().2
    }

    /// The backends' in-flight caps (what a preview replays with).
    pub fn limits(&self) -> Vec<InFlightLimit> {
        self.backends.limits()
    }

    /// Checks, routes and stores one job; a refusal is stored too and returned as
    /// [`RuntimeError::Rejected`].
    pub async fn submit(&self, mut req: JobRequest, caller: &Caller) -> Result<Job, RuntimeError> {
        caller.require(Role::Submitter, "submitting jobs")?;
        check_workdir(&self.settings, &req)?;
        self.resolve_workflow(&mut req, caller).await?;
        if let Some(id) = &req.submission_id {
            // The common case; the unique index catches a race between two such submissions.
            if self.store.submission_taken(id).await? {
                return Err(store::JobStoreError::DuplicateSubmission(id.clone()).into());
            }
        }
        let (row, refused) = self.prepare(req, &caller.user, None)?;
        if row.state != JobState::Rejected {
            self.check_runtime_env(&row)?;
            self.packages.require(&row.spec).await?;
        }
        let job = row.to_job();
        let (reply, stored) = oneshot::channel();
        self.submits.send(Submission { row, reply }).map_err(|_| RuntimeError::Stopped)?;
        stored.await.map_err(|_| RuntimeError::Stopped)??;
        if job.state == JobState::Rejected {
            self.count_rejections(&[(job.queue.as_deref(), refused)]);
            return Err(RuntimeError::Rejected(Box::new(job)));
        }
        Ok(job)
    }

    /// Stores a stage and its jobs at once; jobs refused at submit are listed, the others
    /// wait in their queues with the stage's concurrency limit.
    pub async fn submit_stage(&self, req: StageRequest, caller: &Caller) -> Result<StageCreated, RuntimeError> {
        caller.require(Role::Submitter, "submitting stages")?;
        let submitter = caller.user.as_str();
        if req.name.trim().is_empty() {
            return Err(RuntimeError::Invalid("name: must not be empty".into()));
        }
        if req.name.contains('\0') {
            return Err(RuntimeError::Invalid("name: must not contain a NUL character".into()));
        }
        if req.jobs.is_empty() {
            return Err(RuntimeError::Invalid("jobs: a stage needs at least one job".into()));
        }
        if req.jobs.len() > 10_000 {
            return Err(RuntimeError::Invalid(format!("jobs: at most 10000 per stage, got {}", req.jobs.len())));
        }
        let p = &req.parallelism;
        if p.retry_max.is_some_and(|r| r > request::MAX_RETRIES) {
            return Err(RuntimeError::Invalid(format!("parallelism.retry_max: at most {}", request::MAX_RETRIES)));
        }
        let stage_id = new_id("s");
        let mut rows = Vec::with_capacity(req.jobs.len());
        let mut rejected = Vec::new();
        let mut refusals = Vec::new();
        for (i, mut job) in req.jobs.into_iter().enumerate() {
            if let Some(r) = p.retry_max {
                job.max_retries = r;
            }
            if let Some(t) = p.timeout_sec {
                job.timeout_s = t;
            }
            let prefix = |e: RuntimeError| match e {
                RuntimeError::Invalid(m) => RuntimeError::Invalid(format!("jobs[{i}].{m}")),
                other => other,
            };
            if job.submission_id.is_some() {
                return Err(prefix(RuntimeError::Invalid("submission_id: not taken in a stage (its jobs are named by the stage)".into())));
            }
            self.resolve_workflow(&mut job, caller).await.map_err(prefix)?;
            let (row, refused) = check_workdir(&self.settings, &job).and_then(|()| self.prepare(job, submitter, Some(&stage_id))).map_err(prefix)?;
            refusals.push(refused);
            self.check_runtime_env(&row).map_err(prefix)?;
            self.packages.require(&row.spec).await.map_err(|e| prefix(e.into()))?;
            if row.state == JobState::Rejected {
                rejected.push(StageRejection { index: i, job_id: row.id.clone(), reason: row.reason.clone().unwrap_or_default() });
            }
            rows.push(row);
        }
        let events: Vec<NewEvent> = rows.iter().map(submit_event).collect();
        let at = now_us();
        self.store.insert(Some((&stage_id, req.name.trim(), submitter, at, &req.parallelism)), &rows, &events).await?;
        let counted: Vec<(Option<&str>, Option<&'static str>)> = rows.iter().zip(&refusals).map(|(r, c)| (r.queue.as_deref(), *c)).collect();
        self.count_rejections(&counted);
        let job_ids = rows.iter().map(|r| r.id.clone()).collect();
        let pending: Vec<JobRow> = rows.into_iter().filter(|r| r.state == JobState::Pending).collect();
        self.cmds.send(Cmd::Stage { id: stage_id.clone(), max_concurrent: req.parallelism.max_concurrent }).map_err(|_| RuntimeError::Stopped)?;
        self.cmds.send(Cmd::Enqueue(pending)).map_err(|_| RuntimeError::Stopped)?;
        Ok(StageCreated { stage_id, job_ids, rejected })
    }

    /// Refuses a job whose `runtime_env` no backend it could run on can honour (`pip` when
    /// its queue's flavors select only local nodes), with that backend's reason.
    fn check_runtime_env(&self, row: &JobRow) -> Result<(), RuntimeError> {
        let env = &row.spec.runtime_env;
        let plain = env.other.is_empty() && !env.working_dir.as_deref().is_some_and(app::request::is_uri);
        let (Some(queue), false) = (&row.queue, plain || row.state == JobState::Rejected) else { return Ok(()) };
        let (compiled, _, _) = self.shared();
        let nodes = self.known_nodes();
        let request = request::check(&row.spec).map_err(RuntimeError::Invalid)?;
        let Ok(holding) = engine::nodes_that_hold(&compiled, &nodes, queue, &request) else { return Ok(()) };
        let mut backends: Vec<&str> = holding.iter().map(|n| &*n.backend).collect();
        backends.sort_unstable();
        backends.dedup();
        // `None` as soon as one of them takes it.
        let refusals: Option<Vec<String>> = backends.iter().map(|b| self.backends.get(b).and_then(|b| b.refuses(env))).collect();
        match refusals.and_then(|r| r.into_iter().next()) {
            Some(why) => Err(RuntimeError::Invalid(format!("{why}; no node of queue {queue}'s flavors offers another backend"))),
            None => Ok(()),
        }
    }

    /// A job row ready to store under the config in force (see [`prepare`]), and the
    /// rejection's code when it is refused.
    fn prepare(&self, req: JobRequest, submitter: &str, stage: Option<&str>) -> Result<(JobRow, Option<&'static str>), RuntimeError> {
        let (compiled, version, _) = self.shared();
        prepare_coded(&compiled, version, &self.known_nodes(), req, submitter, stage, now_us())
    }

    /// Counts stored refusals by queue and reason code (`None` code: not refused).
    fn count_rejections(&self, refusals: &[(Option<&str>, Option<&'static str>)]) {
        for (queue, code) in refusals {
            if let Some(code) = code {
                self.metrics.rejections.with_label_values(&[queue.unwrap_or(""), code]).inc();
            }
        }
    }

    /// The series Berth exports, with the scrape-time gauges refreshed from the loop's state.
    pub async fn metrics_text(&self) -> Result<String, RuntimeError> {
        let _one = self.metrics.scrape.lock().await;
        let m = self.metrics.clone();
        self.ask(move |s| observe_gauges(s, &m)).await?;
        Ok(self.metrics.encode())
    }

    /// The registry every layer records into.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    async fn ask<T: Send + 'static>(&self, f: impl FnOnce(&State) -> T + Send + 'static) -> Result<T, RuntimeError> {
        let (tx, rx) = oneshot::channel();
        let cmd = Cmd::Inspect(Box::new(move |state| {
            let _ = tx.send(f(state));
        }));
        self.cmds.send(cmd).map_err(|_| RuntimeError::Stopped)?;
        rx.await.map_err(|_| RuntimeError::Stopped)
    }

    async fn call(&self, make: impl FnOnce(oneshot::Sender<Result<JobRow, LoopError>>) -> Cmd) -> Result<Job, RuntimeError> {
        let (tx, rx) = oneshot::channel();
        self.cmds.send(make(tx)).map_err(|_| RuntimeError::Stopped)?;
        Ok(rx.await.map_err(|_| RuntimeError::Stopped)??.to_job())
    }

    /// Cancels a pending or running job (running: its process tree is stopped), named by its
    /// id or submission id. Only its submitter or an admin may.
    pub async fn cancel(&self, reference: &str, caller: &Caller) -> Result<Job, RuntimeError> {
        let row = self.store.find(reference, false).await?;
        let (id, owner) = (row.id, row.submitter);
        caller.require_owner(&owner, "cancelling a job")?;
        let by = caller.user.clone();
        let job = match self.call(|reply| Cmd::Cancel { id: id.clone(), by, reply }).await {
            Err(RuntimeError::NotLive(_)) => Err(self.not_live(&id).await),
            other => other,
        }?;
        let detail = format!("cancelled {} ({}) of {owner}", job.name, job.id);
        self.audit(AuditRecord { actor: &caller.user, action: "job.cancel", target: &job.id, detail }).await;
        Ok(job)
    }

    /// Changes a job's priority, within the bounds of the rule that routed it. Only its
    /// submitter or an admin may.
    pub async fn set_priority(&self, reference: &str, priority: i64, caller: &Caller) -> Result<Job, RuntimeError> {
        let before = self.store.find(reference, false).await?;
        caller.require_owner(&before.submitter, "changing a job's priority")?;
        let id = before.id.clone();
        let by = caller.user.clone();
        let job = match self.call(|reply| Cmd::Priority { id: id.clone(), priority, by, reply }).await {
            Err(RuntimeError::NotLive(_)) => Err(self.not_live(&id).await),
            other => other,
        }?;
        let detail = format!("priority of {} ({}) of {}: {} → {}", job.name, job.id, before.submitter, before.priority, job.priority);
        self.audit(AuditRecord { actor: &caller.user, action: "job.priority", target: &job.id, detail }).await;
        Ok(job)
    }

    /// Writes an audit entry for a change the loop has committed. The loop's transaction
    /// cannot carry it (the loop batches many callers' changes), so it follows right after;
    /// a failure is logged, never turned into an error for a change that did happen.
    async fn audit(&self, record: AuditRecord<'_>) {
        let written = async {
            let mut conn = self.store.pool().acquire().await?;
            crate::store::auth::write_audit(&mut conn, &record).await
        };
        if let Err(e) = written.await {
            tracing::error!(error = %e, action = record.action, target = record.target, "cannot write the audit log");
        }
    }

    /// 404 when the job never existed, 409 when it has ended.
    async fn not_live(&self, id: &str) -> RuntimeError {
        match self.store.get(id).await {
            Ok(_) => RuntimeError::NotLive(id.to_string()),
            Err(e) => e.into(),
        }
    }

    /// Takes an ended job out of Ray's API's view (Ray's `DELETE /api/jobs/{id}`); Berth
    /// keeps it in its own history. Only its submitter or an admin may. False when the job
    /// was already deleted so.
    pub async fn delete_from_ray_view(&self, reference: &str, caller: &Caller) -> Result<bool, RuntimeError> {
        let row = self.store.find(reference, true).await?;
        caller.require_owner(&row.submitter, "deleting a job")?;
        if !row.state.is_terminal() {
            return Err(RuntimeError::Invalid(format!("job {reference} is {}, not finished: stop it first", row.state)));
        }
        Ok(self.store.delete_from_ray_view(&row.id, now_us()).await?)
    }
}
