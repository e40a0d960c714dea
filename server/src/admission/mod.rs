//! The admission loop: the one task that owns the live jobs and changes their state.
//!
//! It wakes on a command (submit, cancel, priority change, an inspection), a backend's exit
//! report, a config apply, or the tick (timeouts, retry backoff, capacity, history samples).
//! A cycle that has nothing new to decide does not call the engine and writes nothing.
//!
//! A cycle: fold in exits and commands → stop jobs past their timeout → if anything changed,
//! snapshot → [`engine::schedule`] → plan; then
//! 1. **decide**: one transaction with every state change and event so far (victims back to
//!    `pending` with their original enqueue time, admissions as `admitted`): written before
//!    any side effect, so a crash never leaves a process the database does not know of;
//! 2. **act**: stop victims, cancelled and timed-out runs, then hand the admissions to a
//!    start task and go on (a start makes files and spawns: the loop does not wait for it,
//!    so the next exit is served while this start runs);
//! 3. **record**: each start's result comes back like an exit and rides with a later
//!    cycle's transaction (`running`, handle) — or, when the job was cancelled or preempted
//!    meanwhile, its run is stopped at once.
//!
//! A cycle writes at once only what something waits for: admissions (before their starts),
//! stops, replies. Anything else (starts, ends of runs) rides with the next transaction or
//! is flushed within [`FLUSH_DELAY`]: a crash before that is safe, recovery asks the backend.
//!
//! One exception to step 1: a backend that records each run as it starts it (the local
//! backend's journal, [`Backend::records_starts`]) gets its admissions at once, when the
//! cycle stops nothing, and they ride with the next transaction too. A slot that frees is
//! then refilled without waiting for a write. A crash in between leaves a run whose job the
//! database lists as pending, and recovery finds it in the backend's records.
//!
//! After a restart, [`Loop::recover`] reloads every unfinished job and asks its backend to
//! adopt `admitted` and `running` ones: alive → running again, ended → its outcome, never
//! started → back to pending (no retry consumed). A run a recording backend began for a job
//! still stored as pending counts as that job's run if it ended; if it is still going it is
//! stopped (no admission accounts for it) and the job waits for its turn again.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use app::config::{MatchExpression, Operator};
use app::jobs::{FlavorUse, JobState};
use tokio::sync::{mpsc, oneshot, watch};

use crate::backends::{Adopted, Backend, BackendError, Exit, Outcome, Registry, RunId, StartSpec};
use crate::clock::now_us;
use crate::services::jobs::{RuntimeError, Settings, Shared};
use crate::store::jobs::{JobRow, JobStore, NewEvent, NewSample};
use crate::engine::policy::QueueingStrategy;
use crate::engine::quick::{fifo_rank, Cut, FifoRank};
use crate::engine::{self, Compiled, FlavorAssignment, Milli, Name, Node, PendingJob, Resources, RunningJob, Snapshot};
use crate::services::config::{ActiveConfig, ConfigService};

/// A job the loop holds in memory: its row plus the engine's view of it.
#[derive(Debug, Clone)]
pub struct Live {
    pub row: JobRow,
    pub key: Name,
    pub queue: Name,
    pub request: Resources,
    pub flavors: Vec<FlavorAssignment>,
    pub node: Option<Name>,
}

impl Live {
    /// A live job from its stored row; `request` is recomputed from the spec, and the queue's
    /// name is the config's copy when it has that queue.
    pub fn from_row(row: JobRow, compiled: &Compiled) -> Live {
        let request = crate::services::request::check(&row.spec).unwrap_or_default();
        let flavors = row
            .flavors
            .iter()
            .map(|f| FlavorAssignment { flavor: f.flavor.as_str().into(), resources: f.resources.iter().map(|r| r.as_str().into()).collect() })
            .collect();
        Live {
            key: row.id.as_str().into(),
            queue: {
                let q = row.queue.as_deref().unwrap_or("");
                compiled.queue_name(q).cloned().unwrap_or_else(|| q.into())
            },
            node: row.node.as_deref().map(Into::into),
            request,
            flavors,
            row,
        }
    }

    fn run(&self) -> RunId {
        RunId { job: self.key.clone(), run: self.row.runs }
    }

    fn clear_placement(&mut self) {
        self.flavors.clear();
        self.node = None;
        self.row.flavors.clear();
        self.row.node = None;
        self.row.backend = None;
        self.row.handle = None;
    }
}

/// Asks the loop to do something; replies come after the change is committed.
pub enum Cmd {
    /// New pending jobs, already stored.
    Enqueue(Vec<JobRow>),
    /// A new stage's concurrency limit.
    Stage { id: String, max_concurrent: u32 },
    Cancel { id: String, by: String, reply: Reply },
    Priority { id: String, priority: i64, by: String, reply: Reply },
    /// Runs a read-only closure over the live state (queue views, positions).
    Inspect(Box<dyn FnOnce(&State) + Send>),
}

/// The live state, as inspections see it.
pub struct State {
    pub jobs: HashMap<Name, Live>,
    /// Position and reason of every waiting job, from the last cycle.
    pub waiting: Waiting,
    pub compiled: Arc<Compiled>,
    pub config_version: i64,
    pub nodes: Vec<Node>,
    stages: HashMap<String, u32>,
}

/// Position (0: none) and reason of each job the last full cycle left waiting (quick cycles
/// leave it as it is: see [`EXPLAIN_EVERY`]). Read only by inspections, so the index by job
/// is built on the first read after a cycle, not by the cycle. Entries of jobs that have
/// left `pending` since may remain: readers ask only about pending jobs.
#[derive(Default)]
pub struct Waiting {
    list: Vec<(Name, u64, Arc<str>)>,
    index: std::sync::OnceLock<HashMap<Name, usize>>,
}

impl Waiting {
    fn new(list: Vec<(Name, u64, Arc<str>)>) -> Waiting {
        Waiting { list, index: std::sync::OnceLock::new() }
    }

    /// The position and reason of one job.
    pub fn get(&self, job: &str) -> Option<(u64, Arc<str>)> {
        let index = self.index.get_or_init(|| self.list.iter().enumerate().map(|(i, w)| (w.0.clone(), i)).collect());
        let (_, pos, why) = &self.list[*index.get(job)?];
        Some((*pos, why.clone()))
    }
}

