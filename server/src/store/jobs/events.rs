//! The event log: the events the loop appends, and a page of them by filter, in either
//! order.

use app::jobs::Event;

use super::rows::*;
use super::{AnyQuery, JobStore, Result, EVENT_COLUMNS};
use crate::store::DbKind;

/// An event to append.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewEvent {
    pub at_us: i64,
    pub kind: &'static str,
    pub job_id: Option<String>,
    pub queue: Option<String>,
    pub flavor: Option<String>,
    pub node: Option<String>,
    pub config_version: Option<i64>,
    pub rule_index: Option<i64>,
    pub message: String,
    pub detail: Option<serde_json::Value>,
}

/// Binds one row of [`INSERT_EVENTS`].
pub(super) fn bind_event<'q>(query: AnyQuery<'q>, e: &'q NewEvent) -> AnyQuery<'q> {
    query
        .bind(e.at_us)
        .bind(e.kind)
        .bind(e.job_id.as_deref())
        .bind(e.queue.as_deref())
        .bind(e.flavor.as_deref())
        .bind(e.node.as_deref())
        .bind(e.config_version)
        .bind(e.rule_index)
        .bind(&e.message)
        .bind(e.detail.as_ref().map(|d| d.to_string()))
}

/// Filters of the event log; all given ones must hold.
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    /// Any of these kinds (with [`EventFilter::finished_succeeded`], or that).
    pub kinds: Vec<String>,
    /// Also `finished` events of runs that succeeded (`true`) or failed (`false`), told by
    /// their message, which is `succeeded` exactly for a success.
    pub finished_succeeded: Option<bool>,
    pub queue: Option<String>,
    /// Any of these queues.
    pub queues: Vec<String>,
    /// Events naming any of these flavors (an event of a job on several names them all).
    pub flavors: Vec<String>,
    /// Events of jobs that were last placed on this backend.
    pub backend: Option<String>,
    /// Events of jobs this user submitted, and of config versions they applied.
    pub user: Option<String>,
    /// The one event with this `seq`.
    pub seq: Option<i64>,
    pub job_id: Option<String>,
    /// Preemptions this job caused (`preempted` events naming it as the preemptor).
    pub preemptor: Option<String>,
    pub since_us: Option<i64>,
    pub until_us: Option<i64>,
    /// Newest first; the cursor then pages backwards (`seq` below it).
    pub newest_first: bool,
}

impl JobStore {
    /// A page of events after the cursor (a `seq`), oldest first; with `newest_first`,
    /// before the cursor, newest first.
    pub async fn events(&self, filter: &EventFilter, cursor: Option<i64>, limit: i64) -> Result<(Vec<Event>, bool)> {
        let mut sql = match filter.newest_first {
            true => Sql::new(format!("SELECT {EVENT_COLUMNS} FROM events WHERE seq < ?"), Bind::I(cursor.unwrap_or(i64::MAX))),
            false => Sql::new(format!("SELECT {EVENT_COLUMNS} FROM events WHERE seq > ?"), Bind::I(cursor.unwrap_or(0))),
        };
        if !filter.kinds.is_empty() || filter.finished_succeeded.is_some() {
            // Kinds are checked against the known list by the caller; still bound, not spliced.
            let mut any = Vec::new();
            if !filter.kinds.is_empty() {
                any.push(format!("kind IN ({})", vec!["?"; filter.kinds.len()].join(", ")));
            }
            if let Some(ok) = filter.finished_succeeded {
                any.push(format!("(kind = 'finished' AND message {} 'succeeded')", if ok { "=" } else { "<>" }));
            }
            sql.in_list(&format!(" AND ({})", any.join(" OR ")), filter.kinds.iter().cloned().map(Bind::S));
        }
        if let Some(q) = &filter.queue {
            sql.push(" AND queue = ?", Bind::S(q.clone()));
        }
        if !filter.queues.is_empty() {
            sql.in_list(&format!(" AND queue IN ({})", vec!["?"; filter.queues.len()].join(", ")), filter.queues.iter().cloned().map(Bind::S));
        }
        if !filter.flavors.is_empty() {
            // `flavor` lists the job's flavors, comma-separated: look for `,name,` in
            // `,list,`. SQLite's LIKE ignores case, so there it is GLOB (which does not).
            let (op, pattern): (&str, fn(&str) -> String) = match self.db.kind {
                DbKind::Sqlite => ("GLOB ?", |f| format!("*,{},*", glob_escape(f))),
                DbKind::Postgres => ("LIKE ? ESCAPE '\\'", |f| format!("%,{},%", like_escape(f))),
            };
            let one = format!("(',' || flavor || ',') {op}");
            let clause = format!(" AND ({})", vec![one.as_str(); filter.flavors.len()].join(" OR "));
            sql.in_list(&clause, filter.flavors.iter().map(|f| Bind::S(pattern(f))));
        }
        if let Some(b) = &filter.backend {
            sql.push(" AND job_id IN (SELECT id FROM jobs WHERE backend = ?)", Bind::S(b.clone()));
        }
        if let Some(u) = &filter.user {
            sql.push(" AND (job_id IN (SELECT id FROM jobs WHERE submitter = ?)", Bind::S(u.clone()));
            sql.push(" OR (kind = 'config_applied' AND config_version IN (SELECT version FROM config_versions WHERE creator_id = ?)))", Bind::S(u.clone()));
        }
        if let Some(seq) = filter.seq {
            sql.push(" AND seq = ?", Bind::I(seq));
        }
        if let Some(j) = &filter.job_id {
            sql.push(" AND job_id = ?", Bind::S(j.clone()));
        }
        if let Some(p) = &filter.preemptor {
            // Ids are `[A-Za-z0-9_-]`; `_` is escaped so the pattern matches this id only.
            let pattern = format!("%\"preemptor\":\"{}\"%", like_escape(p));
            sql.push(" AND kind = 'preempted' AND detail_json LIKE ? ESCAPE '\\'", Bind::S(pattern));
        }
        if let Some(t) = filter.since_us {
            sql.push(" AND at_us >= ?", Bind::I(t));
        }
        if let Some(t) = filter.until_us {
            sql.push(" AND at_us < ?", Bind::I(t));
        }
        let order = if filter.newest_first { " ORDER BY seq DESC LIMIT ?" } else { " ORDER BY seq LIMIT ?" };
        sql.push(order, Bind::I(limit + 1));
        let rows = sql.fetch_all(&self.db).await?;
        let more = rows.len() as i64 > limit;
        let events = rows.iter().take(limit as usize).map(event_from_row).collect::<Result<_>>()?;
        Ok((events, more))
    }
}
