//! Rows to wire types by column name, and the SQL text both engines take (placeholders,
//! multi-row statements, filters built clause by clause).

use super::*;

/// A value bound to a filter's placeholder.
pub(super) enum Bind {
    I(i64),
    S(String),
}

/// A query built from fixed clauses, each `?` numbered in turn (`$1`, `$2`, …) and its
/// value bound, never spliced.
pub(super) struct Sql {
    pub(super) text: String,
    pub(super) binds: Vec<Bind>,
}

impl Sql {
    /// `head` holds exactly one `?`, for `first`.
    pub(super) fn new(head: String, first: Bind) -> Sql {
        let mut sql = Sql { text: String::new(), binds: Vec::new() };
        sql.push(&head, first);
        sql
    }

    /// Appends `clause`, whose one `?` takes `b`.
    pub(super) fn push(&mut self, clause: &str, b: Bind) {
        self.binds.push(b);
        self.text.push_str(&clause.replace('?', &format!("${}", self.binds.len())));
    }

    /// Appends `clause`, whose `?`s take `binds` in order.
    pub(super) fn in_list(&mut self, clause: &str, binds: impl IntoIterator<Item = Bind>) {
        let mut parts = clause.split('?');
        self.text.push_str(parts.next().unwrap_or(""));
        for (part, b) in parts.zip(binds) {
            self.binds.push(b);
            self.text.push_str(&format!("${}", self.binds.len()));
            self.text.push_str(part);
        }
    }

    pub(super) async fn fetch_all(self, db: &Db) -> Result<Vec<AnyRow>> {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(self.text));
        for b in self.binds {
            query = match b {
                Bind::I(i) => query.bind(i),
                Bind::S(s) => query.bind(s),
            };
        }
        Ok(query.fetch_all(&db.pool).await?)
    }
}

/// `text` for a `LIKE … ESCAPE '\'` pattern: `\`, `%` and `_` match only themselves.
pub(super) fn like_escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")
}

/// `text` for a `GLOB` pattern: `*`, `?` and `[` match only themselves.
pub(super) fn glob_escape(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '*' | '?' | '[' => format!("[{c}]"),
            c => c.to_string(),
        })
        .collect()
}

/// `rows` tuples of `width` placeholders, each followed by `tail` (literal SQL), for
/// values bound in the order they appear: `(?, ?, …), (?, …)…` on SQLite, `($1, $2, …),
/// ($3, …)…` on PostgreSQL. SQLite looks each named parameter (`$N`) up among the ones
/// before it, when preparing and again when binding, so a statement with n of them costs
/// O(n²): with 500-row inserts that was a tenth of the server's CPU under load.
pub(super) fn placeholders(kind: DbKind, rows: usize, width: usize, tail: &str) -> String {
    let mut sql = String::with_capacity(rows * (width * 5 + tail.len() + 4));
    for r in 0..rows {
        sql.push_str(if r == 0 { "(" } else { ", (" });
        for c in 0..width {
            if c > 0 {
                sql.push_str(", ");
            }
            match kind {
                DbKind::Sqlite => sql.push('?'),
                DbKind::Postgres => sql.push_str(&format!("${}", r * width + c + 1)),
            }
        }
        sql.push_str(tail);
        sql.push(')');
    }
    sql
}

/// SQLite's form of a statement whose `$N` appear in order: each becomes `?` (see
/// [`placeholders`]).
pub(super) fn anonymous(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            while chars.next_if(char::is_ascii_digit).is_some() {}
            out.push('?');
        } else {
            out.push(c);
        }
    }
    out
}

/// The columns of a new job: [`NEW_JOB_PARAMS`] bound ([`bind_new_job`]), then
/// [`NEW_JOB_TAIL`]'s.
pub(super) const INSERT_JOBS: &str = "INSERT INTO jobs (id, name, submitter, stage_id, state, spec_json, queue, rule_index, config_version, \
     priority, submitted_at_us, enqueued_at_us, updated_at_us, reason, submission_id, req_cpu, req_gpu, req_memory_gb, runs, retries) VALUES";
pub(super) const NEW_JOB_PARAMS: usize = 18;
pub(super) const NEW_JOB_TAIL: &str = ", 0, 0";

/// Binds a new job's [`INSERT_JOBS`] parameters, in their order.
pub(super) fn bind_new_job<'q>(query: AnyQuery<'q>, job: &'q JobRow) -> AnyQuery<'q> {
    let query = query
        .bind(&job.id)
        .bind(&job.name)
        .bind(&job.submitter)
        .bind(job.stage_id.as_deref())
        .bind(job.state.as_str())
        .bind(serde_json::to_string(&job.spec).unwrap_or_default())
        .bind(job.queue.as_deref())
        .bind(job.rule_index)
        .bind(job.config_version)
        .bind(job.priority)
        .bind(job.submitted_at_us)
        .bind(job.enqueued_at_us)
        .bind(job.submitted_at_us)
        .bind(job.reason.as_deref())
        .bind(job.spec.submission_id.as_deref());
    bind_requested(query, &job.spec)
}