/// The loop task's own data.
pub struct Loop {
    pub(crate) state: State,
    pub(crate) store: JobStore,
    pub(crate) backends: Registry,
    pub(crate) settings: Settings,
    pub(crate) shared: Arc<RwLock<Shared>>,
    pub(crate) cmds: mpsc::UnboundedReceiver<Cmd>,
    pub(crate) exits: mpsc::UnboundedReceiver<Exit>,
    pub(crate) config_rx: watch::Receiver<Arc<ActiveConfig>>,
    /// Results of the start tasks (see [`Loop::launch`]).
    started_tx: mpsc::UnboundedSender<Started>,
    started_rx: mpsc::UnboundedReceiver<Started>,
    /// Admitted jobs whose start result has not come back yet.
    starting: HashSet<Name>,
    /// Exits that overtook their start's result: applied right after it.
    early_exits: HashMap<Name, Exit>,
    dirty: bool,
    last_sample: Option<(Instant, UsageCells)>,
    last_prune: Option<Instant>,
    /// Changes not yet written (starts, ends of runs): they ride with the next cycle's
    /// transaction, or are flushed at `flush_at`. A crash before that is safe: the job is
    /// stored as admitted or running and recovery adopts the run or reads its outcome.
    carry: Batch,
    flush_at: Option<tokio::time::Instant>,
    /// Some job changed since the last sample (else usage is not recomputed before the
    /// periodic sample is due: an idle loop stays cheap with many pending jobs).
    usage_dirty: bool,
    /// Some pending job may be routed under an older config version.
    reroute_needed: bool,
    /// Highest use per cell since the last sample was written.
    peak: UsageCells,
    /// Earliest time a running job may pass its timeout (µs); the tick scans only then.
    next_deadline: Option<i64>,
    /// Earliest end of a retry backoff (µs).
    next_retry: Option<i64>,
    /// Backends that said they are unavailable: consecutive failures, until when (µs)
    /// starts on them are not even tried, and why.
    down: HashMap<String, (u32, i64, String)>,
    /// Jobs waiting for an unavailable backend (their backoff is not a retry).
    backend_waits: HashSet<Name>,
    /// A commit failed for good: the database may list runs as unfinished that this loop
    /// dropped, so backends are never told to forget ended runs again (see
    /// [`Loop::forget_ended`]).
    diverged: bool,
    last_forget: Option<Instant>,
    /// Something other than the start or end of a run changed: the next decision offers
    /// every pending job (a full cycle). Runs starting and ending allow quick cycles.
    explain_due: bool,
    /// When the last full cycle ran.
    explained_at: Option<Instant>,
    /// When a full cycle refreshes what quick cycles left stale.
    explain_at: Option<tokio::time::Instant>,
    /// A flush being written while the loop goes on (see [`Loop::commit_in_background`]).
    committing: Option<tokio::task::JoinHandle<Committed>>,
}

/// What a background commit wrote, and how it went.
struct Committed {
    /// Jobs it wrote in a final state: they leave memory once it lands.
    ended: Vec<Name>,
    ok: bool,
}

/// Longest wait before trying an unavailable backend again.
const BACKEND_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Least time between two [`Loop::forget_ended`] passes.
const FORGET_EVERY: Duration = Duration::from_secs(5);

/// Longest a change nothing waits for stays unwritten.
const FLUSH_DELAY: Duration = Duration::from_millis(20);

/// Most jobs per fifo queue a quick cycle offers the engine (see [`engine::quick`]): enough
/// that a cycle rarely admits them all, few enough to decide on in microseconds.
const QUICK_OFFER: usize = 32;

/// Longest a waiting job's position and reason lag behind, while quick cycles run.
const EXPLAIN_EVERY: Duration = Duration::from_millis(250);

/// Usage in milli-units per (queue, flavor, resource).
type UsageCells = BTreeMap<(Name, Name, Name), i64>;

/// Where the answer to a cancel or priority change goes.
type Reply = oneshot::Sender<Result<JobRow, RuntimeError>>;

/// What a start task reports for one run.
struct Started {
    run: RunId,
    backend: String,
    result: Result<String, BackendError>,
    /// When the backend's start returned (µs).
    at_us: i64,
}

/// What one cycle changed, written together.
#[derive(Default)]
struct Batch {
    touched: Vec<Name>,
    seen: HashSet<Name>,
    /// Jobs whose spec (requested priority) changed.
    spec_changed: HashSet<Name>,
    events: Vec<NewEvent>,
    stops: Vec<(Name, RunId, String)>,
    replies: Vec<(Reply, Result<JobRow, RuntimeError>)>,
}

impl Batch {
    fn is_empty(&self) -> bool {
        self.touched.is_empty() && self.events.is_empty() && self.replies.is_empty() && self.stops.is_empty()
    }

    fn touch(&mut self, id: &Name) {
        if self.seen.insert(id.clone()) {
            self.touched.push(id.clone());
        }
    }
}

