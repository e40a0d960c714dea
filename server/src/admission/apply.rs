//! Carrying out decisions: starting admitted runs, recording their results, writing each
//! cycle's changes (at once or in the background) and letting backends forget ended runs.

use super::*;
use super::term::Bound;

impl Loop {
    /// Whether the backend a job was admitted to records its starts (see
    /// [`StartJournal`](crate::backends::StartJournal)).
    pub(super) fn records_starts(&self, key: &Name) -> bool {
        let backend = self.state.jobs.get(key).and_then(|l| l.row.backend.as_deref());
        backend.and_then(|b| self.backends.get(b)).is_some_and(|b| b.journal().is_some())
    }

    /// Starts this cycle's admissions in order: on a backend that starts at once (local),
    /// right here; on the others, on one task that reports each result ([`Started`]) while
    /// the loop goes on. Their `admitted` rows are already committed, so a crash during the
    /// starts is recovered by adoption, except on a backend that records its starts, whose
    /// admissions may still be in the batch: recovery finds those runs in its records (see
    /// [`Loop::recover`]).
    pub(super) fn launch(&mut self, keys: Vec<Name>, batch: &mut Batch) {
        if !keys.is_empty() && !self.may_act() {
            // Their admissions are stored: the next leader finds them never started.
            return;
        }
        let mut todo = Vec::with_capacity(keys.len());
        for key in keys {
            let Some(live) = self.state.jobs.get(&key) else { continue };
            if live.row.state != JobState::Admitted {
                continue;
            }
            let backend_name = live.row.backend.clone().unwrap_or_default();
            let now = self.clock.now_us();
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
        // own would cost a hop to another thread on the way to every run. One that unpacks
        // packages first is not, and goes on the task.
        let (now, later): (Vec<_>, Vec<_>) = todo.into_iter().partition(|(b, _, spec)| b.traits().starts_at_once && spec.packages.is_empty());
        for (backend, name, spec) in now {
            let run = spec.run.clone();
            let result = futures_util::FutureExt::now_or_never(backend.start(spec))
                .unwrap_or_else(|| Err(BackendError::Failed(format!("backend {name} did not start the run at once"))));
            let at_us = self.clock.now_us();
            self.on_started(Started { run, backend: name, result, at_us, cut_short: false }, batch);
        }
        if later.is_empty() {
            return;
        }
        let tx = self.started_tx.clone();
        let clock = self.clock.clone();
        let term = self.term.as_ref().map(Term::bound);
        tokio::spawn(async move {
            // Paused past the lease between two starts: start no more; the loop ends its
            // term and the next one finds the runs not started as never started.
            let lapsed = |term: &Option<Bound>| term.as_ref().is_some_and(|t| !t.held_now());
            for (backend, name, specs) in by_backend(later) {
                let Some(first) = specs.first().map(|s| s.run.clone()) else { continue };
                let cut = Started { run: first, backend: name.clone(), result: Err(BackendError::Unavailable("the leader lease may have lapsed".into())), at_us: 0, cut_short: true };
                if lapsed(&term) {
                    let _ = tx.send(cut);
                    return;
                }
                let (tx, clock, term) = (tx.clone(), clock.clone(), term.clone());
                let report = move |run: RunId, result: Result<String, BackendError>| {
                    // The loop is gone when nobody receives: recovery adopts what was started.
                    if tx.send(Started { run, backend: name.clone(), result, at_us: clock.now_us(), cut_short: false }).is_err() {
                        return false;
                    }
                    if lapsed(&term) {
                        let _ = tx.send(cut.clone());
                        return false;
                    }
                    true
                };
                backend.start_many(specs, &report).await;
            }
        });
    }

    /// A start's result: the job runs, waits for its backend, or fails. A run whose job was
    /// cancelled or preempted while it started is stopped at once.
    pub(super) fn on_started(&mut self, s: Started, batch: &mut Batch) {
        if s.cut_short {
            self.start_cut_short();
            return;
        }
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
                if let Some(admitted) = live.row.admitted_at_us {
                    let seconds = crate::metrics::seconds_between(admitted, now);
                    self.metrics.admission_to_start.with_label_values(&[&*live.queue, backend_name.as_str()]).observe(seconds);
                }
                live.row.handle = Some(handle);
                if let Some(d) = deadline_of(&live.row) {
                    self.next_deadline = Some(self.next_deadline.map_or(d, |n| n.min(d)));
                }
                let msg = format!("started on {}", live.row.node.as_deref().unwrap_or("?"));
                batch.events.push(job_event(now, "started", live, msg));
                batch.touch(&key);
                if let Some(exit) = early {
                    self.end_run(&key, exit.outcome, self.clock.now_us(), batch);
                }
            }
            Err(BackendError::Unavailable(e)) => {
                self.metrics.backend_errors.with_label_values(&[backend_name.as_str(), "start"]).inc();
                let failures = self.down.get(&backend_name).map_or(0, |d| d.0) + 1;
                let delay = self.settings.retry_backoff.saturating_mul(1u32 << (failures - 1).min(8)).min(BACKEND_BACKOFF_MAX);
                let until = now + delay.as_micros() as i64;
                let why = format!("backend {backend_name} unavailable: {e}");
                self.down.insert(backend_name.clone(), (failures, until, why.clone()));
                tracing::warn!(backend = %backend_name, error = %e, retry_in_s = delay.as_secs_f64(), "backend unavailable; jobs wait");
                self.wait_for_backend(&key, why, until, now, batch);
            }
            Err(e) => {
                self.metrics.backend_errors.with_label_values(&[backend_name.as_str(), "start"]).inc();
                self.end_run(&key, Outcome::Failed(format!("could not start: {e}")), now, batch)
            }
        }
    }

    /// An admitted job whose backend is unavailable goes back to pending until `until`,
    /// keeping its enqueue time and its retries (the run was never started).
    pub(super) fn wait_for_backend(&mut self, key: &Name, why: String, until: i64, now: i64, batch: &mut Batch) {
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

    pub(super) fn start_spec(&self, live: &Live) -> StartSpec {
        let compiled = &self.state.compiled;
        let mut selector_labels = BTreeMap::new();
        for f in &live.flavors {
            if let Some(def) = compiled.flavors.iter().find(|d| d.name == f.flavor) {
                for m in &def.selector {
                    if let Some(v) = crate::backends::ray::selector_value(m) {
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
        if let Some(stage) = &live.row.stage_id {
            metadata.insert("stage".into(), stage.clone());
        }
        StartSpec {
            run: live.run(),
            entrypoint: live.row.spec.entrypoint.clone(),
            working_dir: live.row.spec.runtime_env.working_dir.clone(),
            env_vars: live.row.spec.runtime_env.env_vars.clone(),
            runtime_env: live.row.spec.runtime_env.other.clone(),
            resources: live.request.clone(),
            timeout_s: live.row.spec.timeout_s,
            node: live.node.clone().unwrap_or_else(|| "".into()),
            flavors: live.flavors.clone(),
            selector_labels,
            metadata,
            packages: app::request::packages(&live.row.spec.runtime_env)
                .into_iter()
                .map(|name| PackageFile { uri: format!("gcs://{name}"), path: crate::store::packages::file_of(&self.settings.data_dir, name) })
                .collect(),
        }
    }

    /// Writes the batch's touched jobs and events; drops terminal jobs from memory; answers
    /// the commands that waited for the commit. A failed write is retried with backoff (the
    /// live state is the truth, so the same rows are written again).
    /// True when everything is written (also when there was nothing to write).
    pub(super) async fn commit(&mut self, now: i64, batch: &mut Batch) -> bool {
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
        if let Err(e) = &result {
            self.commit_failed(e);
        }
        for key in batch.touched.drain(..) {
            if self.state.jobs.get(&key).is_some_and(|l| l.row.state.is_terminal()) {
                self.remember_end(&key);
                self.state.jobs.remove(&key);
                self.backend_waits.remove(&key);
            }
            self.lanes.sync(&key, self.state.jobs.get(&key));
        }
        batch.seen.clear();
        batch.spec_changed.clear();
        batch.events.clear();
        for (reply, r) in batch.replies.drain(..) {
            let r = match &result {
                Ok(()) => r,
                Err(e) => Err(LoopError::Store(e.to_string())),
            };
            let _ = reply.send(r);
        }
        result.is_ok()
    }

    /// Writes a batch no one waits on (no replies, stops or starts that need it first) on a
    /// task of its own, retrying like [`Loop::commit`]; the loop goes on meanwhile, and a
    /// later commit waits for it. Until it lands, the finished jobs it writes stay in memory.
    pub(super) fn commit_in_background(&mut self, now: i64, batch: &mut Batch) {
        if batch.touched.is_empty() && batch.events.is_empty() {
            return;
        }
        self.usage_dirty |= !batch.touched.is_empty();
        let rows: Vec<(JobRow, bool)> =
            batch.touched.iter().filter_map(|k| self.state.jobs.get(k)).map(|l| (l.row.clone(), batch.spec_changed.contains(&l.key))).collect();
        let events = std::mem::take(&mut batch.events);
        for key in &batch.touched {
            self.lanes.sync(key, self.state.jobs.get(key));
        }
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
    pub(super) fn committed(&mut self, done: Result<Committed, tokio::task::JoinError>, agree: bool) {
        let done = done.unwrap_or(Committed { ended: Vec::new(), ok: false });
        self.diverged |= !done.ok;
        if !done.ok {
            self.commit_failed(&"a background commit failed");
        }
        // A final state is final: what it wrote is what memory still says.
        for key in done.ended {
            self.remember_end(&key);
            self.state.jobs.remove(&key);
            self.backend_waits.remove(&key);
            self.lanes.sync(&key, None);
        }
        if done.ok && agree {
            self.forget_ended();
        }
    }

    /// Tells each backend that keeps records of ended runs which of its runs the database
    /// lists as unfinished, so it may drop the rest. Called right after a commit, when memory
    /// and database agree; never once a commit failed (see [`Loop::diverged`]).
    pub(super) fn forget_ended(&mut self) {
        if self.diverged || self.last_forget.is_some_and(|t| t.elapsed() < FORGET_EVERY) {
            return;
        }
        let due: Vec<_> = self.backends.iter().filter(|b| b.journal().is_some_and(|j| j.has_ended_runs())).cloned().collect();
        if due.is_empty() {
            return;
        }
        self.last_forget = Some(Instant::now());
        for b in due {
            let live: HashSet<RunId> =
                self.state.jobs.values().filter(|l| l.row.state.holds_quota() && l.row.backend.as_deref() == Some(b.name())).map(Live::run).collect();
            if let Some(j) = b.journal() {
                j.forget_ended(&live);
            }
        }
    }
}

/// A cycle's starts per backend, backends in the order of their first start, each one's
/// runs in admission order (a backend may start several together: Slurm's job arrays).
fn by_backend(todo: Vec<(Arc<dyn Backend>, String, StartSpec)>) -> Vec<(Arc<dyn Backend>, String, Vec<StartSpec>)> {
    let mut out: Vec<(Arc<dyn Backend>, String, Vec<StartSpec>)> = Vec::new();
    for (backend, name, spec) in todo {
        match out.iter_mut().find(|(_, n, _)| *n == name) {
            Some((_, _, specs)) => specs.push(spec),
            None => out.push((backend, name, vec![spec])),
        }
    }
    out
}

/// Writes a cycle's rows and events, trying 5 times, each failure followed by a growing
/// pause (0.1 to 1.6 s).
pub(super) async fn persist(store: &JobStore, now: i64, rows: &[(&JobRow, bool)], events: &[NewEvent]) -> Result<(), crate::store::jobs::JobStoreError> {
    let mut result = Ok(());
    for attempt in 0..5u32 {
        result = store.update(now, rows, events).await;
        let Err(e) = &result else { break };
        if matches!(e, crate::store::jobs::JobStoreError::Fenced(_)) {
            break; // another replica leads now: nothing to retry
        }
        tracing::error!(error = %e, attempt, "cannot persist the admission cycle; retrying");
        tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
    }
    result
}
