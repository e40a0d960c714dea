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
//! backend's journal, [`StartJournal`](crate::backends::StartJournal)) gets its admissions at once, when the
//! cycle stops nothing, and they ride with the next transaction too. A slot that frees is
//! then refilled without waiting for a write. A crash in between leaves a run whose job the
//! database lists as pending, and recovery finds it in the backend's records.
//!
//! After a restart, [`Loop::recover`] reloads every unfinished job and asks its backend to
//! adopt `admitted` and `running` ones: alive → running again, ended → its outcome, never
//! started → back to pending (no retry consumed). A run a recording backend began for a job
//! still stored as pending counts as that job's run if it ended; if it is still going it is
//! stopped (no admission accounts for it) and the job waits for its turn again.

mod apply;
mod commands;
mod decide;
mod events;
mod gate;
#[cfg(test)]
mod harness;
pub mod intake;
mod lanes;
mod live;
mod published;
mod recover;
mod sample;
mod term;

pub use live::{free_on, usage, Live};
pub use term::Term;
use live::{deadline_of, job_event};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use app::jobs::{FlavorUse, JobState};
use tokio::sync::{mpsc, oneshot, watch};

use crate::backends::{Adopted, Backend, BackendError, Exit, Outcome, PackageFile, Registry, RunId, StartSpec};
use crate::clock::Clock;
use crate::store::jobs::{JobRow, JobStore, NewEvent, NewSample};
use crate::engine::quick::{fifo_rank, Cut, FifoRank};
use crate::engine::{self, Compiled, FlavorAssignment, InFlightLimit, Milli, Name, Node, PendingJob, Resources, RunningJob, Snapshot};
use crate::services::config::ActiveConfig;

/// Tunables of the loop.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Period of the timeout/backoff/capacity check.
    pub tick: Duration,
    /// First retry delay; doubled per retry, at most 5 minutes.
    pub retry_backoff: Duration,
    /// Resource-history sample period while anything is in use.
    pub sample_interval: Duration,
    /// Samples older than this are deleted.
    pub history_retention: Duration,
    /// Where backends keep runs (logs, working dirs).
    pub data_dir: PathBuf,
    /// A job's `working_dir` must lie inside one of these (any, when empty).
    pub workdir_roots: Vec<PathBuf>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            tick: Duration::from_millis(500),
            retry_backoff: Duration::from_secs(1),
            sample_interval: Duration::from_secs(10),
            history_retention: Duration::from_secs(14 * 24 * 3600),
            data_dir: PathBuf::from("data"),
            workdir_roots: Vec::new(),
        }
    }
}

/// What submissions need from the loop without asking it: the nodes of the last snapshot,
/// and every node the backends' configurations have (what a submission is checked against).
#[derive(Debug)]
pub struct Shared {
    pub nodes: Arc<Vec<Node>>,
    pub known: Arc<Vec<Node>>,
}

impl Shared {
    /// The nodes `backends` offer and know now.
    pub fn of(backends: &Registry) -> Shared {
        Shared { nodes: Arc::new(backends.nodes()), known: Arc::new(backends.known_nodes()) }
    }
}

/// What the loop refuses or fails at (the jobs service says it to the caller).
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    /// The job exists but has ended.
    #[error("job `{0}` has already ended")]
    NotLive(String),
    /// Bad input: `field: problem`.
    #[error("{0}")]
    Invalid(String),
    #[error("database error: {0}")]
    Store(String),
    #[error("the admission loop is not running")]
    Stopped,
}

impl From<crate::store::jobs::JobStoreError> for LoopError {
    fn from(e: crate::store::jobs::JobStoreError) -> Self {
        LoopError::Store(e.to_string())
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
    /// Holds (`hold`) or releases a pending job.
    Hold { id: String, hold: bool, by: String, reply: Reply },
    /// Jobs another replica stored (by id): read and, when still pending, taken in.
    Load(Vec<String>),
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
    list: Vec<(Name, Wait)>,
    index: std::sync::OnceLock<HashMap<Name, usize>>,
}

/// Where one waiting job stands and why.
#[derive(Debug, Clone)]
pub struct Wait {
    /// 1-based position in its queue; 0 for a job held back before the queue (a hold, a
    /// dependency, a retry's backoff).
    pub position: u64,
    /// The engine's full explanation.
    pub reason: Arc<str>,
    /// The same in one line for people, when the engine gave one.
    pub headline: Option<Arc<str>>,
}

impl Wait {
    /// What a job waiting till the next full cycle says.
    pub fn unexplained() -> Wait {
        Wait { position: 0, reason: Arc::from("waiting for the next admission cycle"), headline: None }
    }