impl Loop {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        store: JobStore,
        backends: Registry,
        settings: Settings,
        shared: Arc<RwLock<Shared>>,
        config: Arc<ConfigService>,
        cmds: mpsc::UnboundedReceiver<Cmd>,
        exits: mpsc::UnboundedReceiver<Exit>,
    ) -> Loop {
        let nodes = shared.read().unwrap_or_else(|e| e.into_inner()).nodes.as_ref().clone();
        let mut config_rx = config.subscribe();
        let active = config_rx.borrow_and_update().clone();
        let (compiled, config_version) = (active.compiled.clone(), active.version);
        let (started_tx, started_rx) = mpsc::unbounded_channel();
        Loop {
            state: State { jobs: HashMap::new(), waiting: Waiting::default(), compiled, config_version, nodes, stages: HashMap::new() },
            store,
            backends,
            settings,
            shared,
            cmds,
            exits,
            config_rx,
            started_tx,
            started_rx,
            starting: HashSet::new(),
            early_exits: HashMap::new(),
            dirty: true,
            last_sample: None,
            last_prune: None,
            carry: Batch::default(),
            flush_at: None,
            usage_dirty: true,
            reroute_needed: true,
            peak: UsageCells::new(),
            // Scan once at the first tick: recovered jobs may have timeouts and retries.
            next_deadline: Some(0),
            next_retry: Some(0),
            down: HashMap::new(),
            backend_waits: HashSet::new(),
            diverged: false,
            last_forget: None,
            explain_due: true,
            explained_at: None,
            explain_at: None,
            committing: None,
        }
    }

    /// Reloads unfinished jobs and re-attaches running ones to their backends.
    pub(crate) async fn recover(&mut self) -> Result<(), RuntimeError> {
        let rows = self.store.load_unfinished().await?;
        let now = now_us();
        let mut batch = Batch::default();
        let mut stage_ids: HashSet<String> = HashSet::new();
        for row in rows {
            if let Some(s) = &row.stage_id {
                stage_ids.insert(s.clone());
            }
            let live = Live::from_row(row, &self.state.compiled);
            let key = live.key.clone();
            let holding = live.row.state.holds_quota();
            self.state.jobs.insert(key.clone(), live);
            if !holding {
                continue;
            }
            let (backend_name, handle, spec) = {
                let l = &self.state.jobs[&key];
                (l.row.backend.clone().unwrap_or_default(), l.row.handle.clone(), self.start_spec(l))
            };
            let Some(backend) = self.backends.get(&backend_name).cloned() else {
                let reason = format!("backend `{backend_name}` is not configured any more");
                self.end_run(&key, Outcome::Failed(reason), now, &mut batch);
                continue;
            };
            match backend.adopt(spec, handle).await {
                Adopted::Running { handle } => {
                    let live = self.state.jobs.get_mut(&key).expect("inserted above");
                    if live.row.state == JobState::Admitted {
                        live.row.state = JobState::Running;
                        live.row.started_at_us.get_or_insert(now);
                    }
                    live.row.handle = Some(handle);
                    batch.touch(&key);
                }
                Adopted::Ended(outcome) => self.end_run(&key, outcome, now, &mut batch),
                Adopted::NeverStarted => {
                    let live = self.state.jobs.get_mut(&key).expect("inserted above");
                    live.row.state = JobState::Pending;
                    live.row.runs = (live.row.runs - 1).max(0);
                    live.row.admitted_at_us = None;
                    live.clear_placement();
                    batch.touch(&key);
                    batch.events.push(job_event(now, "requeued", live, "the server stopped before starting it; back in its queue".into()));
                }
            }
        }
        let recording: Vec<Arc<dyn Backend>> = self.backends.iter().filter(|b| b.records_starts()).cloned().collect();
        for backend in recording {
            let mut begun = backend.begun_runs();
            begun.sort(); // a job's runs in the order they began
            for run in begun {
                let unrecorded = self.state.jobs.get(&run.job).is_some_and(|l| l.row.state == JobState::Pending && run.run > l.row.runs);
                if unrecorded {
                    self.recover_unrecorded(&backend, run, now, &mut batch).await;
                }
            }
        }
        for id in stage_ids {
            if let Ok(Some((status, _))) = self.store.stage(&id).await {
                self.state.stages.insert(id, status.parallelism.max_concurrent);
            }
        }
        if self.commit(now, &mut batch).await {
            self.forget_ended();
        }
        tracing::info!(jobs = self.state.jobs.len(), "admission loop recovered its jobs");
        Ok(())
    }

    /// A run its backend started while the database still lists its job as pending: the
    /// server stopped before the admission was written. A run that ended counts as the job's
    /// run; one still going is stopped (no admission accounts for what it holds) and the job
    /// waits for its turn again, with no retry spent. Either way the next run gets a new id.
    async fn recover_unrecorded(&mut self, backend: &Arc<dyn Backend>, run: RunId, now: i64, batch: &mut Batch) {
        let key = run.job.clone();
        let Some(live) = self.state.jobs.get_mut(&key) else { return };
        live.row.runs = run.run;
        batch.touch(&key);
        let spec = self.start_spec(&self.state.jobs[&key]);
        match backend.adopt(spec, None).await {
            Adopted::NeverStarted => {}
            Adopted::Running { handle } => {
                if let Err(e) = backend.stop(run.clone(), handle).await {
                    tracing::warn!(run = %run.key(), error = %e, "cannot stop a run the database missed");
                }
                let live = &self.state.jobs[&key];
                let why = format!("run {} started as the server stopped, before its admission was written: stopped; back in its queue", run.key());
                batch.events.push(job_event(now, "requeued", live, why));
            }
            Adopted::Ended(outcome) => {
                let live = self.state.jobs.get_mut(&key).expect("checked above");
                live.row.state = JobState::Running;
                live.row.backend = Some(backend.name().to_string());
                live.row.node = backend.nodes().first().map(|n| n.id.to_string());
                self.end_run(&key, outcome, now, batch);
            }
        }
    }

    /// Runs until the command channel closes (the server shuts down).
    pub(crate) async fn run(mut self) {
        let mut tick = tokio::time::interval(self.settings.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut exits = Vec::new();
        let mut cmds = Vec::new();
        let mut started = Vec::new();
        loop {
            let mut ticked = false;
            tokio::select! {
                cmd = self.cmds.recv() => match cmd {
                    Some(c) => cmds.push(c),
                    None => {
                        // Shutting down: write the starts still carried.
                        let mut carry = std::mem::take(&mut self.carry);
                        let _ = self.commit(now_us(), &mut carry).await; // after any background one
                        return;
                    }
                },
                Some(e) = self.exits.recv() => exits.push(e),
                Some(s) = self.started_rx.recv() => started.push(s),
                Ok(()) = self.config_rx.changed() => self.reload_config(),
                _ = tick.tick() => ticked = true,
                _ = tokio::time::sleep_until(self.flush_at.unwrap_or_else(tokio::time::Instant::now)), if self.flush_at.is_some() => {}
                done = async { self.committing.as_mut().expect("checked").await }, if self.committing.is_some() => {
                    self.committing = None;
                    // Memory and database agree when nothing was carried since.
                    let agree = self.carry.is_empty();
                    self.committed(done, agree);
                    continue;
                }
                _ = tokio::time::sleep_until(self.explain_at.unwrap_or_else(tokio::time::Instant::now)), if self.explain_at.is_some() => {
                    self.explain_at = None;
                    self.explain_due = true;
                    self.dirty = true;
                }
            }
            // Take everything already waiting, so one cycle serves a burst.
            while let Ok(c) = self.cmds.try_recv() {
                cmds.push(c);
            }
            while let Ok(e) = self.exits.try_recv() {
                exits.push(e);
            }
            while let Ok(s) = self.started_rx.try_recv() {
                started.push(s);
            }
            // A command sent after an apply returned is decided under that config, whichever
            // branch the select took first.
            if self.config_rx.has_changed().unwrap_or(false) {
                self.reload_config();
            }
            self.cycle(std::mem::take(&mut cmds), std::mem::take(&mut started), std::mem::take(&mut exits), ticked).await;
        }
    }

    /// Takes the config the last apply put in force (compiled by the config service).
    fn reload_config(&mut self) {
        let active = self.config_rx.borrow_and_update().clone();
        if active.version == self.state.config_version && Arc::ptr_eq(&active.compiled, &self.state.compiled) {
            return;
        }
        self.state.compiled = active.compiled.clone();
        self.state.config_version = active.version;
        self.dirty = true;
        self.reroute_needed = true;
        self.usage_dirty = true;
        // New quotas: sample at once.
        self.last_sample = None;
    }

    fn publish(&self) {
        self.shared.write().unwrap_or_else(|e| e.into_inner()).nodes = Arc::new(self.state.nodes.clone());
    }

    async fn cycle(&mut self, cmds: Vec<Cmd>, started: Vec<Started>, exits: Vec<Exit>, ticked: bool) {
        let t_cycle = Instant::now();
        let now = now_us();
        let mut batch = std::mem::take(&mut self.carry);
        // Starts before exits: a run's start is recorded before its end.
        for s in started {
            self.on_started(s, &mut batch);
        }
        for exit in exits {
            let key: Name = exit.run.job.clone();
            let current = self.state.jobs.get(&key).is_some_and(|l| l.row.state.holds_quota() && l.row.runs == exit.run.run);
            if current && self.starting.contains(&key) {
                self.early_exits.insert(key, exit);
            } else if current {
                self.end_run(&key, exit.outcome, now, &mut batch);
            }
        }
        // A cancel, a priority change or a config apply shows in every position at once: a
        // full cycle. New jobs need none (those a quick cycle leaves out get their position
        // within EXPLAIN_EVERY), so a burst of submissions stays cheap. Quick cycles are
        // exact whatever their cause (see `engine::quick`).
        self.explain_due |= self.reroute_needed || cmds.iter().any(|c| matches!(c, Cmd::Cancel { .. } | Cmd::Priority { .. }));
        for cmd in cmds {
            self.command(cmd, now, &mut batch);
        }
        if ticked {
            self.on_tick(now, &mut batch);
        }
        self.reroute_stale(now, &mut batch);
        let mut starts = Vec::new();
        if self.dirty {
            self.dirty = false;
            starts = self.decide(now, &mut batch);
        }
        if batch.stops.is_empty() {
            // A backend that records its starts itself gets them at once, and their admission
            // rides with a later commit: recovery finds a run the database missed in the
            // backend's records (see `recover`). Victims are always stopped first.
            let (first, rest): (Vec<Name>, Vec<Name>) = starts.into_iter().partition(|k| self.records_starts(k));
            self.launch(first, &mut batch);
            starts = rest;
        }
        let due = self.flush_at.is_some_and(|t| t <= tokio::time::Instant::now());
        if starts.is_empty() && batch.stops.is_empty() && batch.replies.is_empty() && due && self.committing.is_none() {
            // Nothing waits for this write: the loop goes on while it is made.
            self.commit_in_background(now, &mut batch);
            self.flush_at = None;
        } else if !starts.is_empty() || !batch.stops.is_empty() || !batch.replies.is_empty() || due {
            let t_commit = Instant::now();
            if self.commit(now, &mut batch).await {
                self.forget_ended();
            }
            self.flush_at = None;
            tracing::debug!(commit_us = t_commit.elapsed().as_micros() as u64, starts = starts.len(), "cycle parts");
            for (backend, run, handle) in std::mem::take(&mut batch.stops) {
                if let Some(b) = self.backends.get(&backend) {
                    if let Err(e) = b.stop(run.clone(), handle).await {
                        tracing::warn!(run = %run.key(), error = %e, "stop failed");
                    }
                }
            }
            self.launch(starts, &mut batch);
        }
        if !batch.is_empty() && self.flush_at.is_none() {
            self.flush_at = Some(tokio::time::Instant::now() + FLUSH_DELAY);
        }
        self.carry = batch;
        self.sample(now).await;
        tracing::debug!(cycle_us = t_cycle.elapsed().as_micros() as u64, "cycle");
    }

    /// A config apply takes effect for waiting jobs: each pending job routed under another
    /// version is routed again (queue, rule and priority may change). One that no rule
    /// takes now keeps its old queue and waits, saying why.
    fn reroute_stale(&mut self, now: i64, batch: &mut Batch) {
        if !std::mem::take(&mut self.reroute_needed) {
            return;
        }
        let version = self.state.config_version;
        let compiled = self.state.compiled.clone();
        for live in self.state.jobs.values_mut() {
            if live.row.state != JobState::Pending || live.row.config_version == Some(version) {
                continue;
            }
            live.row.config_version = Some(version);
            batch.touch(&live.key);
            self.dirty = true;
            match engine::route(&compiled, &live.row.spec.labels, live.row.spec.priority) {
                Ok(r) => {
                    let (old_queue, old_priority) = (live.queue.clone(), live.row.priority);
                    live.queue = r.queue.clone();
                    live.row.queue = Some(r.queue.to_string());
                    live.row.rule_index = r.rule_index.map(|i| i as i64);
                    live.row.priority = r.priority;
                    if old_queue != r.queue || old_priority != r.priority {
                        let msg = format!("config version {version} routes it to {} with priority {}", r.queue, r.priority);
                        let mut e = job_event(now, "rerouted", live, msg);
                        e.config_version = Some(version);
                        batch.events.push(e);
                    }
                }
                Err(rejection) => {
                    let msg = format!("config version {version} no longer routes it ({}); it stays in {}", rejection.reason, live.queue);
                    let mut e = job_event(now, "rerouted", live, msg);
                    e.config_version = Some(version);
                    batch.events.push(e);
                }
            }
        }
    }

    fn command(&mut self, cmd: Cmd, now: i64, batch: &mut Batch) {
        match cmd {
            Cmd::Enqueue(rows) => {
                for row in rows {
                    self.reroute_needed |= row.config_version != Some(self.state.config_version);
                    let live = Live::from_row(row, &self.state.compiled);
                    self.state.jobs.insert(live.key.clone(), live);
                }
                self.dirty = true;
            }
            Cmd::Stage { id, max_concurrent } => {
                self.state.stages.insert(id, max_concurrent);
            }
            Cmd::Inspect(f) => f(&self.state),
            Cmd::Cancel { id, by, reply } => {
                let result = self.cancel(&id, &by, now, batch);
                batch.replies.push((reply, result));
            }
            Cmd::Priority { id, priority, by, reply } => {
                let result = self.set_priority(&id, priority, &by, now, batch);
                batch.replies.push((reply, result));
            }
        }
    }

    fn cancel(&mut self, id: &str, by: &str, now: i64, batch: &mut Batch) -> Result<JobRow, RuntimeError> {
        let Some(live) = self.state.jobs.get_mut(id) else { return Err(RuntimeError::NotLive(id.to_string())) };
        let key = live.key.clone();
        if live.row.state.holds_quota() {
            if let (Some(b), Some(h)) = (live.row.backend.clone(), live.row.handle.clone()) {
                batch.stops.push((b.as_str().into(), live.run(), h));
            }
        }
        live.row.state = JobState::Cancelled;
        live.row.finished_at_us = Some(now);
        live.row.reason = Some(format!("cancelled by {by}"));
        batch.events.push(job_event(now, "cancelled", live, format!("cancelled by {by}")));
        let row = live.row.clone();
        batch.touch(&key);
        self.dirty = true;
        Ok(row)
    }

    fn set_priority(&mut self, id: &str, priority: i64, by: &str, now: i64, batch: &mut Batch) -> Result<JobRow, RuntimeError> {
        let compiled = self.state.compiled.clone();
        let Some(live) = self.state.jobs.get_mut(id) else { return Err(RuntimeError::NotLive(id.to_string())) };
        let priority = bounded_priority(&compiled, live.row.rule_index, priority)?;
        let old = live.row.priority;
        live.row.priority = priority;
        live.row.spec.priority = Some(priority);
        let key = live.key.clone();
        batch.spec_changed.insert(key.clone());
        batch.events.push(job_event(now, "priority_changed", live, format!("priority {old} → {priority} by {by}")));
        let row = live.row.clone();
        batch.touch(&key);
        self.dirty = true;
        Ok(row)
    }

    fn on_tick(&mut self, now: i64, batch: &mut Batch) {
        // Timeouts: scan the jobs only once the earliest deadline has come.
        if self.next_deadline.is_some_and(|d| d <= now) {
            let mut next: Option<i64> = None;
            let mut expired: Vec<Name> = Vec::new();
            for l in self.state.jobs.values().filter(|l| l.row.state == JobState::Running && l.row.spec.timeout_s > 0) {
                let Some(deadline) = deadline_of(&l.row) else { continue };
                if deadline <= now {
                    expired.push(l.key.clone());
                } else {
                    next = Some(next.map_or(deadline, |n| n.min(deadline)));
                }
            }
            self.next_deadline = next;
            for key in expired {
                let live = self.state.jobs.get_mut(&key).expect("listed above");
                if let (Some(b), Some(h)) = (live.row.backend.clone(), live.row.handle.clone()) {
                    batch.stops.push((b.as_str().into(), live.run(), h));
                }
                live.row.state = JobState::TimedOut;
                live.row.finished_at_us = Some(now);
                let msg = format!("stopped after its timeout of {} s", live.row.spec.timeout_s);
                live.row.reason = Some(msg.clone());
                batch.events.push(job_event(now, "timed_out", live, msg));
                batch.touch(&key);
                self.dirty = true;
            }
        }
        // Retries whose backoff ended.
        if self.next_retry.is_some_and(|t| t <= now) {
            self.next_retry = None;
            self.dirty = true;
        }
        // Capacity.
        let nodes = self.backends.nodes();
        if nodes != self.state.nodes {
            self.state.nodes = nodes;
            self.publish();
            self.dirty = true;
        }
    }

    /// Ends the current run of a holding job with `outcome`: succeeded, retried or failed.
    fn end_run(&mut self, key: &Name, outcome: Outcome, now: i64, batch: &mut Batch) {
        let backoff = self.settings.retry_backoff;
        let Some(live) = self.state.jobs.get_mut(key) else { return };
        let (failed, what, code) = match &outcome {
            Outcome::Exited(0) => (false, "succeeded".to_string(), Some(0)),
            Outcome::Exited(c) => (true, format!("exited with code {c}"), Some(*c as i64)),
            Outcome::Signaled(s) => (true, format!("killed by signal {s}"), None),
            Outcome::Failed(m) => (true, m.clone(), None),
        };
        live.row.exit_code = code;
        batch.touch(key);
        self.dirty = true;
        if failed && live.row.retries < live.row.spec.max_retries as i64 {
            live.row.retries += 1;
            let delay = backoff.saturating_mul(1u32 << (live.row.retries - 1).min(8) as u32).min(Duration::from_secs(300));
            let at = now + delay.as_micros() as i64;
            live.row.retry_at_us = Some(at);
            self.next_retry = Some(self.next_retry.map_or(at, |n| n.min(at)));
            live.row.state = JobState::Pending;
            live.row.reason = Some(what.clone());
            let msg = format!("{what}; retry {} of {} in {:.1} s", live.row.retries, live.row.spec.max_retries, delay.as_secs_f64());
            batch.events.push(job_event(now, "retried", live, msg));
            live.clear_placement();
            return;
        }
        live.row.state = if failed { JobState::Failed } else { JobState::Succeeded };
        live.row.finished_at_us = Some(now);
        live.row.reason = failed.then(|| what.clone());
        batch.events.push(job_event(now, "finished", live, what));
    }

    /// Runs the engine and applies its plan to the live state; returns the jobs to start.
    fn decide(&mut self, now: i64, batch: &mut Batch) -> Vec<Name> {
        let now_ms = now / 1000;
        let mut running = Vec::new();
        let mut held_by_stage: HashMap<&str, u32> = HashMap::new();
        // One pass over the jobs: a cycle with many pending ones is mostly this pass.
        let capped_backends = self.backends.iter().any(|b| b.max_in_flight().is_some());
        let mut in_flight: HashMap<Name, usize> = HashMap::new();
        let mut pending: Vec<&Live> = Vec::new();
        for l in self.state.jobs.values() {
            if l.row.state == JobState::Pending {
                pending.push(l);
                continue;
            }
            if !l.row.state.holds_quota() {
                continue;
            }
            if capped_backends {
                *in_flight.entry(l.row.backend.as_deref().unwrap_or("").into()).or_default() += 1;
            }
            if let Some(s) = &l.row.stage_id {
                *held_by_stage.entry(s.as_str()).or_default() += 1;
            }
            running.push(RunningJob {
                id: l.key.clone(),
                queue: l.queue.clone(),
                priority: l.row.priority,
                request: l.request.clone(),
                flavors: l.flavors.clone(),
                node: l.node.clone().unwrap_or_else(|| "".into()),
                started_at_ms: l.row.admitted_at_us.unwrap_or(0) / 1000,
            });
        }
        // The engine orders what it is offered itself (whatever the input order), so only
        // the jobs of capped stages are sorted here: each such stage offers only as many of
        // its jobs as it may still run, its first ones in queue order.
        let quick = !self.explain_due && self.explained_at.is_some_and(|t| t.elapsed() < EXPLAIN_EVERY);
        let compiled = self.state.compiled.clone();
        let mut held_back: Vec<(Name, String)> = Vec::new();
        let mut next_retry = self.next_retry;
        let mut offered = Vec::new();
        let mut staged: Vec<&Live> = Vec::new();
        let mut by_queue: Vec<(&Name, Vec<(FifoRank, &Live)>)> = Vec::new();
        // Whether the last stage looked up caps its jobs (a stage's jobs come in a row).
        let mut last_stage: Option<(&str, bool)> = None;
        let capped = |id: &'_ str| -> bool { self.state.stages.get(id).is_some_and(|&cap| cap > 0) };
        for l in pending {
            if let Some(t) = l.row.retry_at_us.filter(|t| *t > now) {
                next_retry = Some(next_retry.map_or(t, |n: i64| n.min(t)));
                let why = l.row.reason.clone().unwrap_or_default();
                let left = (t - now) as f64 / 1e6;
                let msg = if self.backend_waits.contains(&l.key) {
                    format!("{}; retrying in {left:.1} s", why.split("; retrying in").next().unwrap_or_default())
                } else {
                    format!("retry {} of {} in {left:.1} s ({why})", l.row.retries, l.row.spec.max_retries)
                };
                held_back.push((l.key.clone(), msg));
            } else if l.row.stage_id.as_deref().is_some_and(|s| match last_stage {
                Some((id, caps)) if id == s => caps,
                _ => last_stage.insert((s, capped(s))).1,
            }) {
                staged.push(l);
            } else if quick {
                // Keyed here, so choosing a queue's first jobs compares a few words per job.
                let keyed = (fifo_rank(l.row.priority, l.row.enqueued_at_us / 1000, &l.key), l);
                match by_queue.iter_mut().find(|(q, _)| Arc::ptr_eq(q, &l.queue) || **q == l.queue) {
                    Some((_, jobs)) => jobs.push(keyed),
                    None => by_queue.push((&l.queue, vec![keyed])),
                }
            } else {
                offered.push(pending_job(l));
            }
        }
        // A quick cycle offers only the first jobs of each long fifo queue, and is run again
        // with every job when that could change its admissions (see `engine::quick`).
        let mut cuts: Vec<Cut> = Vec::new();
        let mut left_out: Vec<&Live> = Vec::new();
        for (queue, mut jobs) in by_queue {
            match compiled.fifo_strategy(queue) {
                Some(strategy) if jobs.len() > QUICK_OFFER => {
                    jobs.select_nth_unstable_by(QUICK_OFFER, |(a, la), (b, lb)| a.cmp(b).then_with(|| la.key.cmp(&lb.key)));
                    let rest = jobs.split_off(QUICK_OFFER);
                    offered.extend(jobs.iter().map(|(_, l)| pending_job(l)));
                    cuts.push(Cut {
                        strict: strategy == QueueingStrategy::StrictFifo,
                        offered: jobs.iter().map(|(_, l)| (&*l.key, &l.request)).collect(),
                        rest: rest.iter().map(|(_, l)| &l.request).collect(),
                    });
                    left_out.extend(rest.into_iter().map(|(_, l)| l));
                }
                _ => offered.extend(jobs.into_iter().map(|(_, l)| pending_job(l))),
            }
        }
        staged.sort_by(|a, b| {
            b.row.priority.cmp(&a.row.priority).then(a.row.enqueued_at_us.cmp(&b.row.enqueued_at_us)).then(a.key.cmp(&b.key))
        });
        for l in staged {
            let stage = l.row.stage_id.as_deref().unwrap_or_default();
            let cap = self.state.stages.get(stage).copied().unwrap_or(0);
            let held = held_by_stage.entry(stage).or_default();
            if *held >= cap {
                held_back.push((l.key.clone(), format!("its stage runs at most {cap} jobs at once, and {cap} are running")));
                continue;
            }
            *held += 1;
            offered.push(pending_job(l));
        }
        self.next_retry = next_retry;
        let t_engine = Instant::now();
        let mut plan = engine::schedule(&Snapshot { now_ms, config: &compiled, nodes: &self.state.nodes, running: &running, pending: &offered });
        if !cuts.is_empty() && !engine::quick::exact(&cuts, &plan) {
            cuts.clear();
            offered.extend(left_out.drain(..).map(pending_job));
            plan = engine::schedule(&Snapshot { now_ms, config: &compiled, nodes: &self.state.nodes, running: &running, pending: &offered });
        }
        let explained = cuts.is_empty();
        tracing::debug!(pending = offered.len(), explained, engine_us = t_engine.elapsed().as_micros() as u64, "engine cycle");
        let version = self.state.config_version;

        for p in &plan.preemptions {
            let preemptor_priority = self.state.jobs.get(&p.preemptor).map_or(0, |l| l.row.priority);
            let victims: Vec<serde_json::Value> = p
                .victims
                .iter()
                .map(|v| serde_json::json!({"job_id": &**v, "priority": self.state.jobs.get(v).map_or(0, |l| l.row.priority)}))
                .collect();
            for v in &p.victims {
                let Some(live) = self.state.jobs.get_mut(v) else { continue };
                if let (Some(b), Some(h)) = (live.row.backend.clone(), live.row.handle.clone()) {
                    batch.stops.push((b.as_str().into(), live.run(), h));
                }
                if let Some(n) = in_flight.get_mut(live.row.backend.as_deref().unwrap_or("")) {
                    *n = n.saturating_sub(1);
                }
                let mut e = job_event(now, "preempted", live, format!("preempted by {} (priority {preemptor_priority} > {})", p.preemptor, live.row.priority));
                e.config_version = Some(version);
                e.detail = Some(serde_json::json!({
                    "preemptor": &*p.preemptor,
                    "preemptor_priority": preemptor_priority,
                    "victims": victims,
                    "queue": &*p.queue,
                }));
                batch.events.push(e);
                live.row.state = JobState::Pending;
                live.row.admitted_at_us = None;
                live.row.started_at_us = None;
                live.row.reason = Some(format!("preempted by {}", p.preemptor));
                live.clear_placement();
                batch.touch(v);
            }
        }
        // In-flight caps per backend (counted above; the victims let go of theirs).
        let mut capped: Vec<(Name, String)> = Vec::new();
        let mut starts = Vec::with_capacity(plan.admissions.len());
        for a in &plan.admissions {
            if let Some(cap) = self.backends.get(&a.backend).and_then(|b| b.max_in_flight()) {
                let n = in_flight.entry(a.backend.clone()).or_default();
                if *n >= cap {
                    capped.push((a.job.clone(), format!("backend {} already has {cap} runs in flight (its cap)", a.backend)));
                    continue;
                }
                *n += 1;
            }
            let Some(live) = self.state.jobs.get_mut(&a.job) else { continue };
            live.row.state = JobState::Admitted;
            live.row.admitted_at_us = Some(now);
            live.row.retry_at_us = None;
            live.row.runs += 1;
            live.row.reason = None;
            live.row.node = Some(a.node.to_string());
            live.row.backend = Some(a.backend.to_string());
            live.row.flavors = a
                .flavors
                .iter()
                .map(|f| FlavorUse { flavor: f.flavor.to_string(), resources: f.resources.iter().map(|r| r.to_string()).collect() })
                .collect();
            live.flavors = a.flavors.clone();
            live.node = Some(a.node.clone());
            let flavors: Vec<&str> = a.flavors.iter().map(|f| &*f.flavor).collect();
            let mut e = job_event(now, "admitted", live, format!("admitted to {} on {} ({})", a.queue, a.node, flavors.join(", ")));
            e.config_version = Some(version);
            batch.events.push(e);
            batch.touch(&a.job);
            starts.push(a.job.clone());
        }
        let mut waiting: Vec<(Name, u64, Arc<str>)> = plan.pending.into_iter().map(|p| (p.job, p.position as u64, p.reason)).collect();
        waiting.extend(held_back.into_iter().chain(capped).map(|(key, why)| (key, 0, why.into())));
        if explained {
            self.state.waiting = Waiting::new(waiting);
            self.explain_due = false;
            self.explained_at = Some(Instant::now());
            self.explain_at = None;
        } else {
            // Waiting jobs keep what the last full cycle said of them until the next one.
            let last = self.explained_at.unwrap_or_else(Instant::now);
            self.explain_at.get_or_insert(tokio::time::Instant::from_std(last + EXPLAIN_EVERY));
        }
        starts
    }

    /// Whether the backend a job was admitted to records its starts (see
    /// [`Backend::records_starts`](crate::backends::Backend::records_starts)).
    fn records_starts(&self, key: &Name) -> bool {
        let backend = self.state.jobs.get(key).and_then(|l| l.row.backend.as_deref());
        backend.and_then(|b| self.backends.get(b)).is_some_and(|b| b.records_starts())
    }

    /// Starts this cycle's admissions in order: on a backend that starts at once (local),
    /// right here; on the others, on one task that reports each result ([`Started`]) while
    /// the loop goes on. Their `admitted` rows are already committed, so a crash during the
    /// starts is recovered by adoption, except on a backend that records its starts, whose
    /// admissions may still be in the batch: recovery finds those runs in its records (see
    /// [`Loop::recover`]).
    fn launch(&mut self, keys: Vec<Name>, batch: &mut Batch) {
        let mut todo = Vec::with_capacity(keys.len());
        for key in keys {
            let Some(live) = self.state.jobs.get(&key) else { continue };
            if live.row.state != JobState::Admitted {
                continue;
            }
            let backend_name = live.row.backend.clone().unwrap_or_default();
            let now = now_us();
            let Some(backend) = self.backends.get(&backend_name).cloned() else {
                self.end_run(&key, Outcome::Failed(format!("backend `{backend_name}` is not configured")), now, batch);
                continue;
            };
            if let Some((_, until, why)) = self.down.get(&backend_name).filter(|(_, until, _)| *until > now).cloned() {
                // Known to be down: do not knock again before its backoff ends.
                self.wait_for_backend(&key, why, until, now, batch);
                continue;
            }
            todo.push((backend, backend_name, self.start_spec(live)));
            self.starting.insert(key);
        }
        // A start that is a few system calls (local processes) is made here: a task of its
        // own would cost a hop to another thread on the way to every run.
        let (now, later): (Vec<_>, Vec<_>) = todo.into_iter().partition(|(b, _, _)| b.starts_at_once());
        for (backend, name, spec) in now {
            let run = spec.run.clone();
            let result = futures_util::FutureExt::now_or_never(backend.start(spec))
                .unwrap_or_else(|| Err(BackendError::Failed(format!("backend {name} did not start the run at once"))));
            self.on_started(Started { run, backend: name, result, at_us: now_us() }, batch);
        }
        let todo = later;
        if todo.is_empty() {
            return;
        }
        let tx = self.started_tx.clone();
        tokio::spawn(async move {
            // A backend that said it is unavailable is not asked again by this task.
            let mut down: HashMap<String, BackendError> = HashMap::new();
            for (backend, name, spec) in todo {
                let run = spec.run.clone();
                let result = match down.get(&name) {
                    Some(e) => Err(e.clone()),
                    None => backend.start(spec).await,
                };
                if let Err(e @ BackendError::Unavailable(_)) = &result {
                    down.insert(name.clone(), e.clone());
                }
                if tx.send(Started { run, backend: name, result, at_us: now_us() }).is_err() {
                    return; // the loop is gone; recovery adopts what was started
                }
            }
        });
    }

    /// A start's result: the job runs, waits for its backend, or fails. A run whose job was
    /// cancelled or preempted while it started is stopped at once.
    fn on_started(&mut self, s: Started, batch: &mut Batch) {
        let key = s.run.job.clone();
        self.starting.remove(&key);
        let early = self.early_exits.remove(&key);
        let current = self.state.jobs.get(&key).is_some_and(|l| l.row.state == JobState::Admitted && l.row.runs == s.run.run);
        if !current {
            if let Ok(handle) = s.result {
                batch.stops.push((s.backend.as_str().into(), s.run, handle));
            }
            return;
        }
        let (backend_name, now) = (s.backend, s.at_us);
        match s.result {
            Ok(handle) => {
                self.down.remove(&backend_name);
                self.backend_waits.remove(&key);
                let live = self.state.jobs.get_mut(&key).expect("checked above");
                live.row.state = JobState::Running;
                live.row.started_at_us = Some(now);
                live.row.handle = Some(handle);
                if let Some(d) = deadline_of(&live.row) {
                    self.next_deadline = Some(self.next_deadline.map_or(d, |n| n.min(d)));
                }
                let msg = format!("started on {}", live.row.node.as_deref().unwrap_or("?"));
                batch.events.push(job_event(now, "started", live, msg));
                batch.touch(&key);
                if let Some(exit) = early {
                    self.end_run(&key, exit.outcome, now_us(), batch);
                }
            }
            Err(BackendError::Unavailable(e)) => {
                let failures = self.down.get(&backend_name).map_or(0, |d| d.0) + 1;
                let delay = self.settings.retry_backoff.saturating_mul(1u32 << (failures - 1).min(8)).min(BACKEND_BACKOFF_MAX);
                let until = now + delay.as_micros() as i64;
                let why = format!("backend {backend_name} unavailable: {e}");
                self.down.insert(backend_name.clone(), (failures, until, why.clone()));
                tracing::warn!(backend = %backend_name, error = %e, retry_in_s = delay.as_secs_f64(), "backend unavailable; jobs wait");
                self.wait_for_backend(&key, why, until, now, batch);
            }
            Err(e) => self.end_run(&key, Outcome::Failed(format!("could not start: {e}")), now, batch),
        }
    }

    /// An admitted job whose backend is unavailable goes back to pending until `until`,
    /// keeping its enqueue time and its retries (the run was never started).
    fn wait_for_backend(&mut self, key: &Name, why: String, until: i64, now: i64, batch: &mut Batch) {
        let Some(live) = self.state.jobs.get_mut(key) else { return };
        let reason = format!("{why}; retrying in {:.1} s", (until - now).max(0) as f64 / 1e6);
        live.row.state = JobState::Pending;
        live.row.runs = (live.row.runs - 1).max(0);
        live.row.admitted_at_us = None;
        live.row.retry_at_us = Some(until);
        live.row.reason = Some(reason.clone());
        batch.events.push(job_event(now, "requeued", live, reason));
        live.clear_placement();
        self.backend_waits.insert(key.clone());
        self.next_retry = Some(self.next_retry.map_or(until, |n| n.min(until)));
        self.dirty = true;
        batch.touch(key);
    }

    fn start_spec(&self, live: &Live) -> StartSpec {
        let compiled = &self.state.compiled;
        let mut selector_labels = BTreeMap::new();
        for f in &live.flavors {
            if let Some(def) = compiled.flavors.iter().find(|d| d.name == f.flavor) {
                for m in &def.selector {
                    if let Some(v) = ray_selector_value(m) {
                        selector_labels.insert(m.key.clone(), v);
                    }
                }
            }
        }
        let mut metadata = BTreeMap::new();
        metadata.insert("berth_job_id".into(), live.row.id.clone());
        metadata.insert("queue".into(), live.queue.to_string());
        metadata.insert("flavor".into(), live.flavors.iter().map(|f| &*f.flavor).collect::<Vec<_>>().join(","));
        metadata.insert("submitter".into(), live.row.submitter.clone());
        StartSpec {
            run: live.run(),
            entrypoint: live.row.spec.entrypoint.clone(),
            working_dir: live.row.spec.runtime_env.working_dir.clone(),
            env_vars: live.row.spec.runtime_env.env_vars.clone(),
            runtime_env: live.row.spec.runtime_env.other.clone(),
            resources: live.request.clone(),
            node: live.node.clone().unwrap_or_else(|| "".into()),
            flavors: live.flavors.clone(),
            selector_labels,
            metadata,
        }
    }

    /// Writes the batch's touched jobs and events; drops terminal jobs from memory; answers
    /// the commands that waited for the commit. A failed write is retried with backoff (the
    /// live state is the truth, so the same rows are written again).
    /// True when everything is written (also when there was nothing to write).
    async fn commit(&mut self, now: i64, batch: &mut Batch) -> bool {
        // Writes land in the order they were made.
        if let Some(running) = self.committing.take() {
            self.committed(running.await, false);
        }
        if batch.touched.is_empty() && batch.events.is_empty() && batch.replies.is_empty() {
            return true;
        }
        self.usage_dirty |= !batch.touched.is_empty();
        let rows: Vec<(&JobRow, bool)> =
            batch.touched.iter().filter_map(|k| self.state.jobs.get(k)).map(|l| (&l.row, batch.spec_changed.contains(&l.key))).collect();
        let result = persist(&self.store, now, &rows, &batch.events).await;
        self.diverged |= result.is_err();
        for key in batch.touched.drain(..) {
            if self.state.jobs.get(&key).is_some_and(|l| l.row.state.is_terminal()) {
                self.state.jobs.remove(&key);
                self.backend_waits.remove(&key);
            }
        }
        batch.seen.clear();
        batch.spec_changed.clear();
        batch.events.clear();
        for (reply, r) in batch.replies.drain(..) {
            let r = match &result {
                Ok(()) => r,
                Err(e) => Err(RuntimeError::Store(e.to_string())),
            };
            let _ = reply.send(r);
        }
        result.is_ok()
    }

    /// Writes a batch no one waits on (no replies, stops or starts that need it first) on a
    /// task of its own, retrying like [`Loop::commit`]; the loop goes on meanwhile, and a
    /// later commit waits for it. Until it lands, the finished jobs it writes stay in memory.
    fn commit_in_background(&mut self, now: i64, batch: &mut Batch) {
        if batch.touched.is_empty() && batch.events.is_empty() {
            return;
        }
        self.usage_dirty |= !batch.touched.is_empty();
        let rows: Vec<(JobRow, bool)> =
            batch.touched.iter().filter_map(|k| self.state.jobs.get(k)).map(|l| (l.row.clone(), batch.spec_changed.contains(&l.key))).collect();
        let events = std::mem::take(&mut batch.events);
        let ended: Vec<Name> = batch.touched.drain(..).filter(|k| self.state.jobs.get(k).is_some_and(|l| l.row.state.is_terminal())).collect();
        batch.seen.clear();
        batch.spec_changed.clear();
        let store = self.store.clone();
        self.committing = Some(tokio::spawn(async move {
            let rows: Vec<(&JobRow, bool)> = rows.iter().map(|(r, s)| (r, *s)).collect();
            let ok = persist(&store, now, &rows, &events).await.is_ok();
            Committed { ended, ok }
        }));
    }

    /// A background commit landed (or failed for good, or its task died: then nothing is
    /// known to be written): finished jobs it wrote leave memory. `agree`: nothing changed
    /// since it was made, so backends may forget ended runs.
    fn committed(&mut self, done: Result<Committed, tokio::task::JoinError>, agree: bool) {
        let done = done.unwrap_or(Committed { ended: Vec::new(), ok: false });
        self.diverged |= !done.ok;
        // A final state is final: what it wrote is what memory still says.
        for key in done.ended {
            self.state.jobs.remove(&key);
            self.backend_waits.remove(&key);
        }
        if done.ok && agree {
            self.forget_ended();
        }
    }

    /// Tells each backend that keeps records of ended runs which of its runs the database
    /// lists as unfinished, so it may drop the rest. Called right after a commit, when memory
    /// and database agree; never once a commit failed (see [`Loop::diverged`]).
    fn forget_ended(&mut self) {
        if self.diverged || self.last_forget.is_some_and(|t| t.elapsed() < FORGET_EVERY) {
            return;
        }
        let due: Vec<_> = self.backends.iter().filter(|b| b.has_ended_runs()).cloned().collect();
        if due.is_empty() {
            return;
        }
        self.last_forget = Some(Instant::now());
        for b in due {
            let live: HashSet<RunId> =
                self.state.jobs.values().filter(|l| l.row.state.holds_quota() && l.row.backend.as_deref() == Some(b.name())).map(Live::run).collect();
            b.forget_ended(&live);
        }
    }

    /// Writes resource-history samples when usage changed (at most once a second) and
    /// every sample interval while anything is in use; prunes old ones hourly.
    async fn sample(&mut self, now: i64) {
        if let Some((at, last)) = &self.last_sample {
            let periodic_due = last.values().any(|u| *u > 0) && at.elapsed() >= self.settings.sample_interval;
            if !self.usage_dirty && !periodic_due {
                return;
            }
        }
        // What is written is the peak since the last sample, so a change that lasts less
        // than the 1 s between samples still shows.
        let now_usage = usage(&self.state);
        let mut usage = std::mem::take(&mut self.peak);
        for (cell, used) in &now_usage {
            let peak = usage.entry(cell.clone()).or_insert(0);
            *peak = (*peak).max(*used);
        }
        let since = self.last_sample.as_ref().map(|(t, _)| t.elapsed());
        let changed = self.last_sample.as_ref().is_none_or(|(_, last)| *last != usage);
        let busy = usage.values().any(|u| *u > 0);
        if !changed {
            self.usage_dirty = false;
        }
        let due = match since {
            None => true,
            Some(s) => (changed && s >= Duration::from_secs(1)) || (busy && s >= self.settings.sample_interval),
        };
        if !due {
            self.peak = usage;
            return;
        }
        let cells = self.state.compiled.quota_cells();
        let samples: Vec<NewSample> = cells
            .iter()
            .map(|c| NewSample {
                queue: c.queue.to_string(),
                flavor: c.flavor.to_string(),
                resource: c.resource.to_string(),
                used_milli: usage.get(&(c.queue.clone(), c.flavor.clone(), c.resource.clone())).copied().unwrap_or(0),
                nominal_milli: c.nominal.map(|m| m.0),
            })
            .collect();
        if let Err(e) = self.store.insert_samples(now, &samples).await {
            tracing::warn!(error = %e, "cannot write resource history");
            self.peak = usage;
            return;
        }
        self.last_sample = Some((Instant::now(), usage));
        self.peak = now_usage;
        self.usage_dirty = false;
        if self.last_prune.is_none_or(|t| t.elapsed() >= Duration::from_secs(3600)) {
            self.last_prune = Some(Instant::now());
            let before = now - self.settings.history_retention.as_micros() as i64;
            if let Err(e) = self.store.prune_samples(before).await {
                tracing::warn!(error = %e, "cannot prune resource history");
            }
        }
    }
}

