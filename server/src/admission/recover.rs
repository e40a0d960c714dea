//! Recovery after a restart: unfinished jobs are reloaded and their runs adopted (see the
//! module docs of `admission`).

use super::*;

impl Loop {
    /// Reloads unfinished jobs and re-attaches running ones to their backends.
    pub(crate) async fn recover(&mut self) -> Result<(), LoopError> {
        if self.term.is_some() {
            // Another replica on this host and data dir may have led since they were read.
            for b in self.backends.iter() {
                if let Some(j) = b.journal() {
                    j.reload();
                }
            }
        }
        let rows = self.store.load_unfinished().await?;
        let now = self.clock.now_us();
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
            self.note_dependencies(&key);
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
            if let Some(lost) = node_lost(&backend, self.state.jobs[&key].row.node.as_deref()) {
                self.end_run(&key, Outcome::Failed(lost), now, &mut batch);
                continue;
            }
            match backend.adopt(spec, handle).await {
                Adopted::Running { handle } => {
                    let live = self.state.jobs.get_mut(&key).expect("inserted above");
                    if live.row.state == JobState::Admitted {
                        live.row.state = JobState::Running;
                        live.row.started_at_us.get_or_insert(now);
                        batch.events.push(started_unrecorded(now, live));
                    }
                    live.row.handle = Some(handle);
                    batch.touch(&key);
                }
                Adopted::Ended(outcome) => {
                    let live = self.state.jobs.get_mut(&key).expect("inserted above");
                    if live.row.state == JobState::Admitted {
                        // When it really began is not recorded: when recovery found it.
                        live.row.started_at_us.get_or_insert(now);
                        batch.events.push(started_unrecorded(now, live));
                    }
                    self.end_run(&key, outcome, now, &mut batch)
                }
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
        let recording: Vec<Arc<dyn Backend>> = self.backends.iter().filter(|b| b.journal().is_some()).cloned().collect();
        for backend in recording {
            let mut begun = backend.journal().map(|j| j.begun_runs()).unwrap_or_default();
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
        self.lanes = lanes::Lanes::default();
        for (key, live) in &self.state.jobs {
            self.lanes.sync(key, Some(live));
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
    pub(super) async fn recover_unrecorded(&mut self, backend: &Arc<dyn Backend>, run: RunId, now: i64, batch: &mut Batch) {
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
}

/// Why a run on a backend that records its starts on its own host (local) cannot be
/// adopted: it ran on another host's node (a replica there led when it started). Its
/// outcome is out of reach, so it fails as lost and follows the job's retry policy.
fn node_lost(backend: &Arc<dyn Backend>, node: Option<&str>) -> Option<String> {
    let node = node?;
    if backend.journal().is_none() || backend.nodes().iter().any(|n| &*n.id == node) {
        return None;
    }
    let here = backend.nodes().first().map(|n| n.id.to_string()).unwrap_or_default();
    Some(format!("node lost: the run was on {node}, which the leading replica (on {here}) cannot reach"))
}

/// The `started` event of a run that began before the server stopped, its start not yet
/// written: every run that ran has one.
fn started_unrecorded(now: i64, live: &Live) -> NewEvent {
    let msg = format!("started on {} (found by recovery: the server stopped before writing the start)", live.row.node.as_deref().unwrap_or("?"));
    job_event(now, "started", live, msg)
}
