//! What-if: a draft config replayed against recorded workload, side by side with the active
//! config, before anyone applies it.
//!
//! A preview is a fixed sequence of steps:
//!
//! 1. **Check** the draft like an apply would (every problem with its path) and compile both
//!    configs.
//! 2. **Load** the window's recorded jobs as simulator arrivals (`load.rs`) and the live jobs.
//! 3. **Replay** them in simulated time through the engine's own simulator
//!    ([`engine::sim`]: the same routing, priority policy, submit checks and admission cycle
//!    the loop runs) under the active config and under the draft, from the same starting
//!    state, on two threads. Deterministic: same record, same configs, same report.
//! 4. **Report** side by side (`report.rs`), plus what an apply now would do to live jobs
//!    (`now.rs`) and how well the active replay matches the record.
//!
//! Node capacity is the nodes the backends report *now*: capacity history is not recorded.
//! Stage concurrency limits, backend in-flight caps, retries and the loop's own latency are
//! not replayed; the fidelity figures show what that costs.

mod load;
mod now;
mod report;
pub mod routing;
pub mod window;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Instant;

use app::config::validate::validate;
use app::config::{Problem, Report, SchedulerConfig};
use app::preview::PreviewReport;

use crate::engine::sim::{self, Cancelled};
use crate::engine::{self, Compiled, InFlightLimit, Node};
use crate::store::jobs::{time_of, JobStore, JobStoreError};
use crate::services::config::{ConfigService, ServiceError};

pub use window::Span;

/// Why a preview could not be made; mapped to HTTP in `http::error`.
#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    /// The draft is not a valid config (422, like apply).
    #[error("the draft has {} error(s)", .0.errors().count())]
    Invalid(Report),
    /// A request field is wrong (`field: problem`).
    #[error("{0}")]
    BadRequest(String),
    /// The caller went away or asked to stop.
    #[error("the preview was cancelled")]
    Cancelled,
    #[error("{0}")]
    Service(#[from] ServiceError),
    #[error("database error: {0}")]
    Store(#[from] JobStoreError),
}

/// Shared between a running preview and whoever started it: a stop flag and progress.
#[derive(Debug, Default)]
pub struct Control {
    cancelled: AtomicBool,
    /// Arrivals submitted so far, summed over both replays.
    done: AtomicU64,
    /// Arrivals to submit, summed over both replays (0 until loaded).
    total: AtomicU64,
}

impl Control {
    /// Asks the preview to stop at its next check.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    /// `(done, total)` arrivals over both replays.
    pub fn progress(&self) -> (u64, u64) {
        (self.done.load(Ordering::Relaxed), self.total.load(Ordering::Relaxed))
    }
}

/// What a preview reads: the config service, the job store, the nodes now and the
/// backends' in-flight caps.
#[derive(Debug, Clone)]
pub struct Sources {
    pub config: Arc<ConfigService>,
    pub store: JobStore,
    pub nodes: Arc<Vec<Node>>,
    pub limits: Arc<Vec<InFlightLimit>>,
}

impl Sources {
    /// What the running server offers.
    pub fn of(state: &crate::state::AppState) -> Sources {
        Sources {
            config: state.config.clone(),
            store: state.runtime.store().clone(),
            nodes: state.runtime.nodes_now(),
            limits: Arc::new(state.runtime.limits()),
        }
    }
}

/// Stops a preview when dropped: hold it in the request's future, so a client that goes
/// away (or a browser that aborts) stops the replay.
#[derive(Debug)]
pub struct CancelOnDrop(pub Arc<Control>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// [`preview`] that stops when its future is dropped.
pub async fn run(src: &Sources, draft: &SchedulerConfig, span: Span, now_us: i64) -> Result<PreviewReport, PreviewError> {
    let control = Arc::new(Control::default());
    let _guard = CancelOnDrop(control.clone());
    preview(src, draft, span, now_us, control).await
}

/// Previews running under a caller-chosen token, so another request can read their progress.
fn running() -> &'static Mutex<HashMap<String, Weak<Control>>> {
    static RUNNING: OnceLock<Mutex<HashMap<String, Weak<Control>>>> = OnceLock::new();
    RUNNING.get_or_init(Default::default)
}

/// Keeps `token` registered while the preview runs.
struct Tracked(String);

impl Tracked {
    fn new(token: &str, control: &Arc<Control>) -> Tracked {
        let mut map = running().lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, c| c.strong_count() > 0);
        map.insert(token.to_string(), Arc::downgrade(control));
        Tracked(token.to_string())
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        running().lock().unwrap_or_else(|e| e.into_inner()).remove(&self.0);
    }
}

