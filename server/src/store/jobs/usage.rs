//! Accounting: what the jobs that ended in a time range used, per user, queue or label,
//! summed in the database (two queries, run at once, whatever the number of jobs): jobs by final state,
//! resource-hours (request × run time), wait percentiles, preemptions.

use std::collections::BTreeMap;

use app::jobs::{UsageGroup, UsageRow};

use super::*;

/// Microseconds in an hour.
const HOUR_US: f64 = 3.6e9;

impl JobStore {
    /// The use of jobs that ended in `[since_us, until_us)`, grouped by `by`, one row per
    /// group in the group's order.
    pub async fn usage(&self, by: &UsageGroup, since_us: i64, until_us: i64) -> Result<Vec<UsageRow>> {
        let (totals, ranks) = (totals_sql(self.db.kind, by), ranks_sql(self.db.kind, by));
        // Two readers at once: each query reads every job of the range.
        let (totals, ranks) = tokio::try_join!(
            self.bound(&totals, by, since_us, until_us).fetch_all(&self.db.pool),
            self.bound(&ranks, by, since_us, until_us).fetch_all(&self.db.pool)
        )?;
        let mut rows: BTreeMap<String, UsageRow> = BTreeMap::new();
        for r in totals {
            let group: String = r.try_get(0)?;
            let row = rows.entry(group.clone()).or_insert_with(|| UsageRow { group, ..Default::default() });
            let count: i64 = r.try_get(2)?;
            row.jobs.insert(r.try_get(1)?, count as u64);
            row.cpu_hours += r.try_get::<Option<f64>, _>(3)?.unwrap_or(0.0) / HOUR_US;
            row.gpu_hours += r.try_get::<Option<f64>, _>(4)?.unwrap_or(0.0) / HOUR_US;
            row.memory_gb_hours += r.try_get::<Option<f64>, _>(5)?.unwrap_or(0.0) / HOUR_US;
            row.preemptions += r.try_get::<Option<i64>, _>(6)?.unwrap_or(0).max(0) as u64;
        }
        for r in ranks {
            let group: String = r.try_get(0)?;
            let (rank, n, wait): (i64, i64, i64) = (r.try_get(1)?, r.try_get(2)?, r.try_get(3)?);
            let Some(row) = rows.get_mut(&group) else { continue };
            let s = Some(wait.max(0) as f64 / 1e6);
            if rank == (n * 50 + 99) / 100 {
                row.wait_p50_s = s;
            }
            if rank == (n * 95 + 99) / 100 {
                row.wait_p95_s = s;
            }
            if rank == n {
                row.wait_max_s = s;
            }
        }
        Ok(rows.into_values().collect())
    }

    fn bound<'q>(&self, sql: &'q str, by: &'q UsageGroup, since_us: i64, until_us: i64) -> AnyQuery<'q> {
        let query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(since_us).bind(until_us);
        match by {
            UsageGroup::Label(key) => query.bind(key.as_str()),
            _ => query,
        }
    }
}

/// Per group and final state: jobs, resource × run time sums (µs), restarts.
fn totals_sql(kind: DbKind, by: &UsageGroup) -> String {
    format!(
        "WITH j AS ({}) SELECT grp, state, COUNT(*), CAST(SUM(cpu * run_us) AS DOUBLE PRECISION), \
         CAST(SUM(gpu * run_us) AS DOUBLE PRECISION), CAST(SUM(mem * run_us) AS DOUBLE PRECISION), \
         CAST(SUM(pre) AS BIGINT) FROM j GROUP BY grp, state",
        jobs_in_range(kind, by, true)
    )
}

/// Nearest-rank percentiles: per group, the waits at ranks ⌈n/2⌉, ⌈0.95 n⌉ and n (no
/// resources read: decoding each request is most of the other query's time).
fn ranks_sql(kind: DbKind, by: &UsageGroup) -> String {
    format!(
        "WITH j AS ({}), w AS (SELECT grp, wait_us, ROW_NUMBER() OVER (PARTITION BY grp ORDER BY wait_us) AS rn, \
         COUNT(*) OVER (PARTITION BY grp) AS n FROM j WHERE wait_us IS NOT NULL) \
         SELECT grp, CAST(rn AS BIGINT), CAST(n AS BIGINT), wait_us FROM w \
         WHERE rn = n OR rn = (n * 50 + 99) / 100 OR rn = (n * 95 + 99) / 100",
        jobs_in_range(kind, by, false)
    )
}

/// One row per job that ended in `[$1, $2)`: its group (`$3` is the label key), state,
/// requested cpu/gpu/memory (0 unless `resources`), last run's time, wait and restarts
/// that were no retry.
fn jobs_in_range(kind: DbKind, by: &UsageGroup, resources: bool) -> String {
    let resource = |name: &str| match (kind, resources) {
        (_, false) => "0.0".to_string(),
        (DbKind::Sqlite, true) => format!("COALESCE(json_extract(spec_json, '$.resources.{name}'), 0.0)"),
        (DbKind::Postgres, true) => format!("COALESCE((spec_json::json #>> '{{resources,{name}}}')::float8, 0.0)"),
    };
    let (group, join) = match by {
        UsageGroup::User => ("submitter", ""),
        UsageGroup::Queue => ("COALESCE(queue, '-')", ""),
        UsageGroup::Label(_) => ("COALESCE(l.value, '(none)')", " LEFT JOIN job_labels l ON l.job_seq = jobs.seq AND l.key = $3"),
    };
    format!(
        "SELECT {group} AS grp, state, {cpu} AS cpu, {gpu} AS gpu, {mem} AS mem, \
         CASE WHEN started_at_us IS NULL THEN 0 ELSE finished_at_us - started_at_us END AS run_us, \
         CASE WHEN admitted_at_us IS NULL THEN NULL ELSE admitted_at_us - enqueued_at_us END AS wait_us, \
         CASE WHEN runs - retries > 1 THEN runs - retries - 1 ELSE 0 END AS pre \
         FROM jobs{join} WHERE finished_at_us >= $1 AND finished_at_us < $2",
        cpu = resource("cpu"),
        gpu = resource("gpu"),
        mem = resource("memory_gb"),
    )
}
