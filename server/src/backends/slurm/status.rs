//! Watching Berth's jobs on the cluster: one `squeue` a round for all of them, each ended
//! job's outcome from its row, else from `scontrol` or the job-completion record.

use super::*;

impl SlurmBackend {
    /// How a job ended, from its `squeue` row alone when that has it (an ended state and its
    /// wait status): no `scontrol` call per ended job, each of which held up the ends of the
    /// others found in the same round. A row of another job's name: lost, as in
    /// [`Self::final_state`].
    fn outcome_of_row(&self, row: &Row, run: &RunId) -> Option<Outcome> {
        if !row.name.is_empty() && row.name != self.slurm_name(run) {
            return Some(Outcome::Failed(LOST.into()));
        }
        match phase(&row.state) {
            Phase::Ended(state) if !row.exit.is_empty() => Some(outcome(&state, &row.reason, &row.exit, &row.nodes)),
            _ => None,
        }
    }

    /// Slurm's final word on a job: `scontrol show job`, else the completion record;
    /// `Ok(None)` while it has not ended, `Err` when Slurm cannot be asked.
    pub(super) async fn final_state(&self, id: &str, run: &RunId) -> Result<Option<Outcome>, CliError> {
        match self.run("scontrol", &["show".into(), "job".into(), id.into(), "-o".into()]).await {
            Ok(text) => {
                let kv = key_values(text.lines().next().unwrap_or_default());
                let get = |k: &str| kv.get(k).map(String::as_str).unwrap_or_default();
                if !get("JobName").is_empty() && get("JobName") != self.slurm_name(run) {
                    // The id now names another job (the controller lost its state).
                    return Ok(Some(Outcome::Failed(LOST.into())));
                }
                match phase(get("JobState")) {
                    Phase::Ended(state) => Ok(Some(outcome(&state, get("Reason"), get("ExitCode"), get("NodeList")))),
                    _ => Ok(None),
                }
            }
            Err(CliError::Refused(t)) if t.contains("Invalid job id") => self.completion_record(id, run).await.map(Some),
            Err(e) => Err(e),
        }
    }

    /// The job's line in the job-completion record (`sacct -c`, no slurmdbd needed).
    async fn completion_record(&self, id: &str, run: &RunId) -> Result<Outcome, CliError> {
        let Some(id) = self.record_id(id, run) else { return Ok(Outcome::Failed(LOST.into())) };
        let id = id.as_str();
        let name = self.slurm_name(run);
        let args: Vec<String> = ["-c", "-n", "-P", "-j", id, "-o", "JobID,JobName,State,ExitCode,NodeList"].map(String::from).to_vec();
        let text = match self.run("sacct", &args).await {
            Ok(t) => t,
            // No completion log configured: nothing more to learn.
            Err(CliError::Refused(_)) => String::new(),
            Err(e) => return Err(e),
        };
        let line = text.lines().map(|l| l.split('|').collect::<Vec<_>>()).find(|f| f.len() >= 5 && f[0] == id && f[1] == name);
        Ok(match line {
            // The completion record's state may carry "by 0" (`CANCELLED by 0`).
            Some(f) => outcome(f[2].split_whitespace().next().unwrap_or_default(), "", f[3], f[4]),
            None => Outcome::Failed(LOST.into()),
        })
    }

    /// One round of the status task: one `squeue` for every watched job; how many.
    pub(super) async fn poll_once(&self) -> usize {
        let ids: Vec<String> = self.lock_watched().keys().cloned().collect();
        if ids.is_empty() {
            return 0;
        }
        let args: Vec<String> = vec!["-h".into(), "-r".into(), "-t".into(), "all".into(), "-j".into(), ids.join(","), "-O".into(), ROW_FORMAT.into()];
        let rows = match self.run("squeue", &args).await {
            Ok(text) => parse_rows(&text),
            // Every id unknown (all purged): the same as an empty list.
            Err(CliError::Refused(t)) if t.contains("Invalid job id") => Vec::new(),
            Err(e) => {
                tracing::debug!(backend = %self.cfg.name, error = %e.text(), "Slurm status unavailable");
                return ids.len();
            }
        };
        let mut ended: Vec<(String, Option<Row>)> = Vec::new();
        let mut restop: Vec<String> = Vec::new();
        {
            let mut watched = self.lock_watched();
            for id in &ids {
                let Some(w) = watched.get_mut(id) else { continue };
                let Some(row) = rows.iter().find(|r| r.id == *id) else {
                    w.missing += 1;
                    if w.missing >= MISSING_ROUNDS {
                        ended.push((id.clone(), None));
                    }
                    continue;
                };
                w.missing = 0;
                match phase(&row.state) {
                    Phase::Ended(_) => ended.push((id.clone(), Some(row.clone()))),
                    Phase::Holding => {
                        let node: Name = node_id(&self.cfg.name, &row.nodes).into();
                        let mut held: Vec<(Name, Milli)> = row.alloc.iter().map(|(n, m)| (n.clone(), m)).collect();
                        held.extend(w.gres.iter().map(|(n, m)| (n.clone(), m)));
                        w.held = Some((node, Resources::new(held)));
                    }
                    Phase::Waiting => w.held = None,
                }
                if w.stopping && !matches!(phase(&row.state), Phase::Ended(_)) && w.last_stop.is_none_or(|t| t.elapsed() >= RESTOP) {
                    w.last_stop = Some(Instant::now());
                    restop.push(id.clone());
                }
            }
        }
        for id in restop {
            let _ = self.cancel(&id).await;
        }
        // Sent together once all are known: the loop then admits their successors in one
        // cycle, and the tasks of an array among them can go as one job array.
        let mut exits: Vec<Exit> = Vec::new();
        for (id, row) in ended {
            let Some(run) = self.lock_watched().get(&id).map(|w| w.run.clone()) else { continue };
            let known = row.as_ref().and_then(|r| self.outcome_of_row(r, &run));
            let outcome = match known {
                Some(o) => o,
                None => match self.final_state(&id, &run).await {
                    Ok(Some(o)) => o,
                    // squeue said ended; scontrol's record lags a moment: next round.
                    Ok(None) => continue,
                    Err(e) => {
                        tracing::debug!(run = %run.key(), error = %e.text(), "Slurm final state unavailable");
                        match row {
                            Some(r) => outcome(&r.state, &r.reason, "0:0", &r.nodes),
                            None => continue,
                        }
                    }
                },
            };
            let Some(w) = self.lock_watched().remove(&id) else { continue };
            if let Some(held) = w.held.clone() {
                lock(&self.ended).push(Ended { at: Instant::now(), held });
            }
            tracing::debug!(run = %run.key(), job = %id, ?outcome, "Slurm job ended");
            if !w.stopping {
                exits.push(Exit { run: w.run, outcome });
            }
        }
        for exit in exits {
            let _ = self.exits.send(exit);
        }
        ids.len()
    }
}
