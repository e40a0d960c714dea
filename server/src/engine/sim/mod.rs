//! A simulated-time driver: replays arrivals through the real engine, event to event.
//!
//! Pure and deterministic like the engine: time is a number advanced from one event (an
//! arrival or a finish) to the next; at each instant every finish and arrival due is
//! applied, then [`schedule`] runs and its plan is applied — admitted jobs finish at
//! `now + runtime`; victims go back to pending *keeping their original enqueue time* and
//! their work restarts from zero when readmitted. After a plan with preemptions the cycle
//! runs again at the same instant so the requeued victims are reconsidered. Used by the
//! Kueue baseline bench and the what-if replay of recorded workload (`crate::services::preview`).
//!
//! A replay can start mid-stream: [`Submit::Running`] jobs already hold quota and a node
//! when the clock starts ([`Options::start_ms`]), arrivals from before the start are
//! submitted at the start keeping their own enqueue time, and an arrival with
//! `withdraw_at_ms` leaves at that time whatever its state (a user's cancel).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::Arc;

use app::config::Labels;

mod gate;

use self::gate::Gate;
use super::compile::Compiled;
use super::cycle::schedule;
use super::resources::{Milli, Name, Resources};
use super::route::{check_submittable, route};
use super::snapshot::{FlavorAssignment, InFlightLimit, Node, PendingJob, RunningJob, Snapshot};

/// How a simulated job enters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Submit {
    /// Routed by labels through the scheduling rules, priority policy applied.
    Labels {
        /// The job's labels.
        labels: Labels,
        /// Requested priority, if any.
        priority: Option<i64>,
    },
    /// Already routed: straight into `queue` with `priority`.
    Queue {
        /// Queue name.
        queue: Name,
        /// Effective priority.
        priority: i64,
    },
    /// Already admitted when the replay starts: holds quota in `queue` under `flavors` and
    /// room on `node` (charged as the engine charges any running job: a queue or flavor the
    /// config lacks charges nothing), finishing `runtime_ms` after the start.
    Running {
        /// Queue it was admitted to.
        queue: Name,
        /// Its priority.
        priority: i64,
        /// Flavors it holds.
        flavors: Vec<FlavorAssignment>,
        /// Node it runs on.
        node: Name,
        /// When it was admitted (before the start; orders preemption victims).
        started_at_ms: i64,
    },
}

/// One job of the workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    /// Unique job id.
    pub id: Name,
    /// Submit time.
    pub at_ms: i64,
    /// Routing.
    pub submit: Submit,
    /// What it asks for.
    pub request: Resources,
    /// How long it runs once admitted (from scratch after a preemption).
    pub runtime_ms: i64,
    /// When it leaves, pending or running (cancelled by its user); `None`: never.
    pub withdraw_at_ms: Option<i64>,
}

/// Limits of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Stop advancing past this time (`None`: until no event is left).
    pub until_ms: Option<i64>,
    /// Cycles per instant at most (re-runs after preemptions).
    pub max_cycles_per_instant: usize,
    /// The clock starts here (`None`: at the first arrival); earlier arrivals are submitted
    /// at the start, keeping their `at_ms` as enqueue time.
    pub start_ms: Option<i64>,
    /// Offer each cycle only the pending jobs quota does not already refuse (`gate.rs`): the
    /// same admissions, without re-deciding a large backlog on every event.
    pub gate: bool,
    /// Events are coalesced to the next multiple of this many milliseconds (0: none): one
    /// cycle per tick instead of one per event, so a day of jobs replays in seconds; an
    /// admission then happens up to one tick later than with exact event times.
    pub resolution_ms: i64,
    /// The backends' in-flight caps, as the admission loop applies them.
    pub limits: Vec<InFlightLimit>,
}

impl Default for Options {
    fn default() -> Options {
        Options { until_ms: None, max_cycles_per_instant: 16, start_ms: None, gate: true, resolution_ms: 0, limits: Vec::new() }
    }
}

/// How far a run has got, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Arrivals submitted so far.
    pub submitted: usize,
    /// Arrivals in all.
    pub total: usize,
    /// The simulated clock.
    pub now_ms: i64,
}