/// When a running job passes its timeout (µs), if it has one.
/// Writes a cycle's rows and events, trying 5 times, each failure followed by a growing
/// pause (0.1 to 1.6 s).
async fn persist(store: &JobStore, now: i64, rows: &[(&JobRow, bool)], events: &[NewEvent]) -> Result<(), crate::store::jobs::JobStoreError> {
    let mut result = Ok(());
    for attempt in 0..5u32 {
        result = store.update(now, rows, events).await;
        let Err(e) = &result else { break };
        tracing::error!(error = %e, attempt, "cannot persist the admission cycle; retrying");
        tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
    }
    result
}

fn deadline_of(row: &JobRow) -> Option<i64> {
    let started = row.started_at_us?;
    (row.spec.timeout_s > 0).then(|| started.saturating_add((row.spec.timeout_s as i64).saturating_mul(1_000_000)))
}

/// Used amount per (queue, flavor, resource), in milli-units, over holding jobs.
///
/// Called after every change, so it adds up by the names' addresses first: holding jobs
/// share the config's allocations of them, so the map of names is built from the few
/// distinct cells rather than from every job (equal names at different addresses are
/// merged there).
pub fn usage(state: &State) -> BTreeMap<(Name, Name, Name), i64> {
    let mut cells = HashMap::new();
    for l in state.jobs.values().filter(|l| l.row.state.holds_quota()) {
        for f in &l.flavors {
            for r in &f.resources {
                let key = [l.queue.as_ptr() as usize, f.flavor.as_ptr() as usize, r.as_ptr() as usize];
                let cell = cells.entry(key).or_insert(((&l.queue, &f.flavor, r), 0i64));
                cell.1 = cell.1.saturating_add(l.request.get(r).0);
            }
        }
    }
    let mut out = BTreeMap::new();
    for ((q, f, r), amount) in cells.into_values() {
        let cell = out.entry((q.clone(), f.clone(), r.clone())).or_insert(0i64);
        *cell = cell.saturating_add(amount);
    }
    out
}

