//! Accounting (`GET /api/v1/usage`, `berth usage`): who used how much of what, and how long
//! their jobs waited, over a time range; and one queue's admissions with their waits.

use app::jobs::{Admission, Admissions, UsageGroup, UsageReport};

use super::{Runtime, RuntimeError};
use crate::store::jobs::time_of;

/// Longest range one report covers (the query reads every job that ended in it).
const MAX_RANGE_US: i64 = 366 * 24 * 3600 * 1_000_000;

impl Runtime {
    /// The use of the jobs that ended in `[since_us, until_us)`, grouped by `by`.
    pub async fn usage(&self, by: UsageGroup, since_us: i64, until_us: i64) -> Result<UsageReport, RuntimeError> {
        check_range(since_us, until_us)?;
        let rows = self.store.usage(&by, since_us, until_us).await?;
        Ok(UsageReport { since: time_of(since_us), until: time_of(until_us), by: by.name(), rows })
    }
}

impl Runtime {
    /// When the jobs of `queue` admitted in `[since_us, until_us)` were admitted and how long
    /// each had waited (the dashboard's wait-time and admission charts).
    pub async fn admissions(&self, queue: &str, since_us: i64, until_us: i64) -> Result<Admissions, RuntimeError> {
        check_range(since_us, until_us)?;
        let rows = self.store.admissions(queue, since_us, until_us).await?;
        let admissions = rows.into_iter().map(|(at, wait)| Admission { at: time_of(at), wait_s: wait as f64 / 1e6 }).collect();
        Ok(Admissions { since: time_of(since_us), until: time_of(until_us), admissions })
    }
}

/// A range the reports read: `until` after `since`, at most [`MAX_RANGE_US`] long.
fn check_range(since_us: i64, until_us: i64) -> Result<(), RuntimeError> {
    if until_us <= since_us {
        return Err(RuntimeError::Invalid("until: must be later than since".into()));
    }
    if until_us - since_us > MAX_RANGE_US {
        return Err(RuntimeError::Invalid("since: the range may span at most 366 days".into()));
    }
    Ok(())
}
