//! Resource history: the usage of every quota cell (and what it borrows from its cohort),
//! sampled while anything is in use.

use super::*;

impl Loop {
    /// Writes resource-history samples when usage changed (at most once a second) and
    /// every sample interval while anything is in use; prunes old ones hourly.
    pub(super) async fn sample(&mut self, now: i64) {
        if let Some((at, last)) = &self.last_sample {
            let periodic_due = last.values().any(|u| *u > 0) && at.elapsed() >= self.settings.sample_interval;
            if !self.usage_dirty && !periodic_due {
                return;
            }
        }
        // What is written is the peak since the last sample, so a change that lasts less
        // than the 1 s between samples still shows.
        let now_usage = usage(&self.state);
        let mut usage = std::mem::take(&mut self.peak);
        for (cell, used) in &now_usage {
            let peak = usage.entry(cell.clone()).or_insert(0);
            *peak = (*peak).max(*used);
        }
        let since = self.last_sample.as_ref().map(|(t, _)| t.elapsed());
        let changed = self.last_sample.as_ref().is_none_or(|(_, last)| *last != usage);
        let busy = usage.values().any(|u| *u > 0);
        if !changed {
            self.usage_dirty = false;
        }
        let due = match since {
            None => true,
            Some(s) => (changed && s >= Duration::from_secs(1)) || (busy && s >= self.settings.sample_interval),
        };
        if !due {
            self.peak = usage;
            return;
        }
        let cells = self.state.compiled.quota_cells();
        let used: Vec<Milli> =
            cells.iter().map(|c| Milli(usage.get(&(c.queue.clone(), c.flavor.clone(), c.resource.clone())).copied().unwrap_or(0))).collect();
        // What a cell borrows depends on its own use alone (use above nominal).
        let shares = engine::cohort_shares(&cells, &used);
        let samples: Vec<NewSample> = cells
            .iter()
            .zip(used.iter().zip(&shares))
            .map(|(c, (u, share))| NewSample {
                queue: c.queue.to_string(),
                flavor: c.flavor.to_string(),
                resource: c.resource.to_string(),
                used_milli: u.0,
                nominal_milli: c.nominal.map(|m| m.0),
                borrowed_milli: share.borrowed.0,
            })
            .collect();
        if let Err(e) = self.store.insert_samples(now, &samples).await {
            if matches!(e, crate::store::jobs::JobStoreError::Fenced(_)) {
                self.commit_failed(&e); // another replica leads: its samples count now
                return;
            }
            tracing::warn!(error = %e, "cannot write resource history");
            self.peak = usage;
            return;
        }
        self.last_sample = Some((Instant::now(), usage));
        self.peak = now_usage;
        self.usage_dirty = false;
        if self.last_prune.is_none_or(|t| t.elapsed() >= Duration::from_secs(3600)) {
            self.last_prune = Some(Instant::now());
            let before = now - self.settings.history_retention.as_micros() as i64;
            match self.store.prune_samples(before).await {
                Err(e @ crate::store::jobs::JobStoreError::Fenced(_)) => self.commit_failed(&e),
                Err(e) => tracing::warn!(error = %e, "cannot prune resource history"),
                Ok(_) => {}
            }
        }
    }
}
