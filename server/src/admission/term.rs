//! The loop under a leader lease (PostgreSQL replicas, see `replicas`): it ends when the
//! lease is lost, starts nothing once the lease may have lapsed, and takes in the jobs
//! other replicas stored. (It also publishes its waiting list for followers: `published`.)

use super::*;

/// The leadership a loop runs under on PostgreSQL replicas.
pub struct Term {
    /// The lease's epoch (the fencing token the loop's store checks on every commit).
    pub epoch: i64,
    /// Turns false when the lease is lost: the loop ends.
    pub leading: watch::Receiver<bool>,
    /// Until when the lease is surely held: when the last renewal was sent, plus the lease.
    pub until: Arc<std::sync::Mutex<Instant>>,
}

impl Term {
    /// Whether the lease is surely held now (false after a pause longer than the lease).
    pub fn held_now(&self) -> bool {
        Bound(self.until.clone()).held_now()
    }

    /// The bound alone, for a start task to check before each start.
    pub(super) fn bound(&self) -> Bound {
        Bound(self.until.clone())
    }
}

/// Until when the lease is surely held (see [`Term::until`]).
#[derive(Clone)]
pub(super) struct Bound(Arc<std::sync::Mutex<Instant>>);

impl Bound {
    pub(super) fn held_now(&self) -> bool {
        Instant::now() < *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Loop {
    /// Runs under `term`: its commits are fenced by the term's epoch.
    pub(crate) fn under(mut self, term: Term) -> Loop {
        self.store = self.store.fenced(term.epoch);
        self.term = Some(term);
        self
    }

    /// Whether the loop lost its lease (or its database) and must end its term.
    pub(crate) fn deposed(&self) -> bool {
        self.deposed
    }

    /// The channels, for the next term (see `replicas`).
    pub(crate) fn into_channels(self) -> (mpsc::UnboundedReceiver<Cmd>, mpsc::UnboundedReceiver<Exit>) {
        (self.cmds, self.exits)
    }

    /// Resolves when the term's lease is lost; never without a term.
    pub(super) async fn lease_lost(term: &mut Option<Term>) {
        match term {
            Some(t) => {
                let _ = t.leading.wait_for(|leading| !*leading).await;
            }
            None => std::future::pending().await,
        }
    }

    /// False, and the term ends, when the lease may have lapsed: nothing may start then.
    pub(super) fn may_act(&mut self) -> bool {
        let held = self.term.as_ref().is_none_or(Term::held_now);
        if !held && !self.deposed {
            tracing::warn!("the leader lease may have lapsed: starting nothing, ending this term");
            self.deposed = true;
        }
        held
    }

    /// A start task found the lease may have lapsed between two starts and started no more:
    /// the term ends (even if a late renewal still holds the lease: its admitted jobs wait
    /// for starts that will not come), and the next term recovers them from the database.
    pub(super) fn start_cut_short(&mut self) {
        if !self.deposed {
            tracing::warn!("the leader lease may have lapsed while starting runs: starting no more, ending this term");
            self.deposed = true;
        }
    }

    /// A failed commit under a term ends it: memory may differ from the database, and the
    /// next term (here or on another replica) recovers from the database.
    pub(super) fn commit_failed(&mut self, e: &dyn std::fmt::Display) {
        if self.term.is_some() && !self.deposed {
            tracing::warn!(error = %e, "a commit failed under the leader lease: ending this term");
            self.deposed = true;
        }
    }

    /// Reads the jobs named in [`Cmd::Load`] (stored by other replicas, or found by a sweep
    /// after a lost connection): each one still pending and not held here joins the live
    /// jobs, with its stage's limit. Writes in flight land first, so a job this loop ended
    /// is read as ended.
    pub(super) async fn load_named(&mut self) {
        if self.to_load.is_empty() {
            return;
        }
        if let Some(running) = self.committing.take() {
            self.committed(running.await, false);
        }
        let ids: Vec<String> = self.to_load.drain().filter(|id| !self.state.jobs.contains_key(id.as_str())).collect();
        let mut rows = Vec::new();
        for id in ids {
            match self.store.get(&id).await {
                Ok(row) if row.state == JobState::Pending => rows.push(row),
                Ok(_) | Err(crate::store::jobs::JobStoreError::NotFound(_)) => {}
                Err(e) => {
                    tracing::warn!(job = %id, error = %e, "cannot read a job another replica stored; trying again");
                    self.to_load.insert(id);
                }
            }
        }
        for row in &rows {
            let Some(stage) = row.stage_id.as_ref().filter(|s| !self.state.stages.contains_key(*s)) else { continue };
            if let Ok(Some((status, _))) = self.store.stage(stage).await {
                self.state.stages.insert(stage.clone(), status.parallelism.max_concurrent);
            }
        }
        if !rows.is_empty() {
            let mut batch = Batch::default();
            self.command(Cmd::Enqueue(rows), self.clock.now_us(), &mut batch);
        }
    }
}

impl State {
    /// What a follower shows: the unfinished jobs as stored, under the config in force,
    /// with the positions and reasons the leader published last (`waiting`, see
    /// `published`): only the leader's decisions give them.
    pub fn mirror(rows: Vec<JobRow>, active: &ActiveConfig, nodes: Vec<Node>, waiting: Waiting) -> State {
        let jobs = rows.into_iter().map(|r| Live::from_row(r, &active.compiled)).map(|l| (l.key.clone(), l)).collect();
        State { jobs, waiting, compiled: active.compiled.clone(), config_version: active.version, nodes, stages: HashMap::new() }
    }
}
