//! A simulated-time driver: replays arrivals through the real engine, event to event.
//!
//! Pure and deterministic like the engine: time is a number advanced from one event (an
//! arrival or a finish) to the next; at each instant every finish and arrival due is
//! applied, then [`schedule`] runs and its plan is applied — admitted jobs finish at
//! `now + runtime`; victims go back to pending *keeping their original enqueue time* and
//! their work restarts from zero when readmitted. After a plan with preemptions the cycle
//! runs again at the same instant so the requeued victims are reconsidered. Used by the
//! Kueue baseline bench and, later, the what-if replay of recorded workload.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use app::config::Labels;

use super::compile::Compiled;
use super::cycle::schedule;
use super::resources::{Milli, Name, Resources};
use super::route::{check_submittable, route};
use super::snapshot::{Node, PendingJob, RunningJob, Snapshot};

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
}

/// Limits of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Stop advancing past this time (`None`: until no event is left).
    pub until_ms: Option<i64>,
    /// Cycles per instant at most (re-runs after preemptions).
    pub max_cycles_per_instant: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options { until_ms: None, max_cycles_per_instant: 16 }
    }
}

/// What happened to one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    /// Job id.
    pub id: Name,
    /// Queue it was routed to (`None` if rejected by routing).
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

/// Replays `arrivals` on `nodes` under `config`.
pub fn run(config: &Compiled, nodes: &[Node], arrivals: &[Arrival], opts: &Options) -> Report {
    let mut sim = Sim::new(config, arrivals);
    let mut order: Vec<usize> = (0..arrivals.len()).collect();
    order.sort_by_key(|&i| (arrivals[i].at_ms, i));
    let mut next = 0;
    let Some(&first) = order.first() else { return sim.report };
    let mut now = arrivals[first].at_ms;
    loop {
        sim.finish_due(now);
        while next < order.len() && arrivals[order[next]].at_ms <= now {
            sim.submit(config, nodes, order[next]);
            next += 1;
        }
        for _ in 0..opts.max_cycles_per_instant.max(1) {
            if !sim.cycle(config, nodes, now) {
                break;
            }
        }
        sim.report.end_ms = now;
        let t_finish = sim.finishes.peek().map(|Reverse((t, _, _))| *t);
        let t_arrive = order.get(next).map(|&i| arrivals[i].at_ms);
        now = match (t_finish, t_arrive) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => break,
        };
        if opts.until_ms.is_some_and(|u| now > u) {
            break;
        }
    }
    sim.report
}

struct Sim<'a> {
    arrivals: &'a [Arrival],
    ids: HashMap<Name, usize>,
    pending: Vec<PendingJob>,
    running: Vec<RunningJob>,
    finishes: BinaryHeap<Reverse<(i64, usize, u32)>>,
    generation: Vec<u32>,
    cells: BTreeMap<(Name, Name, Name), usize>,
    report: Report,
}

impl<'a> Sim<'a> {
    fn new(config: &Compiled, arrivals: &'a [Arrival]) -> Sim<'a> {
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
            })
            .collect();
        Sim {
            arrivals,
            ids: arrivals.iter().enumerate().map(|(i, a)| (a.id.clone(), i)).collect(),
            pending: Vec::new(),
            running: Vec::new(),
            finishes: BinaryHeap::new(),
            generation: vec![0; arrivals.len()],
            cells,
            report: Report { jobs, usage, end_ms: 0, cycles: 0, decisions: 0, admissions: 0, preemptions: 0 },
        }
    }

    /// Routes, checks and enqueues arrival `i`.
    fn submit(&mut self, config: &Compiled, nodes: &[Node], i: usize) {
        let a = &self.arrivals[i];
        let routed = match &a.submit {
            Submit::Labels { labels, priority } => route(config, labels, *priority).map(|r| (r.queue, r.priority)),
            Submit::Queue { queue, priority } => Ok((queue.clone(), *priority)),
        };
        let rec = &mut self.report.jobs[i];
        let (queue, priority) = match routed {
            Ok(qp) => qp,
            Err(e) => return rec.rejected = Some(e.reason),
        };
        rec.queue = Some(queue.clone());
        rec.priority = priority;
        if let Err(e) = check_submittable(config, nodes, &queue, &a.request) {
            return rec.rejected = Some(e.reason);
        }
        self.pending.push(PendingJob {
            id: a.id.clone(),
            queue,
            priority,
            request: a.request.clone(),
            enqueued_at_ms: a.at_ms,
        });
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
            if let Some(at) = self.running.iter().position(|r| r.id == self.arrivals[i].id) {
                let job = self.running.swap_remove(at);
                self.charge(&job, t, false);
                self.report.jobs[i].finished_ms = Some(t);
            }
        }
    }

    /// One cycle at `now`; true when it preempted (so another cycle should run).
    fn cycle(&mut self, config: &Compiled, nodes: &[Node], now: i64) -> bool {
        if self.pending.is_empty() {
            return false;
        }
        let snap = Snapshot { now_ms: now, config, nodes, running: &self.running, pending: &self.pending };
        let plan = schedule(&snap);
        self.report.cycles += 1;
        self.report.decisions += self.pending.len() as u64;
        for victim in plan.victims() {
            let Some(at) = self.running.iter().position(|r| r.id == *victim) else { continue };
            let job = self.running.swap_remove(at);
            self.charge(&job, now, false);
            let i = self.ids[&job.id];
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
            self.charge(&job, now, true);
            self.generation[i] += 1;
            self.finishes.push(Reverse((now.saturating_add(self.arrivals[i].runtime_ms.max(0)), i, self.generation[i])));
            let rec = &mut self.report.jobs[i];
            rec.first_admitted_ms.get_or_insert(now);
            rec.last_admitted_ms = Some(now);
            self.report.admissions += 1;
            self.running.push(job);
        }
        self.pending = kept;
        !plan.preemptions.is_empty()
    }

    /// Adds (or removes) a job's usage to the series at time `t`.
    fn charge(&mut self, job: &RunningJob, t: i64, add: bool) {
        for fa in &job.flavors {
            for res in &fa.resources {
                let key = (job.queue.clone(), fa.flavor.clone(), res.clone());
                let usage = &mut self.report.usage;
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