/// Free capacity of a node after what work outside Berth and Berth's holding jobs placed on
/// it take, per resource of its capacity (a resource with nothing free is there, at 0).
pub fn free_on(state: &State, node: &Node) -> BTreeMap<Name, Milli> {
    let mut free: BTreeMap<Name, Milli> = node.capacity.iter().map(|(n, a)| (n.clone(), a)).collect();
    for (n, a) in node.used_outside.iter() {
        if let Some(e) = free.get_mut(n) {
            *e = e.minus(a).max(Milli::ZERO);
        }
    }
    for l in state.jobs.values().filter(|l| l.row.state.holds_quota() && l.node.as_deref() == Some(&*node.id)) {
        for (n, a) in l.request.iter() {
            let e = free.entry(n.clone()).or_insert(Milli::ZERO);
            *e = e.minus(a);
        }
    }
    free
}

/// The priority a job may be changed to, under the rule that routed it.
pub fn bounded_priority(compiled: &Compiled, rule_index: Option<i64>, priority: i64) -> Result<i64, RuntimeError> {
    let Some(rule) = rule_index.and_then(|i| usize::try_from(i).ok()).and_then(|i| compiled.rules.get(i)) else {
        return Ok(priority);
    };
    let (min, max) = (rule.min.unwrap_or(i64::MIN), rule.max.unwrap_or(i64::MAX));
    if (min..=max).contains(&priority) {
        return Ok(priority);
    }
    match rule.on_violation {
        app::config::OnViolation::ForceUpdate => Ok(priority.clamp(min, max)),
        app::config::OnViolation::Reject => Err(RuntimeError::Invalid(format!(
            "priority: {priority} is outside [{}, {}] of the rule that routed this job",
            rule.min.map_or("-∞".into(), |m| m.to_string()),
            rule.max.map_or("∞".into(), |m| m.to_string())
        ))),
    }
}

