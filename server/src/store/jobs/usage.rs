//! Accounting: what the jobs that ended in a time range used, per user, queue or label:
//! jobs by final state, resource-hours (request × run time, from the `req_*` columns),
//! wait percentiles, preemptions; two queries, run at once.

use std::collections::BTreeMap;

use app::jobs::{UsageGroup, UsageRow};

use super::*;

/// Microseconds in an hour.
const HOUR_US: f64 = 3.6e9;

impl JobStore {
    /// The use of jobs that ended in `[since_us, until_us)`, grouped by `by`, one row per
    /// group in the group's order.
    pub async fn usage(&self, by: &UsageGroup, since_us: i64, until_us: i64) -> Result<Vec<UsageRow>> {
        let (totals, waits) = (totals_sql(by), waits_sql(self.db.kind, by));
        // Two readers at once: each query reads every job of the range.
        let (totals, waits) = tokio::try_join!(
            self.bound(&totals, since_us, until_us).fetch_all(&self.db.pool),
            self.bound(&waits, since_us, until_us).fetch_all(&self.db.pool)
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
        let waits = match self.db.kind {
            DbKind::Postgres => waits_from_percentiles(waits)?,
            DbKind::Sqlite => waits_from_lists(waits)?,
        };
        for (group, [p50, p95, max]) in waits {
            if let Some(row) = rows.get_mut(&group) {
                (row.wait_p50_s, row.wait_p95_s, row.wait_max_s) = (Some(p50), Some(p95), Some(max));
            }
        }
        Ok(rows.into_values().collect())
    }

    fn bound<'q>(&self, sql: &'q str, since_us: i64, until_us: i64) -> AnyQuery<'q> {
        sqlx::query(sqlx::AssertSqlSafe(sql)).bind(since_us).bind(until_us)
    }
}

/// Per group and final state: jobs, resource × run time sums (µs), restarts.
fn totals_sql(by: &UsageGroup) -> String {
    format!(
        "WITH j AS ({}) SELECT grp, state, COUNT(*), CAST(SUM(cpu * run_us) AS DOUBLE PRECISION), \
         CAST(SUM(gpu * run_us) AS DOUBLE PRECISION), CAST(SUM(mem * run_us) AS DOUBLE PRECISION), \
         CAST(SUM(pre) AS BIGINT) FROM j GROUP BY grp, state",
        jobs_in_range(by, true)
    )
}

/// The waits of the range's jobs that were admitted: on PostgreSQL their nearest-rank
/// p50, p95 and maximum per group (`percentile_disc`, in µs); SQLite has no such aggregate,
/// so there each group's waits come back as one list and [`waits_from_lists`] ranks them (a
/// window function over every row took three times as long, and a row per wait as long).
fn waits_sql(kind: DbKind, by: &UsageGroup) -> String {
    let jobs = jobs_in_range(by, false);
    match kind {
        DbKind::Postgres => format!(
            "WITH j AS ({jobs}), p AS (SELECT grp, percentile_disc(ARRAY[0.5, 0.95, 1.0]) WITHIN GROUP (ORDER BY wait_us) AS r \
             FROM j WHERE wait_us IS NOT NULL GROUP BY grp) SELECT grp, r[1], r[2], r[3] FROM p"
        ),
        DbKind::Sqlite => format!("WITH j AS ({jobs}) SELECT grp, group_concat(wait_us) FROM j WHERE wait_us IS NOT NULL GROUP BY grp"),
    }
}

/// Seconds from µs, never negative.
fn seconds(us: i64) -> f64 {
    us.max(0) as f64 / 1e6
}

fn waits_from_percentiles(rows: Vec<AnyRow>) -> Result<Vec<(String, [f64; 3])>> {
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let (p50, p95, max): (i64, i64, i64) = (r.try_get(1)?, r.try_get(2)?, r.try_get(3)?);
        out.push((r.try_get(0)?, [seconds(p50), seconds(p95), seconds(max)]));
    }
    Ok(out)
}