/// A run stopped by its caller's control function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the replay was cancelled")]
pub struct Cancelled;

/// Instants between two calls of the control function.
const CONTROL_EVERY: u64 = 512;

/// What happened to one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    /// Job id.
    pub id: Name,
    /// Queue it was routed to; for a priority outside the rule's bounds, the rule's queue;
    /// `None` when no rule matched.
    pub queue: Option<Name>,
    /// Effective priority.
    pub priority: i64,
    /// Submit time.
    pub arrived_ms: i64,
    /// First admission.
    pub first_admitted_ms: Option<i64>,
    /// Last admission (differs after preemptions; Kueue's recorder counts this one).
    pub last_admitted_ms: Option<i64>,
    /// Completion.
    pub finished_ms: Option<i64>,
    /// Times it was preempted.
    pub preempted: u32,
    /// Rejection reason at submit.
    pub rejected: Option<String>,
    /// When it was withdrawn, if it had not finished by its `withdraw_at_ms`.
    pub withdrawn_ms: Option<i64>,
    /// The cohort peers that lent what its last admission borrowed (empty: it borrowed nothing).
    pub lenders: Vec<Name>,
}

/// Usage of one queue × flavor × resource over time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageSeries {
    /// Queue.
    pub queue: Name,
    /// Flavor.
    pub flavor: Name,
    /// Resource.
    pub resource: Name,
    /// Nominal quota (`None` = unlimited).
    pub nominal: Option<Milli>,
    /// `(time, usage from then on)`, one point per change.
    pub points: Vec<(i64, Milli)>,
}

impl UsageSeries {
    /// Time-weighted average usage over `[from, to)`, in milli-units.
    pub fn average(&self, from_ms: i64, to_ms: i64) -> f64 {
        if to_ms <= from_ms {
            return 0.0;
        }
        let mut area = 0i128;
        for (i, &(t, v)) in self.points.iter().enumerate() {
            let end = self.points.get(i + 1).map_or(to_ms, |p| p.0).min(to_ms);
            let start = t.max(from_ms);
            if end > start {
                area += (end - start) as i128 * v.0 as i128;
            }
        }
        area as f64 / (to_ms - from_ms) as f64
    }
}

/// Everything a run recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// One record per arrival, in input order.
    pub jobs: Vec<JobRecord>,
    /// Every quota cell of the config (and any cell jobs were charged to), in config order.
    pub usage: Vec<UsageSeries>,
    /// Time of the last event processed.
    pub end_ms: i64,
    /// Cycles run.
    pub cycles: u64,
    /// Decisions made: pending jobs evaluated, summed over cycles.
    pub decisions: u64,
    /// Admissions applied.
    pub admissions: u64,
    /// Victims stopped.
    pub preemptions: u64,
}

/// `r` with its resource names shared with the config's: the engine compares names on every
/// cycle, and equal `Arc`s compare by pointer.
fn interned(c: &Compiled, r: &Resources) -> Resources {
    Resources::new(r.iter().map(|(n, a)| (c.resources.iter().find(|x| *x == n).unwrap_or(n).clone(), a)))
}

/// Replays `arrivals` on `nodes` under `config`.
pub fn run(config: &Compiled, nodes: &[Node], arrivals: &[Arrival], opts: &Options) -> Report {
    match run_with(config, nodes, arrivals, opts, &mut |_| true) {
        Ok(report) => report,
        Err(Cancelled) => unreachable!("a control that always continues never cancels"),
    }
}