/// New jobs in one statement, then their labels in another.
///
/// This statement and the other multi-row ones below (and a loop commit's) are not kept
/// prepared: their text changes with the row count, so each count would take a slot in
/// every connection's statement cache, and a prepared statement with thousands of
/// parameters holds megabytes.
pub(super) async fn insert_jobs(tx: &mut AnyConnection, kind: DbKind, jobs: &[JobRow]) -> Result<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    let sql = format!("{INSERT_JOBS} {} RETURNING id, seq", placeholders(kind, jobs.len(), NEW_JOB_PARAMS, NEW_JOB_TAIL));
    // Only numbered placeholders are formatted in: the values are bound.
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).persistent(false);
    for job in jobs {
        query = bind_new_job(query, job);
    }
    if jobs.iter().all(|j| j.spec.labels.is_empty()) {
        query.execute(&mut *tx).await?;
        return Ok(());
    }
    // RETURNING's row order is not promised: match by id.
    let mut seqs: HashMap<String, i64> = HashMap::with_capacity(jobs.len());
    for row in query.fetch_all(&mut *tx).await? {
        seqs.insert(row.try_get(0)?, row.try_get(1)?);
    }
    let labels: Vec<(&str, &str, i64)> = jobs
        .iter()
        .flat_map(|j| {
            let seq = seqs.get(&j.id).copied().unwrap_or_default();
            j.spec.labels.iter().map(move |(k, v)| (k.as_str(), v.as_str(), seq))
        })
        .collect();
    for chunk in labels.chunks(ROWS_PER_INSERT * 4) {
        let sql = format!("INSERT INTO job_labels (key, value, job_seq) VALUES {}", placeholders(kind, chunk.len(), 3, ""));
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).persistent(false);
        for &(key, value, seq) in chunk {
            query = query.bind(key).bind(value).bind(seq);
        }
        query.execute(&mut *tx).await?;
    }
    Ok(())
}

/// Events in as few statements as the parameter limit allows.
pub(super) async fn insert_events(tx: &mut AnyConnection, kind: DbKind, events: &[NewEvent]) -> Result<()> {
    for chunk in events.chunks(ROWS_PER_INSERT) {
        let sql = format!("{INSERT_EVENTS} {}", placeholders(kind, chunk.len(), EVENT_PARAMS, ""));
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).persistent(false);
        for e in chunk {
            query = bind_event(query, e);
        }
        query.execute(&mut *tx).await?;
    }
    Ok(())
}

pub(super) fn job_from_row(row: &AnyRow) -> Result<JobRow> {
    let id: String = row.try_get(0)?;
    let corrupt = |message: String| JobStoreError::Corrupt { id: id.clone(), message };
    let state: String = row.try_get(4)?;
    let state = JobState::parse(&state).ok_or_else(|| corrupt(format!("unknown state `{state}`")))?;
    let spec: String = row.try_get(5)?;
    let spec: JobRequest = serde_json::from_str(&spec).map_err(|e| corrupt(format!("spec: {e}")))?;
    let flavors: Option<String> = row.try_get(15)?;
    let flavors = match flavors {
        Some(f) => serde_json::from_str(&f).map_err(|e| corrupt(format!("flavors: {e}")))?,
        None => Vec::new(),
    };
    Ok(JobRow {
        name: row.try_get(1)?,
        submitter: row.try_get(2)?,
        stage_id: row.try_get(3)?,
        state,
        spec,
        queue: row.try_get(6)?,
        rule_index: row.try_get(7)?,
        config_version: row.try_get(8)?,
        priority: row.try_get(9)?,
        submitted_at_us: row.try_get(10)?,
        enqueued_at_us: row.try_get(11)?,
        runs: row.try_get(12)?,
        retries: row.try_get(13)?,
        retry_at_us: row.try_get(14)?,
        flavors,
        node: row.try_get(16)?,
        backend: row.try_get(17)?,
        handle: row.try_get(18)?,
        admitted_at_us: row.try_get(19)?,
        started_at_us: row.try_get(20)?,
        finished_at_us: row.try_get(21)?,
        exit_code: row.try_get(22)?,
        reason: row.try_get(23)?,
        id,
    })
}

pub(super) fn event_from_row(row: &AnyRow) -> Result<Event> {
    let detail: Option<String> = row.try_get(10)?;
    Ok(Event {
        seq: row.try_get(0)?,
        at: time_of(row.try_get(1)?),
        kind: row.try_get(2)?,
        job_id: row.try_get(3)?,
        queue: row.try_get(4)?,
        flavor: row.try_get(5)?,
        node: row.try_get(6)?,
        config_version: row.try_get(7)?,
        rule_index: row.try_get(8)?,
        message: row.try_get(9)?,
        detail: detail.and_then(|d| serde_json::from_str(&d).ok()).unwrap_or(serde_json::Value::Null),
        job_name: row.try_get(11)?,
    })
}

/// The request's CPU, GPU and memory, as the `req_*` columns keep them for accounting.
pub(super) fn bind_requested<'q>(query: AnyQuery<'q>, spec: &JobRequest) -> AnyQuery<'q> {
    let r = &spec.resources;
    query.bind(r.cpu.unwrap_or(0.0)).bind(r.gpu.unwrap_or(0.0)).bind(r.memory_gb.unwrap_or(0.0))
}