/// A flavor selector term as Ray's label selector writes it, when it has one.
fn ray_selector_value(m: &MatchExpression) -> Option<String> {
    let values = m.values.as_deref().unwrap_or_default();
    match m.operator {
        Operator::In if values.len() == 1 => Some(values[0].clone()),
        Operator::In => Some(format!("in({})", values.join(","))),
        Operator::NotIn if values.len() == 1 => Some(format!("!{}", values[0])),
        Operator::NotIn => Some(format!("!in({})", values.join(","))),
        Operator::Exists | Operator::DoesNotExist => None,
    }
}

/// What the engine is offered for a pending job.
fn pending_job(l: &Live) -> PendingJob {
    PendingJob { id: l.key.clone(), queue: l.queue.clone(), priority: l.row.priority, request: l.request.clone(), enqueued_at_ms: l.row.enqueued_at_us / 1000 }
}

fn job_event(now: i64, kind: &'static str, live: &Live, message: String) -> NewEvent {
    NewEvent {
        at_us: now,
        kind,
        job_id: Some(live.row.id.clone()),
        queue: live.row.queue.clone(),
        flavor: (!live.flavors.is_empty()).then(|| live.flavors.iter().map(|f| &*f.flavor).collect::<Vec<_>>().join(",")),
        node: live.row.node.clone(),
        config_version: live.row.config_version,
        rule_index: live.row.rule_index,
        message,
        detail: None,
    }
}
