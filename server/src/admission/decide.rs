//! A decision, in four steps: offer (which pending jobs the engine sees now, which wait for
//! a retry backoff or their stage's limit) → plan (the engine, once or twice, see
//! `engine::quick`) → preempt and admit (the plan applied to the live jobs) → record the
//! positions and reasons of the jobs left waiting.

use engine::{Admission, PendingInfo, Plan, Preemption};

use super::events;
use super::gate::Gate;

use super::*;

/// What one decision offers the engine, borrowed from the live jobs.
pub(super) struct Offer<'a> {
    running: Vec<RunningJob>,
    offered: Vec<PendingJob>,
    /// The quick cut of each long fifo queue (none in a full cycle).
    cuts: Vec<Cut<'a>>,
    /// Pending jobs not offered now, with why (position 0).
    held_back: Vec<(Name, String)>,
    /// Pending jobs whose dependency can never be met, with why.
    unmeetable: Vec<(Name, String)>,
    /// The earliest retry backoff still running.
    next_retry: Option<i64>,
}

/// What a pending job is to a decision now.
enum Sorted {
    /// Offered.
    Open,
    /// In a stage that caps its running jobs: offered if the stage may run one more.
    Staged,
    /// Held back, with why: a hold, a dependency, or a retry's backoff (ending then).
    Held(String, Option<i64>),
    /// Its dependency can never be met, with why.
    Never(String),
}

impl Offer<'_> {
    fn file<'a>(&mut self, l: &'a Live, sorted: Sorted, staged: &mut Vec<&'a Live>) {
        match sorted {
            Sorted::Open => self.offered.push(l.pending_job()),
            Sorted::Staged => staged.push(l),
            Sorted::Held(why, retry_at) => {
                if let Some(t) = retry_at {
                    self.next_retry = Some(self.next_retry.map_or(t, |n| n.min(t)));
                }
                self.held_back.push((l.key.clone(), why));
            }
            Sorted::Never(why) => self.unmeetable.push((l.key.clone(), why)),
        }
    }
}

impl Loop {
    /// Runs the engine and applies its plan to the live state; returns the jobs to start.
    pub(super) fn decide(&mut self, now: i64, batch: &mut Batch) -> Vec<Name> {
        for key in &batch.touched {
            self.lanes.sync(key, self.state.jobs.get(key));
        }
        #[cfg(debug_assertions)]
        self.lanes.check(&self.state.jobs);
        // 1. Offer, and 2. plan (borrowing the live jobs).
        let (plan, explained, held_back, next_retry, unmeetable) = {
            let quick = !self.explain_due && self.explained_at.is_some_and(|t| t.elapsed() < EXPLAIN_EVERY);
            let mut offer = self.offer(now, quick);
            let (plan, explained) = self.plan(&mut offer, now);
            (plan, explained, offer.held_back, offer.next_retry, offer.unmeetable)
        };
        self.next_retry = next_retry;
        self.fail_unmeetable(unmeetable, now, batch);
        // 3. Preempt, then admit.
        self.preempt(&plan.preemptions, now, batch);
        let starts = self.admit(&plan.admissions, now, batch);
        // 4. Positions and reasons of the jobs left waiting.
        self.record_waiting(plan.pending, held_back.into_iter(), explained);
        if !plan.preemptions.is_empty() {
            // The victims wait again but were running when this cycle began: the next full
            // cycle, due within EXPLAIN_EVERY as for the jobs a quick cycle leaves out, says
            // where they stand and why instead of "preempted by …". Not one at once: under
            // steady preemption that doubled the full cycles, the loop's largest cost.
            self.full_cycle_due();
        }
        starts
    }