/// [`run`], with its progress readable through [`progress`] under `token` until it ends.
pub async fn run_tracked(src: &Sources, draft: &SchedulerConfig, span: Span, now_us: i64, token: &str) -> Result<PreviewReport, PreviewError> {
    let control = Arc::new(Control::default());
    let _guard = CancelOnDrop(control.clone());
    let _tracked = Tracked::new(token, &control);
    preview(src, draft, span, now_us, control).await
}

/// `(done, total)` arrivals of the preview running under `token`, or `None` when none is.
pub fn progress(token: &str) -> Option<(u64, u64)> {
    running().lock().unwrap_or_else(|e| e.into_inner()).get(token).and_then(Weak::upgrade).map(|c| c.progress())
}

/// Checks the draft the way apply does; compiles it.
pub fn check_draft(draft: &SchedulerConfig) -> Result<Compiled, PreviewError> {
    let report = validate(draft);
    if report.has_errors() {
        return Err(PreviewError::Invalid(report));
    }
    engine::compile(draft).map_err(|e| PreviewError::Invalid(Report { problems: vec![Problem::error(e.path, e.message)] }))
}

/// Replays `span` under the active config and `draft`; see the module docs.
pub async fn preview(src: &Sources, draft: &SchedulerConfig, span: Span, now_us: i64, control: Arc<Control>) -> Result<PreviewReport, PreviewError> {
    let t0 = Instant::now();
    // 1. Check.
    let draft_c = check_draft(draft)?;
    // The config in force, as the loop runs it (no second compile).
    let in_force = src.config.active();
    let active_c = in_force.compiled.clone();
    let identical = match in_force.version {
        0 => false,
        v => src.config.get(Some(v)).await?.config == *draft,
    };
    // 2. Load.
    let workload = load::workload(&src.store, span, now_us).await?;
    let live = src.store.load_unfinished().await?;
    if control.is_cancelled() {
        return Err(PreviewError::Cancelled);
    }
    let (nodes, limits) = (src.nodes.clone(), src.limits.clone());
    let version = in_force.version;
    // 3–4. Replay and report, off the async threads: CPU-bound work.
    let job = tokio::task::spawn_blocking(move || {
        // The past is replayed on the nodes' capacity, not on what others use there today.
        let whole: Vec<Node> = nodes.iter().map(|n| Node { used_outside: Default::default(), ..n.clone() }).collect();
        let (a, d) = replay(&workload, &active_c, &draft_c, identical, (&whole, &limits), span, &control)?;
        let queues = report::queues(&workload, &a, &d, &active_c, &draft_c, span);
        let (usage, usage_step_s) = report::usage(&a, &d, span);
        let (change_counts, changes, changes_truncated) = report::changes(&workload, &a, &d, span);
        let fidelity = report::fidelity(&workload, &a, version);
        let now = now::impact(&live, &active_c, &draft_c, (&nodes, &limits), now_us);
        let mut notes = vec![format!(
            "Node capacity: the {} node(s) the backends report now; capacity history is not recorded.",
            nodes.len()
        )];
        notes.push("Not replayed: stage concurrency limits, retries of failed runs, the loop's own latency.".into());
        if workload.estimated_runtimes > 0 {
            notes.push(format!(
                "{} job(s) have no recorded runtime (never ran, or still running): estimated from finished jobs with the same labels.",
                workload.estimated_runtimes
            ));
        }
        let tick = resolution_ms(&workload, span);
        if tick > 0 {
            notes.push(format!("Events are replayed in ticks of {:.1} s (more than {EXACT_UP_TO} jobs): an admission may come up to one tick later.", tick as f64 / 1000.0));
        }
        if workload.unreadable > 0 {
            notes.push(format!("{} recorded job(s) have a request that no longer passes the checks; left out.", workload.unreadable));
        }
        let jobs = workload.records.iter().filter(|r| !r.running_at_start).count() as u64 - workload.pending_at_start;
        Ok::<_, PreviewError>(PreviewReport {
            from: time_of(span.from_us),
            to: time_of(span.to_us),
            active_version: version,
            identical,
            jobs,
            running_at_start: workload.running_at_start,
            pending_at_start: workload.pending_at_start,
            estimated_runtimes: workload.estimated_runtimes,
            queues,
            usage,
            usage_step_s,
            change_counts,
            changes,
            changes_truncated,
            now,
            fidelity,
            notes,
            elapsed_ms: 0,
        })
    });
    let mut out = job.await.map_err(|e| PreviewError::BadRequest(format!("the replay failed: {e}")))??;
    out.elapsed_ms = t0.elapsed().as_millis() as u64;
    Ok(out)
}

