//! What changes a live job outside a decision: commands (enqueue, cancel, priority), the
//! reroute after an apply, the tick (timeouts, retries, capacity) and the end of a run.

use super::*;

impl Loop {
    /// A config apply takes effect for waiting jobs: each pending job routed under another
    /// version is routed again (queue, rule and priority may change). One that no rule
    /// takes now keeps its old queue and waits, saying why.
    pub(super) fn reroute_stale(&mut self, now: i64, batch: &mut Batch) {
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
            match live.reroute(&compiled) {
                Ok(false) => {}
                Ok(true) => {
                    let msg = format!("config version {version} routes it to {} with priority {}", live.queue, live.row.priority);
                    let mut e = job_event(now, "rerouted", live, msg);
                    e.config_version = Some(version);
                    batch.events.push(e);
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

    pub(super) fn command(&mut self, cmd: Cmd, now: i64, batch: &mut Batch) {
        match cmd {
            Cmd::Load(ids) => self.to_load.extend(ids),
            Cmd::Enqueue(rows) => {
                for row in rows {
                    if self.state.jobs.contains_key(row.id.as_str()) {
                        continue; // taken in already (a replica's notice and a sweep both named it)
                    }
                    self.reroute_needed |= row.config_version != Some(self.state.config_version);
                    let live = Live::from_row(row, &self.state.compiled);
                    let key = live.key.clone();
                    self.lanes.sync(&key, Some(&live));
                    self.state.jobs.insert(key.clone(), live);
                    self.note_dependencies(&key);
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
            Cmd::Hold { id, hold, by, reply } => {
                let result = self.hold(&id, hold, &by, now, batch);
                batch.replies.push((reply, result));
            }
        }
    }

    pub(super) fn cancel(&mut self, id: &str, by: &str, now: i64, batch: &mut Batch) -> Result<JobRow, LoopError> {
        let Some(live) = self.state.jobs.get_mut(id) else { return Err(LoopError::NotLive(id.to_string())) };
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

    pub(super) fn set_priority(&mut self, id: &str, priority: i64, by: &str, now: i64, batch: &mut Batch) -> Result<JobRow, LoopError> {
        let compiled = self.state.compiled.clone();
        let Some(live) = self.state.jobs.get_mut(id) else { return Err(LoopError::NotLive(id.to_string())) };
        let priority = engine::bounded_priority(&compiled, live.row.rule_index, priority).map_err(|r| LoopError::Invalid(r.reason))?;
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

    pub(super) fn on_tick(&mut self, now: i64, batch: &mut Batch) {
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
        let known = self.backends.known_nodes();
        let known_changed = *self.shared.read().unwrap_or_else(|e| e.into_inner()).known != known;
        if nodes != self.state.nodes {
            self.state.nodes = nodes;
            self.dirty = true;
            self.publish(known);
        } else if known_changed {
            self.publish(known);
        }
    }

    /// Ends the current run of a holding job with `outcome`: succeeded, retried or failed.
    pub(super) fn end_run(&mut self, key: &Name, outcome: Outcome, now: i64, batch: &mut Batch) {
        let backoff = self.settings.retry_backoff;
        let Some(live) = self.state.jobs.get_mut(key) else { return };
        if let Outcome::TimedOut(why) = &outcome {
            // The backend's own limit: the same end as the loop's timeout, never retried.
            live.row.state = JobState::TimedOut;
            live.row.exit_code = None;
            live.row.finished_at_us = Some(now);
            live.row.reason = Some(why.clone());
            batch.events.push(job_event(now, "timed_out", live, why.clone()));
            batch.touch(key);
            self.dirty = true;
            return;
        }
        let (failed, what, code) = match &outcome {
            Outcome::Exited(0) => (false, "succeeded".to_string(), Some(0)),
            Outcome::Exited(c) => (true, format!("exited with code {c}"), Some(*c as i64)),
            Outcome::Signaled(s) => (true, format!("killed by signal {s}"), None),
            Outcome::Failed(m) => (true, m.clone(), None),
            Outcome::TimedOut(m) => (true, m.clone(), None), // ended above
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
}