    /// The running jobs and the pending ones the engine is offered now: every pending job
    /// (a full cycle), or (`quick`) the first ones of each long fifo queue, read off its
    /// lane (see `engine::quick`).
    fn offer(&self, now: i64, quick: bool) -> Offer<'_> {
        let mut o = Offer { running: Vec::new(), offered: Vec::new(), cuts: Vec::new(), held_back: Vec::new(), unmeetable: Vec::new(), next_retry: self.next_retry };
        let mut held_by_stage: HashMap<&str, u32> = HashMap::new();
        for l in self.lanes.holding().filter_map(|k| self.state.jobs.get(k)) {
            if let Some(s) = &l.row.stage_id {
                *held_by_stage.entry(s.as_str()).or_default() += 1;
            }
            o.running.push(l.running_job());
        }
        // The engine orders what it is offered itself, so only the jobs of capped stages
        // are sorted here: each such stage offers only as many of its jobs as it may still
        // run, its first ones in queue order.
        let mut staged: Vec<&Live> = Vec::new();
        let job = |id: &Name| self.state.jobs.get(id);
        for (queue, lane) in self.lanes.queues() {
            match self.state.compiled.fifo_strategy(queue).filter(|_| quick) {
                Some(strategy) => {
                    let c = engine::quick::cut(lane, strategy, QUICK_OFFER, job, |l| matches!(self.sort(l, now), Sorted::Open));
                    for l in c.refused {
                        o.file(l, self.sort(l, now), &mut staged);
                    }
                    o.offered.extend(c.offered.into_iter().map(Live::pending_job));
                    o.cuts.extend(c.cut);
                }
                None => {
                    for l in lane.iter().filter_map(job) {
                        o.file(l, self.sort(l, now), &mut staged);
                    }
                }
            }
        }
        staged.sort_by(|a, b| b.row.priority.cmp(&a.row.priority).then(a.row.enqueued_at_us.cmp(&b.row.enqueued_at_us)).then(a.key.cmp(&b.key)));
        for l in staged {
            let stage = l.row.stage_id.as_deref().unwrap_or_default();
            let cap = self.state.stages.get(stage).copied().unwrap_or(0);
            let held = held_by_stage.entry(stage).or_default();
            if *held >= cap {
                o.held_back.push((l.key.clone(), format!("its stage runs at most {cap} jobs at once, and {cap} are running")));
                continue;
            }
            *held += 1;
            o.offered.push(l.pending_job());
        }
        o
    }

    /// What pending job `l` is to a decision now.
    fn sort(&self, l: &Live, now: i64) -> Sorted {
        match self.gate(l) {
            Gate::Open => {}
            Gate::Wait(why) => return Sorted::Held(why, None),
            Gate::Never(why) => return Sorted::Never(why),
        }
        if let Some(t) = l.row.retry_at_us.filter(|t| *t > now) {
            let why = l.row.reason.clone().unwrap_or_default();
            let left = (t - now) as f64 / 1e6;
            let msg = if self.backend_waits.contains(&l.key) {
                format!("{}; retrying in {left:.1} s", why.split("; retrying in").next().unwrap_or_default())
            } else {
                format!("retry {} of {} in {left:.1} s ({why})", l.row.retries, l.row.spec.max_retries)
            };
            return Sorted::Held(msg, Some(t));
        }
        match l.row.stage_id.as_deref() {
            Some(s) if self.state.stages.get(s).is_some_and(|&cap| cap > 0) => Sorted::Staged,
            _ => Sorted::Open,
        }
    }

    /// The engine's plan for `offer`, and whether it explains every waiting job (a quick
    /// plan that is not provably the full one is made again with every job).
    fn plan<'a>(&'a self, offer: &mut Offer<'a>, now: i64) -> (Plan, bool) {
        let now_ms = now / 1000;
        let compiled = &self.state.compiled;
        let nodes = &self.state.nodes;
        let limits = &self.limits;
        let t_engine = Instant::now();
        let mut plan = engine::schedule(&Snapshot { now_ms, config: compiled, nodes, running: &offer.running, pending: &offer.offered, limits });
        let quick = !offer.cuts.is_empty();
        if quick && !engine::quick::exact(&offer.cuts, &plan) {
            *offer = self.offer(now, false);
            plan = engine::schedule(&Snapshot { now_ms, config: compiled, nodes, running: &offer.running, pending: &offer.offered, limits });
        }
        let explained = offer.cuts.is_empty();
        tracing::debug!(pending = offer.offered.len(), quick, explained, engine_us = t_engine.elapsed().as_micros() as u64, "engine cycle");
        (plan, explained)
    }

    /// Victims go back to pending, keeping their enqueue time; their runs are stopped after
    /// the commit. Each gets a `preempted` event saying why it could be (within its queue, a
    /// reclaim, a borrow); a reclaiming preemptor gets a `reclaimed` one.
    fn preempt(&mut self, preemptions: &[Preemption], now: i64, batch: &mut Batch) {
        let version = self.state.config_version;
        for p in preemptions {
            let preemptor_priority = self.state.jobs.get(&p.preemptor).map_or(0, |l| l.row.priority);
            let preemptor_name = self.state.jobs.get(&p.preemptor).map_or_else(String::new, |l| l.row.name.clone());
            let cohort = self.state.compiled.cohort_of(&p.queue).cloned();
            if let Some(mut e) = self.state.jobs.get(&p.preemptor).and_then(|l| events::reclaimed(now, p, l, cohort.as_ref())) {
                e.config_version = Some(version);
                batch.events.push(e);
            }
            let priorities: Vec<i64> = p.victims.iter().map(|v| self.state.jobs.get(&v.job).map_or(0, |l| l.row.priority)).collect();
            for v in &p.victims {
                let Some(live) = self.state.jobs.get_mut(&v.job) else { continue };
                if let (Some(b), Some(h)) = (live.row.backend.clone(), live.row.handle.clone()) {
                    batch.stops.push((b.as_str().into(), live.run(), h));
                }
                self.metrics.preemptions.with_label_values(&[&*v.queue, v.cause.as_str()]).inc();
                let mut e = events::preempted(now, p, v, live, (&preemptor_name, preemptor_priority, &priorities), cohort.as_ref());
                e.config_version = Some(version);
                batch.events.push(e);
                live.row.state = JobState::Pending;
                live.row.admitted_at_us = None;
                live.row.started_at_us = None;
                // Until the full cycle right after says where it stands and why it waits.
                live.row.reason = Some(format!("preempted by {}; back in its queue", events::said_name(&preemptor_name, &p.preemptor)));
                live.clear_placement();
                batch.touch(&v.job);
            }
        }
    }

    /// Admissions become `admitted`; their runs start after the commit.
    fn admit(&mut self, admissions: &[Admission], now: i64, batch: &mut Batch) -> Vec<Name> {
        let version = self.state.config_version;
        let mut starts = Vec::with_capacity(admissions.len());
        for a in admissions {
            let Some(live) = self.state.jobs.get_mut(&a.job) else { continue };
            live.row.state = JobState::Admitted;
            live.row.admitted_at_us = Some(now);
            self.metrics.admission_wait.with_label_values(&[&*a.queue]).observe(crate::metrics::seconds_between(live.row.enqueued_at_us, now));
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
            batch.events.extend(events::borrowed(now, a, live).map(|mut e| { e.config_version = Some(version); e }));
            batch.touch(&a.job);
            starts.push(a.job.clone());
        }
        starts
    }

    /// What the last full cycle said of each waiting job; quick cycles leave it as it is
    /// and make sure a full one comes within [`EXPLAIN_EVERY`].
    fn record_waiting(&mut self, pending: Vec<PendingInfo>, held_back: impl Iterator<Item = (Name, String)>, explained: bool) {
        let mut waiting: Vec<(Name, Wait)> = pending
            .into_iter()
            .map(|p| (p.job, Wait { position: p.position as u64, reason: p.reason, headline: Some(p.headline) }))
            .collect();
        waiting.extend(held_back.map(|(key, why)| (key, Wait { position: 0, reason: why.into(), headline: None })));
        if explained {
            self.state.waiting = Waiting::new(waiting);
            self.waiting_changed();
            self.explain_due = false;
            self.explained_at = Some(Instant::now());
            self.explain_at = None;
        } else {
            // Waiting jobs keep what the last full cycle said of them until the next one.
            self.full_cycle_due();
        }
    }

    /// A full cycle comes within [`EXPLAIN_EVERY`] of the last one (sooner if already due).
    fn full_cycle_due(&mut self) {
        let last = self.explained_at.unwrap_or_else(Instant::now);
        self.explain_at.get_or_insert(tokio::time::Instant::from_std(last + EXPLAIN_EVERY));
    }
}