    /// Puts the position, reason and headline on a pending job as the API shows it.
    pub fn tell(self, job: &mut app::jobs::Job) {
        job.position = (self.position > 0).then_some(self.position);
        job.reason = Some(self.reason.to_string());
        job.reason_headline = self.headline.map(|h| h.to_string());
    }
}

impl Waiting {
    fn new(list: Vec<(Name, Wait)>) -> Waiting {
        Waiting { list, index: std::sync::OnceLock::new() }
    }

    /// The position and reason of one job.
    pub fn get(&self, job: &str) -> Option<Wait> {
        let index = self.index.get_or_init(|| self.list.iter().enumerate().map(|(i, w)| (w.0.clone(), i)).collect());
        Some(self.list[*index.get(job)?].1.clone())
    }
}

/// The loop task's own data.
pub struct Loop {
    pub(crate) state: State,
    pub(crate) store: JobStore,
    pub(crate) backends: Registry,
    /// The backends' in-flight caps (the engine applies them).
    limits: Vec<InFlightLimit>,
    pub(crate) settings: Settings,
    pub(crate) shared: Arc<RwLock<Shared>>,
    /// Where `now` comes from (see [`Clock`]).
    clock: Arc<dyn Clock>,
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
    /// Where admissions, starts, preemptions and backend failures are counted.
    pub(crate) metrics: Arc<crate::metrics::Metrics>,
    /// Jobs some live job depended on when it came in (see `gate`): their final states are
    /// kept when they leave memory. Grows with the dependencies named, about 50 bytes each.
    awaited: HashSet<Name>,
    /// Final states of awaited jobs no longer in memory.
    ended: HashMap<Name, JobState>,
    /// Dependencies to read from the database before the next decision.
    lookup: HashSet<Name>,
    /// The leader lease this loop runs under (PostgreSQL replicas); `None`: the only process.
    term: Option<Term>,
    /// The lease was lost, or a commit failed under it: the loop ends (see `term`).
    deposed: bool,
    /// Jobs other replicas stored, to read before the next decision ([`Cmd::Load`]).
    to_load: HashSet<String>,
    /// The waiting list as last published for followers (see `published`).
    publication: published::Publication,
    /// The pending jobs of each queue in order, and the quota holders (see `lanes`).
    lanes: lanes::Lanes,
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

/// Most jobs in memory for [`Loop::drained`] to look at.
const DRAINED_SCAN: usize = 64;

/// Most jobs per fifo queue a quick cycle offers the engine (see [`engine::quick`]): enough
/// that a cycle rarely admits them all, few enough to decide on in microseconds. In Kueue's
/// baseline (30 queues), 16 rather than 32 cut the engine's time by a third, and 4 of
/// about 2,400 quick cycles had to be made again with every job.
const QUICK_OFFER: usize = 16;

/// Longest a waiting job's position and reason lag behind, while quick cycles run.
const EXPLAIN_EVERY: Duration = Duration::from_secs(1);

/// Usage in milli-units per (queue, flavor, resource).
type UsageCells = BTreeMap<(Name, Name, Name), i64>;

/// Where the answer to a cancel or priority change goes.
type Reply = oneshot::Sender<Result<JobRow, LoopError>>;

/// What a start task reports for one run.
#[derive(Clone)]
struct Started {
    run: RunId,
    backend: String,
    result: Result<String, BackendError>,
    /// When the backend's start returned (µs).
    at_us: i64,
    /// Not tried: the leader lease may have lapsed while the task went through the cycle's
    /// starts (see [`Loop::start_cut_short`]).
    cut_short: bool,
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
    replies: Vec<(Reply, Result<JobRow, LoopError>)>,
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
        mut config_rx: watch::Receiver<Arc<ActiveConfig>>,
        cmds: mpsc::UnboundedReceiver<Cmd>,
        exits: mpsc::UnboundedReceiver<Exit>,
        clock: Arc<dyn Clock>,
    ) -> Loop {
        let nodes = shared.read().unwrap_or_else(|e| e.into_inner()).nodes.as_ref().clone();
        let active = config_rx.borrow_and_update().clone();
        let (compiled, config_version) = (active.compiled.clone(), active.version);
        let (started_tx, started_rx) = mpsc::unbounded_channel();
        Loop {
            state: State { jobs: HashMap::new(), waiting: Waiting::default(), compiled, config_version, nodes, stages: HashMap::new() },
            store,
            limits: backends.limits(),
            backends,
            settings,
            shared,
            clock,
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
            metrics: Arc::new(crate::metrics::Metrics::new()),
            awaited: HashSet::new(),
            ended: HashMap::new(),
            lookup: HashSet::new(),
            term: None,
            deposed: false,
            to_load: HashSet::new(),
            publication: published::Publication::default(),
            lanes: lanes::Lanes::default(),
        }
    }