/// [`run`], calling `control` every few hundred instants (and once at the end); the run
/// stops with [`Cancelled`] as soon as it returns false.
pub fn run_with(
    config: &Compiled,
    nodes: &[Node],
    arrivals: &[Arrival],
    opts: &Options,
    control: &mut dyn FnMut(Progress) -> bool,
) -> Result<Report, Cancelled> {
    let mut sim = Sim::new(config, arrivals, opts.gate);
    let mut order: Vec<usize> = (0..arrivals.len()).collect();
    order.sort_by_key(|&i| (arrivals[i].at_ms, i));
    let mut withdrawals: Vec<(i64, usize)> =
        arrivals.iter().enumerate().filter_map(|(i, a)| a.withdraw_at_ms.map(|t| (t, i))).collect();
    withdrawals.sort_unstable();
    let (mut next, mut next_withdrawal) = (0, 0);
    let Some(&first) = order.first() else { return Ok(sim.report) };
    let mut now = opts.start_ms.unwrap_or(arrivals[first].at_ms);
    let mut instants = 0u64;
    loop {
        sim.finish_due(now);
        while next_withdrawal < withdrawals.len() && withdrawals[next_withdrawal].0 <= now {
            sim.withdraw(withdrawals[next_withdrawal].1, now);
            next_withdrawal += 1;
        }
        while next < order.len() && arrivals[order[next]].at_ms <= now {
            sim.submit(config, nodes, order[next], now);
            next += 1;
        }
        for _ in 0..opts.max_cycles_per_instant.max(1) {
            if !sim.cycle(config, nodes, &opts.limits, now) {
                break;
            }
        }
        sim.report.end_ms = now;
        instants += 1;
        if instants.is_multiple_of(CONTROL_EVERY) && !control(Progress { submitted: next, total: order.len(), now_ms: now }) {
            return Err(Cancelled);
        }
        let t_finish = sim.finishes.peek().map(|Reverse((t, _, _))| *t);
        let t_arrive = order.get(next).map(|&i| arrivals[i].at_ms);
        let t_withdraw = withdrawals.get(next_withdrawal).map(|w| w.0);
        now = match [t_finish, t_arrive, t_withdraw].into_iter().flatten().min() {
            Some(t) if opts.resolution_ms > 0 => t.div_euclid(opts.resolution_ms) * opts.resolution_ms + opts.resolution_ms * i64::from(t.rem_euclid(opts.resolution_ms) != 0),
            Some(t) => t,
            None => break,
        };
        if opts.until_ms.is_some_and(|u| now > u) {
            break;
        }
    }
    if !control(Progress { submitted: next, total: order.len(), now_ms: sim.report.end_ms }) {
        return Err(Cancelled);
    }
    Ok(sim.report)
}

struct Sim<'a> {
    config: &'a Compiled,
    gate: Option<Gate>,
    arrivals: &'a [Arrival],
    ids: HashMap<Name, usize>,
    pending: Vec<PendingJob>,
    running: Vec<RunningJob>,
    /// Arrival index of each entry of `running`.
    running_idx: Vec<usize>,
    finishes: BinaryHeap<Reverse<(i64, usize, u32)>>,
    generation: Vec<u32>,
    cells: BTreeMap<(Name, Name, Name), usize>,
    /// `cells` by the names' addresses; `keep` holds those names so no address is reused.
    by_address: HashMap<(usize, usize, usize), usize>,
    keep: Vec<[Name; 3]>,
    report: Report,
}

