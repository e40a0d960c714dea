//! A queue's admissions in a time range, for the dashboard's wait-time and admission charts:
//! when each job was (last) admitted and how long it had waited since it was enqueued (the
//! wait the usage report counts).

use super::*;

impl JobStore {
    /// `(admitted_at_us, wait_us)` of the jobs of `queue` admitted in `[since_us, until_us)`,
    /// oldest first. A job admitted twice (after a preemption) counts at its last admission.
    pub async fn admissions(&self, queue: &str, since_us: i64, until_us: i64) -> Result<Vec<(i64, i64)>> {
        let rows = sqlx::query(
            "SELECT admitted_at_us, admitted_at_us - enqueued_at_us FROM jobs \
             WHERE queue = $1 AND admitted_at_us >= $2 AND admitted_at_us < $3 ORDER BY admitted_at_us",
        )
        .bind(queue)
        .bind(since_us)
        .bind(until_us)
        .fetch_all(&self.db.pool)
        .await?;
        rows.iter().map(|r| Ok((r.try_get(0)?, r.try_get::<i64, _>(1)?.max(0)))).collect()
    }
}