    /// Runs until the command channel closes (the server shuts down) or, under a lease,
    /// until the lease is lost; returns itself for the next term's channels.
    pub(crate) async fn run(mut self) -> Loop {
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
                        let _ = self.commit(self.clock.now_us(), &mut carry).await; // after any background one
                        return self;
                    }
                },
                () = Self::lease_lost(&mut self.term), if !self.deposed => {
                    tracing::warn!("the leader lease was lost: ending this term");
                    self.deposed = true;
                }
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
            if self.deposed {
                return self;
            }
            self.cycle(std::mem::take(&mut cmds), std::mem::take(&mut started), std::mem::take(&mut exits), ticked).await;
            if self.deposed {
                return self;
            }
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

    /// No job waits or holds quota: every one in memory has ended (and awaits its write). Only
    /// looked for among a few, as there is no hurry while many jobs are still live.
    fn drained(&self) -> bool {
        self.state.jobs.len() <= DRAINED_SCAN && self.state.jobs.values().all(|l| l.row.state.is_terminal())
    }

    fn publish(&self, known: Vec<Node>) {
        let mut shared = self.shared.write().unwrap_or_else(|e| e.into_inner());
        shared.nodes = Arc::new(self.state.nodes.clone());
        shared.known = Arc::new(known);
    }

    async fn cycle(&mut self, cmds: Vec<Cmd>, started: Vec<Started>, exits: Vec<Exit>, ticked: bool) {
        let t_cycle = Instant::now();
        let now = self.clock.now_us();
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
        self.load_named().await;
        self.look_up_dependencies().await;
        let mut starts = Vec::new();
        let decided = self.dirty;
        if self.dirty {
            self.dirty = false;
            starts = self.decide(now, &mut batch);
        }
        if batch.stops.is_empty() && self.term.is_none() {
            // A backend that records its starts itself gets them at once, and their admission
            // rides with a later commit: recovery finds a run the database missed in the
            // backend's records (see `recover`). Victims are always stopped first.
            let (first, rest): (Vec<Name>, Vec<Name>) = starts.into_iter().partition(|k| self.records_starts(k));
            self.launch(first, &mut batch);
            starts = rest;
        }
        // The last live job ended: whoever waits for it learns at once, not a flush later.
        let due = self.flush_at.is_some_and(|t| t <= tokio::time::Instant::now()) || (!batch.is_empty() && self.drained());
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
            if self.deposed {
                return; // another replica leads (or the database is gone): it stops and starts
            }
            for (backend, run, handle) in std::mem::take(&mut batch.stops) {
                if let Some(b) = self.backends.get(&backend) {
                    if let Err(e) = b.stop(run.clone(), handle).await {
                        self.metrics.backend_errors.with_label_values(&[&*backend, "stop"]).inc();
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
        self.publish_waiting(now).await;
        if decided {
            self.metrics.cycle.observe(t_cycle.elapsed().as_secs_f64());
        }
        tracing::debug!(cycle_us = t_cycle.elapsed().as_micros() as u64, "cycle");
    }
}