impl<'a> Sim<'a> {
    fn new(config: &'a Compiled, arrivals: &'a [Arrival], gate: bool) -> Sim<'a> {
        let mut cells = BTreeMap::new();
        let mut usage = Vec::new();
        for c in config.quota_cells() {
            cells.insert((c.queue.clone(), c.flavor.clone(), c.resource.clone()), usage.len());
            usage.push(UsageSeries {
                queue: c.queue,
                flavor: c.flavor,
                resource: c.resource,
                nominal: c.nominal,
                points: vec![],
            });
        }
        let jobs = arrivals
            .iter()
            .map(|a| JobRecord {
                id: a.id.clone(),
                queue: None,
                priority: 0,
                arrived_ms: a.at_ms,
                first_admitted_ms: None,
                last_admitted_ms: None,
                finished_ms: None,
                preempted: 0,
                rejected: None,
                withdrawn_ms: None,
                lenders: Vec::new(),
            })
            .collect();
        Sim {
            config,
            gate: gate.then(|| Gate::new(config)),
            arrivals,
            ids: arrivals.iter().enumerate().map(|(i, a)| (a.id.clone(), i)).collect(),
            pending: Vec::new(),
            running: Vec::new(),
            running_idx: Vec::new(),
            finishes: BinaryHeap::new(),
            generation: vec![0; arrivals.len()],
            cells,
            by_address: HashMap::new(),
            keep: Vec::new(),
            report: Report { jobs, usage, end_ms: 0, cycles: 0, decisions: 0, admissions: 0, preemptions: 0 },
        }
    }

    /// Routes, checks and enqueues arrival `i` at `now` (an already running one is placed).
    fn submit(&mut self, config: &Compiled, nodes: &[Node], i: usize, now: i64) {
        let a = &self.arrivals[i];
        let routed = match &a.submit {
            Submit::Labels { labels, priority } => route(config, labels, *priority).map(|r| (r.queue, r.priority)).map_err(|e| {
                // A priority outside the bounds still names its rule's queue (routing without
                // a priority never violates them).
                (e, route(config, labels, None).ok().map(|r| r.queue))
            }),
            Submit::Queue { queue, priority } => Ok((queue.clone(), *priority)),
            Submit::Running { queue, priority, flavors, node, started_at_ms } => {
                let job = RunningJob {
                    id: a.id.clone(),
                    queue: queue.clone(),
                    priority: *priority,
                    request: interned(config, &a.request),
                    flavors: flavors.clone(),
                    node: node.clone(),
                    started_at_ms: *started_at_ms,
                };
                let rec = &mut self.report.jobs[i];
                (rec.queue, rec.priority) = (Some(queue.clone()), *priority);
                (rec.first_admitted_ms, rec.last_admitted_ms) = (Some(*started_at_ms), Some(*started_at_ms));
                self.start(i, job, now);
                return;
            }
        };
        let rec = &mut self.report.jobs[i];
        let (queue, priority) = match routed {
            Ok(qp) => qp,
            Err((e, queue)) => {
                rec.queue = queue;
                rec.rejected = Some(e.reason);
                return;
            }
        };
        rec.queue = Some(queue.clone());
        rec.priority = priority;
        if let Err(e) = check_submittable(config, nodes, &queue, &a.request) {
            return rec.rejected = Some(e.reason);
        }
        self.pending.push(PendingJob { id: a.id.clone(), queue, priority, request: interned(config, &a.request), enqueued_at_ms: a.at_ms });
    }

    /// Charges a job to its queue and node and schedules its finish.
    fn start(&mut self, i: usize, job: RunningJob, now: i64) {
        self.charge(&job, now, true);
        self.generation[i] += 1;
        self.finishes.push(Reverse((now.saturating_add(self.arrivals[i].runtime_ms.max(0)), i, self.generation[i])));
        self.running.push(job);
        self.running_idx.push(i);
    }

    /// Removes the running job of arrival `i`, releasing its usage at `t`.
    fn stop(&mut self, i: usize, t: i64) -> Option<RunningJob> {
        let at = self.running_idx.iter().position(|&k| k == i)?;
        self.running_idx.swap_remove(at);
        let job = self.running.swap_remove(at);
        self.charge(&job, t, false);
        Some(job)
    }

    /// Arrival `i` leaves at `now` (its user cancelled it), pending or running.
    fn withdraw(&mut self, i: usize, now: i64) {
        let rec = &self.report.jobs[i];
        if rec.finished_ms.is_some() || rec.rejected.is_some() {
            return;
        }
        let id = &self.arrivals[i].id;
        let queue = self.report.jobs[i].queue.clone().unwrap_or_default();
        if let Some(at) = self.pending.iter().position(|p| p.id == *id) {
            self.pending.remove(at);
        } else if self.gate.as_mut().is_some_and(|g| g.remove(self.config, &queue, id)) {
            // it was parked
        } else if self.stop(i, now).is_some() {
            self.generation[i] += 1; // its finish never happens
        } else {
            return; // not submitted yet: nothing to undo
        }
        self.report.jobs[i].withdrawn_ms = Some(now);
    }

    /// Completes every job whose finish time has come.
    fn finish_due(&mut self, now: i64) {
        while let Some(&Reverse((t, i, generation))) = self.finishes.peek() {
            if t > now {
                break;
            }
            self.finishes.pop();
            if generation != self.generation[i] {
                continue; // preempted since; that finish never happens
            }
            if self.stop(i, t).is_some() {
                self.report.jobs[i].finished_ms = Some(t);
            }
        }
    }

    /// One cycle at `now`; true when it preempted (so another cycle should run).
    fn cycle(&mut self, config: &Compiled, nodes: &[Node], limits: &[InFlightLimit], now: i64) -> bool {
        if let Some(gate) = &mut self.gate {
            gate.unpark(config, &mut self.pending);
            gate.park(config, &mut self.pending);
        }
        if self.pending.is_empty() {
            return false;
        }
        let snap = Snapshot { now_ms: now, config, nodes, running: &self.running, pending: &self.pending, limits };
        let plan = schedule(&snap);
        self.report.cycles += 1;
        self.report.decisions += self.pending.len() as u64;
        for victim in plan.victims() {
            let Some(&i) = self.ids.get(victim) else { continue };
            let Some(job) = self.stop(i, now) else { continue };
            self.generation[i] += 1;
            self.report.jobs[i].preempted += 1;
            self.report.preemptions += 1;
            self.pending.push(PendingJob {
                id: job.id,
                queue: job.queue,
                priority: job.priority,
                request: job.request,
                enqueued_at_ms: self.arrivals[i].at_ms,
            });
        }
        let admitted: HashMap<&str, usize> = plan.admissions.iter().enumerate().map(|(k, a)| (&*a.job, k)).collect();
        let mut kept = Vec::with_capacity(self.pending.len());
        for p in std::mem::take(&mut self.pending) {
            let Some(&k) = admitted.get(&*p.id) else {
                kept.push(p);
                continue;
            };
            let a = &plan.admissions[k];
            let i = self.ids[&p.id];
            let job = RunningJob {
                id: p.id,
                queue: p.queue,
                priority: p.priority,
                request: p.request,
                flavors: a.flavors.clone(),
                node: a.node.clone(),
                started_at_ms: now,
            };
            self.start(i, job, now);
            let rec = &mut self.report.jobs[i];
            rec.first_admitted_ms.get_or_insert(now);
            rec.last_admitted_ms = Some(now);
            rec.lenders = a.borrowed.iter().flat_map(|b| b.lenders.iter().map(|(q, _)| q.clone())).collect();
            rec.lenders.sort_unstable();
            rec.lenders.dedup();
            self.report.admissions += 1;
        }
        self.pending = kept;
        !plan.preemptions.is_empty()
    }

    /// Adds (or removes) a job's usage to the series at time `t`.
    fn charge(&mut self, job: &RunningJob, t: i64, add: bool) {
        if let Some(gate) = &mut self.gate {
            gate.charge(self.config, job, add);
        }
        for fa in &job.flavors {
            for res in &fa.resources {
                // Names are shared Arcs (the config's), so their addresses find the cell without
                // comparing strings; the name-keyed map is the fallback and the source of truth.
                let fast = (Arc::as_ptr(&job.queue) as *const u8 as usize, Arc::as_ptr(&fa.flavor) as *const u8 as usize, Arc::as_ptr(res) as *const u8 as usize);
                let usage = &mut self.report.usage;
                let at = match self.by_address.get(&fast) {
                    Some(&at) => at,
                    None => {
                        let key = (job.queue.clone(), fa.flavor.clone(), res.clone());
                        let at = *self.cells.entry(key).or_insert_with(|| {
                    usage.push(UsageSeries {
                        queue: job.queue.clone(),
                        flavor: fa.flavor.clone(),
                        resource: res.clone(),
                        nominal: None,
                        points: vec![],
                    });
                    usage.len() - 1
                });
                        self.by_address.insert(fast, at);
                        self.keep.push([job.queue.clone(), fa.flavor.clone(), res.clone()]);
                        at
                    }
                };
                let series = &mut usage[at];
                let last = series.points.last().map_or(Milli::ZERO, |p| p.1);
                let amount = job.request.get(res);
                let value = if add { last.plus(amount) } else { last.minus(amount) };
                match series.points.last_mut() {
                    Some(p) if p.0 == t => p.1 = value,
                    _ => series.points.push((t, value)),
                }
            }
        }
    }
}
