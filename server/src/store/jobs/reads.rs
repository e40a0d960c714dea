//! Reading jobs: the unfinished ones the loop loads, one by id or reference, pages of a
//! filtered list, owners, dependents and a stage with its jobs.

use super::*;

impl JobStore {
    /// Every job that is not finished: what the loop loads on start.
    pub async fn load_unfinished(&self) -> Result<Vec<JobRow>> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE state IN ('pending', 'admitted', 'running') ORDER BY seq");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).fetch_all(&self.db.pool).await?;
        rows.iter().map(job_from_row).collect()
    }

    /// Jobs submitted in `[from, to)`, and those submitted earlier that were not rejected
    /// and had not finished by `from`, in submission order, handed to `each` one at a time
    /// (streamed, so a day of jobs is never held twice): what the what-if replay reads.
    pub async fn for_each_in_window(&self, from_us: i64, to_us: i64, mut each: impl FnMut(JobRow)) -> Result<()> {
        use futures_util::TryStreamExt;
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE submitted_at_us < $2 AND (submitted_at_us >= $1 OR \
             (state <> 'rejected' AND (finished_at_us IS NULL OR finished_at_us > $1))) ORDER BY seq"
        );
        let mut rows = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(from_us).bind(to_us).fetch(&self.db.pool);
        while let Some(row) = rows.try_next().await? {
            each(job_from_row(&row)?);
        }
        Ok(())
    }

    /// One job.
    pub async fn get(&self, id: &str) -> Result<JobRow> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_optional(&self.db.pool).await?;
        job_from_row(&row.ok_or_else(|| JobStoreError::NotFound(id.to_string()))?)
    }

    /// The state of each of the jobs `ids` that exists.
    pub async fn states(&self, ids: &[String]) -> Result<Vec<(String, JobState)>> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let mut sql = Sql { text: "SELECT id, state FROM jobs WHERE id IN (".into(), binds: Vec::new() };
            sql.in_list(&vec!["?"; chunk.len()].join(", "), chunk.iter().map(|id| Bind::S(id.clone())));
            sql.text.push(')');
            for row in sql.fetch_all(&self.db).await? {
                let (id, state): (String, String) = (row.try_get(0)?, row.try_get(1)?);
                let state = JobState::parse(&state).ok_or_else(|| JobStoreError::Corrupt { id: id.clone(), message: format!("unknown state `{state}`") })?;
                out.push((id, state));
            }
        }
        Ok(out)
    }

    /// The jobs that name job `id` as a dependency, oldest first. A dependent is always
    /// submitted after its dependency, so only later jobs are read.
    pub async fn dependents(&self, id: &str) -> Result<Vec<String>> {
        let sql = "SELECT id, spec_json FROM jobs WHERE seq > (SELECT seq FROM jobs WHERE id = $1) AND spec_json LIKE $2 ESCAPE '\\' ORDER BY seq";
        let pattern = format!("%\"{}\"%", like_escape(id));
        let rows = sqlx::query(sql).bind(id).bind(pattern).fetch_all(&self.db.pool).await?;
        let mut out = Vec::new();
        for row in rows {
            let (dependent, spec): (String, String) = (row.try_get(0)?, row.try_get(1)?);
            let spec: JobRequest = serde_json::from_str(&spec).map_err(|e| JobStoreError::Corrupt { id: dependent.clone(), message: format!("spec: {e}") })?;
            if spec.dependencies().any(|(_, on)| on == id) {
                out.push(dependent);
            }
        }
        Ok(out)
    }

    /// The job `reference` names: by its id, else by its submission id. With `ray_visible`,
    /// a job Ray's API deleted from its view is not found.
    pub async fn find(&self, reference: &str, ray_visible: bool) -> Result<JobRow> {
        let hidden = if ray_visible { " AND ray_deleted_at_us IS NULL" } else { "" };
        // An id wins over another job's equal submission id.
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE (id = $1 OR submission_id = $1){hidden} \
             ORDER BY CASE WHEN id = $1 THEN 0 ELSE 1 END LIMIT 1"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(reference).fetch_optional(&self.db.pool).await?;
        job_from_row(&row.ok_or_else(|| JobStoreError::NotFound(reference.to_string()))?)
    }

    /// Whether a job with this submission id exists.
    pub async fn submission_taken(&self, submission_id: &str) -> Result<bool> {
        let row = sqlx::query("SELECT 1 FROM jobs WHERE submission_id = $1").bind(submission_id).fetch_optional(&self.db.pool).await?;
        Ok(row.is_some())
    }

    /// Takes a job out of Ray's view (Ray's `DELETE /api/jobs/{id}`); Berth keeps it. False
    /// when it already was.
    pub async fn delete_from_ray_view(&self, id: &str, now_us: i64) -> Result<bool> {
        let _turn = self.write_turn().await;
        let done = sqlx::query("UPDATE jobs SET ray_deleted_at_us = $1 WHERE id = $2 AND ray_deleted_at_us IS NULL")
            .bind(now_us)
            .bind(id)
            .execute(&self.db.pool)
            .await?;
        self.changed();
        Ok(done.rows_affected() > 0)
    }

    /// A page of jobs, newest first, older than the cursor (a `seq`).
    pub async fn list(&self, filter: &JobFilter, before_seq: Option<i64>, limit: i64) -> Result<JobPage> {
        let mut sql = Sql::new(format!("SELECT {JOB_COLUMNS} FROM jobs WHERE seq < ?"), Bind::I(before_seq.unwrap_or(i64::MAX)));
        if let Some(q) = &filter.queue {
            sql.push(" AND queue = ?", Bind::S(q.clone()));
        }
        if !filter.states.is_empty() {
            let names: Vec<String> = filter.states.iter().map(|s| format!("'{}'", s.as_str())).collect();
            sql.text.push_str(&format!(" AND state IN ({})", names.join(", ")));
        }
        if let Some(s) = &filter.submitter {
            sql.push(" AND submitter = ?", Bind::S(s.clone()));
        }
        if let Some(s) = &filter.stage_id {
            sql.push(" AND stage_id = ?", Bind::S(s.clone()));
        }
        if let Some(t) = filter.submitted_after_us {
            sql.push(" AND submitted_at_us >= ?", Bind::I(t));
        }
        if let Some(t) = filter.submitted_before_us {
            sql.push(" AND submitted_at_us < ?", Bind::I(t));
        }
        if let Some(text) = &filter.search {
            // Case-insensitive: SQLite's LIKE already is (for ASCII), PostgreSQL needs ILIKE.
            // LOWER() on both sides would cost SQLite 3x on a full scan.
            let pattern = format!("%{}%", like_escape(text));
            let like = match self.db.kind {
                DbKind::Sqlite => "LIKE",
                DbKind::Postgres => "ILIKE",
            };
            // A subquery on (seq, id, name) only, so it scans the narrow `jobs_search` index.
            sql.push(&format!(" AND seq IN (SELECT seq FROM jobs WHERE id {like} ? ESCAPE '\\'"), Bind::S(pattern.clone()));
            sql.push(&format!(" OR name {like} ? ESCAPE '\\'"), Bind::S(pattern.clone()));
            sql.push(&format!(" OR submission_id {like} ? ESCAPE '\\')"), Bind::S(pattern));
        }
        if filter.ray_visible {
            sql.text.push_str(" AND ray_deleted_at_us IS NULL");
        }
        if let Some((k, v)) = &filter.label {
            sql.push(" AND seq IN (SELECT job_seq FROM job_labels WHERE key = ?", Bind::S(k.clone()));
            sql.push(" AND value = ?)", Bind::S(v.clone()));
        }
        sql.push(" ORDER BY seq DESC LIMIT ?", Bind::I(limit + 1));
        let rows = sql.fetch_all(&self.db).await?;
        let more = rows.len() as i64 > limit;
        let mut jobs = Vec::with_capacity(rows.len().min(limit as usize));
        let mut last_seq = None;
        for row in rows.iter().take(limit as usize) {
            jobs.push(job_from_row(row)?.to_job());
            last_seq = Some(row.try_get::<i64, _>(24)?);
        }
        let next_cursor = if more { last_seq.map(|s| s.to_string()) } else { None };
        Ok(JobPage { jobs, next_cursor })
    }

    /// `(submitter, backend)` of each of `ids` that exists: who an event's job belongs to and
    /// where it last ran.
    pub async fn owners(&self, ids: &[String]) -> Result<HashMap<String, (String, Option<String>)>> {
        let mut out = HashMap::new();
        for chunk in ids.chunks(ROWS_PER_INSERT) {
            let mut sql = Sql { text: String::from("SELECT id, submitter, backend FROM jobs WHERE id IN ("), binds: Vec::new() };
            sql.in_list(&format!("{})", vec!["?"; chunk.len()].join(", ")), chunk.iter().cloned().map(Bind::S));
            for row in sql.fetch_all(&self.db).await? {
                out.insert(row.try_get(0)?, (row.try_get(1)?, row.try_get(2)?));
            }
        }
        Ok(out)
    }

    /// A stage with its jobs' states.
    pub async fn stage(&self, id: &str) -> Result<Option<(StageStatus, Vec<JobRow>)>> {
        let Some(row) = sqlx::query("SELECT id, name, submitter, created_at_us, parallelism_json FROM stages WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.db.pool)
            .await?
        else {
            return Ok(None);
        };
        let parallelism: Parallelism = serde_json::from_str(&row.try_get::<String, _>(4)?)
            .map_err(|e| JobStoreError::Corrupt { id: id.to_string(), message: e.to_string() })?;
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE stage_id = $1 ORDER BY seq");
        let jobs: Vec<JobRow> = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_all(&self.db.pool).await?.iter().map(job_from_row).collect::<Result<_>>()?;
        let mut counts = BTreeMap::new();
        for j in &jobs {
            *counts.entry(j.state.as_str().to_string()).or_insert(0u64) += 1;
        }
        let status = StageStatus {
            id: row.try_get(0)?,
            name: row.try_get(1)?,
            submitter: row.try_get(2)?,
            created_at: time_of(row.try_get(3)?),
            parallelism,
            counts,
            done: jobs.iter().all(|j| j.state.is_terminal()),
            jobs: jobs.iter().map(|j| StageJob { id: j.id.clone(), name: j.name.clone(), state: j.state }).collect(),
        };
        Ok(Some((status, jobs)))
    }
}