/// Nearest-rank p50, p95 and maximum of each group's waits, from `group, "w1,w2,…"` rows.
fn waits_from_lists(rows: Vec<AnyRow>) -> Result<Vec<(String, [f64; 3])>> {
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let (group, list): (String, String) = (r.try_get(0)?, r.try_get(1)?);
        let mut waits = list
            .split(',')
            .map(|w| w.parse::<i64>())
            .collect::<std::result::Result<Vec<i64>, _>>()
            .map_err(|e| sqlx::Error::Decode(format!("usage: a wait of group `{group}` is not a number: {e}").into()))?;
        if !waits.is_empty() {
            out.push((group, nearest_ranks(&mut waits)));
        }
    }
    Ok(out)
}

/// The values at ranks ⌈n/2⌉, ⌈0.95 n⌉ and n (`percentile_disc`'s), in seconds.
fn nearest_ranks(waits: &mut [i64]) -> [f64; 3] {
    let n = waits.len();
    let mut at = |rank: usize| seconds(*waits.select_nth_unstable(rank.clamp(1, n) - 1).1);
    [at((n * 50).div_ceil(100)), at((n * 95).div_ceil(100)), at(n)]
}

/// One row per job that ended in `[$1, $2)`: its group, state, requested cpu/gpu/memory (0
/// unless `resources`), last run's time, wait and restarts that were no retry.
fn jobs_in_range(by: &UsageGroup, resources: bool) -> String {
    let resource = |column: &str| if resources { column.to_string() } else { "0.0".to_string() };
    let (group, join) = match by {
        UsageGroup::User => ("submitter", String::new()),
        UsageGroup::Queue => ("COALESCE(queue, '-')", String::new()),
        // The key is written into the SQL: SQLite joined 100,000 jobs to their labels in
        // 120 ms with it bound as a parameter and in 75 ms with it a literal (same plan).
        UsageGroup::Label(key) => ("COALESCE(l.value, '(none)')", format!(" LEFT JOIN job_labels l ON l.job_seq = jobs.seq AND l.key = {}", sql_text(key))),
    };
    format!(
        "SELECT {group} AS grp, state, {cpu} AS cpu, {gpu} AS gpu, {mem} AS mem, \
         CASE WHEN started_at_us IS NULL THEN 0 ELSE finished_at_us - started_at_us END AS run_us, \
         CASE WHEN admitted_at_us IS NULL THEN NULL ELSE admitted_at_us - enqueued_at_us END AS wait_us, \
         CASE WHEN runs - retries > 1 THEN runs - retries - 1 ELSE 0 END AS pre \
         FROM jobs{join} WHERE finished_at_us >= $1 AND finished_at_us < $2",
        cpu = resource("req_cpu"),
        gpu = resource("req_gpu"),
        mem = resource("req_memory_gb"),
    )
}

/// `text` as an SQL string literal, for SQLite and for PostgreSQL (whose strings take
/// backslashes as they are). [`UsageGroup::parse`] refuses a NUL, which neither takes.
fn sql_text(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::{nearest_ranks, sql_text};

    #[test]
    fn a_label_key_is_one_sql_string() {
        assert_eq!(sql_text("team"), "'team'");
        assert_eq!(sql_text("it's'; DROP TABLE jobs; --"), "'it''s''; DROP TABLE jobs; --'");
        assert_eq!(sql_text("back\\slash"), "'back\\slash'");
    }

    #[test]
    fn waits_are_ranked_like_percentile_disc() {
        // 1..=20 s: ⌈10⌉ = 10th, ⌈19⌉ = 19th, 20th.
        let mut waits: Vec<i64> = (1..=20).rev().map(|s| s * 1_000_000).collect();
        assert_eq!(nearest_ranks(&mut waits), [10.0, 19.0, 20.0]);
        // Three: ⌈1.5⌉ = 2nd, ⌈2.85⌉ = 3rd.
        assert_eq!(nearest_ranks(&mut [3_000_000, 1_000_000, 2_000_000]), [2.0, 3.0, 3.0]);
        assert_eq!(nearest_ranks(&mut [-5]), [0.0, 0.0, 0.0], "a clock step never gives a negative wait");
    }
}
