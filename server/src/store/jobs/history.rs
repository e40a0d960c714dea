//! Resource history: usage samples per quota cell, written by the admission loop, pruned
//! after the retention, and read downsampled.

use super::*;

/// One resource-history sample to append (amounts in milli-units).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSample {
    pub queue: String,
    pub flavor: String,
    pub resource: String,
    pub used_milli: i64,
    pub nominal_milli: Option<i64>,
    /// Usage above nominal, borrowed from the queue's cohort.
    pub borrowed_milli: i64,
}


/// `GET /api/v1/history` parameters, resolved.
#[derive(Debug, Clone)]
pub struct HistoryQuery {
    pub since_us: i64,
    pub until_us: i64,
    pub step_us: i64,
    pub queue: Option<String>,
    pub flavor: Option<String>,
    pub resource: Option<String>,
    /// Only the members of this cohort (resolved into `queues` by the jobs service).
    pub cohort: Option<String>,
    /// Only these queues, when not empty.
    pub queues: Vec<String>,
}

impl JobStore {
    /// Appends resource-history samples taken at `at_us`. Fenced like the loop's other
    /// writes: a deposed leader's samples (its view of usage is stale) are refused.
    pub async fn insert_samples(&self, at_us: i64, samples: &[NewSample]) -> Result<()> {
        if samples.is_empty() {
            return Ok(());
        }
        let _turn = self.write_turn().await;
        let mut tx = self.db.pool.begin().await?;
        if let Some(epoch) = self.fence {
            check_fence(&mut tx, epoch).await?;
        }
        for s in samples {
            sqlx::query(
                "INSERT INTO resource_samples (at_us, queue, flavor, resource, used_milli, nominal_milli, borrowed_milli) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
                .bind(at_us)
                .bind(&s.queue)
                .bind(&s.flavor)
                .bind(&s.resource)
                .bind(s.used_milli)
                .bind(s.nominal_milli)
                .bind(s.borrowed_milli)
                .execute(&mut *tx)
                .await?;
        }
        // Not a change live views wait on: samples follow job changes (which do bump), and
        // periodic ones alone would re-render every open page each interval.
        tx.commit().await?;
        Ok(())
    }

    /// Deletes samples older than `before_us`; returns how many. Fenced like
    /// [`JobStore::insert_samples`].
    pub async fn prune_samples(&self, before_us: i64) -> Result<u64> {
        let _turn = self.write_turn().await;
        let mut tx = self.db.pool.begin().await?;
        if let Some(epoch) = self.fence {
            check_fence(&mut tx, epoch).await?;
        }
        let done = sqlx::query("DELETE FROM resource_samples WHERE at_us < $1").bind(before_us).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(done.rows_affected())
    }

    /// Samples in `[since, until)`, optionally of one queue/flavor/resource, downsampled in
    /// the database to one point per `step` per series: the bucket's peak use, at its last
    /// sample's time (a peak shorter than the step still shows). A week of 5 s samples thus
    /// costs one indexed range scan and returns at most `range / step` rows per series.
    pub async fn history(&self, q: &HistoryQuery) -> Result<Vec<Sample>> {
        let step = q.step_us.max(1);
        let mut sql = Sql::new(
            "SELECT MAX(at_us), queue, flavor, resource, MAX(used_milli), MAX(nominal_milli), MAX(borrowed_milli), (at_us - ?)".into(),
            Bind::I(q.since_us),
        );
        sql.push(" / ? AS bucket FROM resource_samples", Bind::I(step));
        sql.push(" WHERE at_us >= ?", Bind::I(q.since_us));
        sql.push(" AND at_us < ?", Bind::I(q.until_us));
        for (col, v) in [("queue", &q.queue), ("flavor", &q.flavor), ("resource", &q.resource)] {
            if let Some(v) = v {
                sql.push(&format!(" AND {col} = ?"), Bind::S(v.clone()));
            }
        }
        if !q.queues.is_empty() {
            sql.text.push_str(" AND queue IN (");
            for (i, name) in q.queues.iter().enumerate() {
                sql.push(if i > 0 { ", ?" } else { "?" }, Bind::S(name.clone()));
            }
            sql.text.push(')');
        }
        sql.text.push_str(" GROUP BY queue, flavor, resource, bucket ORDER BY queue, flavor, resource, bucket");
        let rows = sql.fetch_all(&self.db).await?;
        rows.iter()
            .map(|row| {
                let (used, nominal, borrowed): (i64, Option<i64>, i64) = (row.try_get(4)?, row.try_get(5)?, row.try_get(6)?);
                Ok(Sample {
                    at: time_of(row.try_get(0)?),
                    queue: row.try_get(1)?,
                    flavor: row.try_get(2)?,
                    resource: row.try_get(3)?,
                    used: used as f64 / 1000.0,
                    nominal: nominal.map(|n| n as f64 / 1000.0),
                    borrowed: borrowed as f64 / 1000.0,
                })
            })
            .collect()
    }
}
