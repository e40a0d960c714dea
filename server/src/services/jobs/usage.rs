//! Accounting (`GET /api/v1/usage`, `berth usage`): who used how much of what, and how long
//! their jobs waited, over a time range.

use app::jobs::{UsageGroup, UsageReport};

use super::{Runtime, RuntimeError};
use crate::store::jobs::time_of;

/// Longest range one report covers (the query reads every job that ended in it).
const MAX_RANGE_US: i64 = 366 * 24 * 3600 * 1_000_000;

impl Runtime {
    /// The use of the jobs that ended in `[since_us, until_us)`, grouped by `by`.
    pub async fn usage(&self, by: UsageGroup, since_us: i64, until_us: i64) -> Result<UsageReport, RuntimeError> {
        if until_us <= since_us {
            return Err(RuntimeError::Invalid("until: must be later than since".into()));
        }
        if until_us - since_us > MAX_RANGE_US {
            return Err(RuntimeError::Invalid("since: the range may span at most 366 days".into()));
        }
        let rows = self.store.usage(&by, since_us, until_us).await?;
        Ok(UsageReport { since: time_of(since_us), until: time_of(until_us), by: by.name(), rows })
    }
}