/// Above this many jobs, events are coalesced into ticks (see [`resolution_ms`]).
pub const EXACT_UP_TO: usize = 5_000;

/// Exact event times for a small record; else ticks of a 10,000th of the window (8.6 s for a
/// day, at most 10 s): one cycle per tick keeps a day of 50,000 jobs within seconds. The cost
/// is fidelity in saturated queues, where a later admission delays the next: the bench's
/// wait error against its record is 106 s with exact times and 275 s with 8.6 s ticks.
pub fn resolution_ms(w: &load::Workload, span: Span) -> i64 {
    if w.arrivals.len() <= EXACT_UP_TO {
        return 0;
    }
    ((span.to_us - span.from_us) / 1000 / 10_000).clamp(1, 10_000)
}

/// Both replays, on two threads (one when the draft is the active config).
fn replay(
    w: &load::Workload,
    active: &Compiled,
    draft: &Compiled,
    identical: bool,
    (nodes, limits): (&[Node], &[InFlightLimit]),
    span: Span,
    control: &Control,
) -> Result<(sim::Report, sim::Report), PreviewError> {
    let opts = sim::Options {
        start_ms: Some(span.from_us / 1000),
        resolution_ms: resolution_ms(w, span),
        limits: limits.to_vec(),
        ..sim::Options::default()
    };
    let sides = if identical { 1 } else { 2 };
    control.total.store(w.arrivals.len() as u64 * sides, Ordering::Relaxed);
    let run = |c: &Compiled| {
        let mut last = 0u64;
        sim::run_with(c, nodes, &w.arrivals, &opts, &mut |p| {
            let now = p.submitted as u64;
            control.done.fetch_add(now - last, Ordering::Relaxed);
            last = now;
            !control.is_cancelled()
        })
    };
    let cancelled = |_: Cancelled| PreviewError::Cancelled;
    if identical {
        let a = run(active).map_err(cancelled)?;
        return Ok((a.clone(), a));
    }
    std::thread::scope(|s| {
        let d = s.spawn(|| run(draft));
        let a = run(active).map_err(cancelled)?;
        let d = d.join().map_err(|_| PreviewError::BadRequest("the draft's replay failed; see the server log".into()))?;
        Ok((a, d.map_err(cancelled)?))
    })
}

#[cfg(test)]
mod progress_tests {
    use super::*;

    #[test]
    fn a_tracked_preview_reports_progress_until_it_ends() {
        let control = Arc::new(Control::default());
        control.total.store(10, Ordering::Relaxed);
        control.done.store(4, Ordering::Relaxed);
        {
            let _t = Tracked::new("tok-1", &control);
            assert_eq!(progress("tok-1"), Some((4, 10)));
            assert_eq!(progress("other"), None);
        }
        assert_eq!(progress("tok-1"), None, "gone once the preview ends");
    }
}
