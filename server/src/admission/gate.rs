//! Holds and dependencies: which pending jobs the engine is not offered yet, and why.
//!
//! A held job waits until released. A job with dependencies waits until each of them has
//! ended in a way that meets it ([`DependencyKind::met_by`]); one that can never be met
//! (an `after_ok` job failed or was cancelled…) fails the dependent with that reason, so
//! no job waits forever. A dependency that is not live any more is known by its final
//! state: remembered when it leaves memory, or read from the database once (a job that
//! ended before its dependent was submitted, or before a restart).

use app::jobs::DependencyKind;

use super::*;

/// Whether a pending job may be offered to the engine.
pub(super) enum Gate {
    Open,
    /// Not yet: held, or a dependency has not ended.
    Wait(String),
    /// Never: a dependency ended in a way that cannot meet it.
    Never(String),
}

impl Loop {
    /// Whether `l` (pending) may be offered now. A dependency that can never be met fails
    /// the job even while it is held: nothing could make it run.
    pub(super) fn gate(&self, l: &Live) -> Gate {
        let mut waits: Option<String> = None;
        for (kind, id) in l.row.spec.dependencies() {
            let state = self.state.jobs.get(id.as_str()).map(|d| d.row.state).or_else(|| self.ended.get(id.as_str()).copied());
            match state.and_then(|s| kind.met_by(s).map(|met| (s, met))) {
                Some((_, true)) => {}
                Some((s, false)) => return Gate::Never(format!("dependency {id} ended {s}, so {} can never be met", kind.field())),
                None => {
                    waits.get_or_insert_with(|| format!("waits for {id} to {} ({})", goal(kind), kind.field()));
                }
            }
        }
        match (&l.row.spec.held_by, waits) {
            (Some(by), _) => Gate::Wait(format!("held by {by}; `berth jobs release {}` lets it run", l.row.id)),
            (None, Some(why)) => Gate::Wait(why),
            (None, None) => Gate::Open,
        }
    }

    /// Fails each job whose dependency can never be met, with why; its own dependents
    /// follow in the next cycle.
    pub(super) fn fail_unmeetable(&mut self, doomed: Vec<(Name, String)>, now: i64, batch: &mut Batch) {
        for (key, why) in doomed {
            let Some(live) = self.state.jobs.get_mut(&key) else { continue };
            live.row.state = JobState::Failed;
            live.row.finished_at_us = Some(now);
            live.row.reason = Some(why.clone());
            batch.events.push(job_event(now, "dependency_failed", live, why));
            batch.touch(&key);
            self.dirty = true;
        }
    }

    /// Holds (`hold`) or releases a pending job.
    pub(super) fn hold(&mut self, id: &str, hold: bool, by: &str, now: i64, batch: &mut Batch) -> Result<JobRow, LoopError> {
        let Some(live) = self.state.jobs.get_mut(id) else { return Err(LoopError::NotLive(id.to_string())) };
        if hold && live.row.state != JobState::Pending {
            return Err(LoopError::Invalid(format!("job {id} is {}: only a pending job can be held", live.row.state)));
        }
        if live.row.spec.held_by.is_some() == hold {
            return Ok(live.row.clone());
        }
        live.row.spec.hold = hold;
        live.row.spec.held_by = hold.then(|| by.to_string());
        let (kind, msg) = if hold { ("held", format!("held by {by}")) } else { ("released", format!("released by {by}")) };
        batch.events.push(job_event(now, kind, live, msg));
        let (key, row) = (live.key.clone(), live.row.clone());
        batch.spec_changed.insert(key.clone());
        batch.touch(&key);
        self.dirty = true;
        self.explain_due = true;
        Ok(row)
    }

    /// Notes what the new live job `key` waits for: dependencies not in memory are read
    /// from the database before the next decision.
    pub(super) fn note_dependencies(&mut self, key: &Name) {
        let Some(l) = self.state.jobs.get(key) else { return };
        for (_, id) in l.row.spec.dependencies() {
            let id: Name = id.as_str().into();
            if !self.state.jobs.contains_key(&id) && !self.ended.contains_key(&id) {
                self.lookup.insert(id.clone());
            }
            self.awaited.insert(id);
        }
    }

    /// Keeps the final state of a job leaving memory when some job waits for it.
    pub(super) fn remember_end(&mut self, key: &Name) {
        if let Some(l) = self.state.jobs.get(key).filter(|_| self.awaited.contains(key)) {
            self.ended.insert(key.clone(), l.row.state);
        }
    }

    /// Reads the states of dependencies not in memory; the ended ones are kept. On a
    /// database error they are read again at the next cycle.
    pub(super) async fn look_up_dependencies(&mut self) {
        if self.lookup.is_empty() {
            return;
        }
        let ids: Vec<String> = self.lookup.drain().map(|n| n.to_string()).collect();
        match self.store.states(&ids).await {
            Ok(states) => {
                for (id, state) in states.into_iter().filter(|(_, s)| s.is_terminal()) {
                    self.ended.insert(id.as_str().into(), state);
                }
                self.dirty = true;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the states of dependencies; trying again");
                self.lookup.extend(ids.iter().map(|i| Name::from(i.as_str())));
            }
        }
    }
}

fn goal(kind: DependencyKind) -> &'static str {
    match kind {
        DependencyKind::AfterOk => "succeed",
        DependencyKind::AfterAny => "end",
        DependencyKind::AfterNotOk => "fail",
    }
}
