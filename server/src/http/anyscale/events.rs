//! `GET /api/v2/scheduler/events`: Berth's event log as `SchedulerEventRecord`s, newest
//! first unless `order_desc=False`, with every filter of the Anyscale API.
//!
//! Each Berth kind has one `event_type` and `level` ([`MAPPING`]); `finished` has two, by
//! outcome. `REQUEST_FALLBACK`, which Berth never records, is accepted as a filter and
//! matches nothing. Filters Berth has no data for (`project_id`, `cloud_resource_id`) match
//! no event, as no Berth event belongs to a project. `search_id` is read by its prefix: `ev-`
//! an event id, `j-` a job id, anything else a user id.

use std::collections::HashMap;

use app::jobs::Event;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::query::Query;
use super::{email_of, Page, ORGANIZATION_ID};
use crate::http::error::ApiError;
use crate::state::AppState;
use crate::store::jobs::EventFilter;

/// Most values one list filter may have.
const MAX_VALUES: usize = 100;

/// A class of Berth event: its kind and, for `finished`, whether the run succeeded.
type Class = (&'static str, Option<bool>);

/// Berth's event classes and the `event_type` and `level` each reads as.
pub const MAPPING: [(Class, &str, &str); 19] = [
    (("config_applied", None), "CONFIG_UPDATED", "INFO"),
    (("submitted", None), "REQUEST_SUBMITTED", "INFO"),
    (("rejected", None), "REQUEST_REJECTED", "WARNING"),
    (("admitted", None), "REQUEST_ADMITTED", "INFO"),
    (("started", None), "REQUEST_FULFILLED", "INFO"),
    (("preempted", None), "REQUEST_PREEMPTED", "WARNING"),
    (("requeued", None), "REQUEST_REQUEUED", "INFO"),
    // A failed run that will be retried.
    (("retried", None), "REQUEST_REQUEUED", "WARNING"),
    (("rerouted", None), "REQUEST_QUEUED", "INFO"),
    (("priority_changed", None), "REQUEST_QUEUED", "INFO"),
    (("finished", Some(true)), "REQUEST_RELEASED", "INFO"),
    (("finished", Some(false)), "REQUEST_FAILED", "ERROR"),
    (("timed_out", None), "REQUEST_FAILED", "ERROR"),
    (("cancelled", None), "REQUEST_ABORTED", "INFO"),
    // Workflows: a hold and its release keep the job queued; a dependency that can never
    // be met fails it.
    (("held", None), "REQUEST_QUEUED", "INFO"),
    (("released", None), "REQUEST_QUEUED", "INFO"),
    (("dependency_failed", None), "REQUEST_FAILED", "ERROR"),
    // A cohort: an admission that borrows a peer's idle quota, and a lender taking it back.
    (("borrowed", None), "QUOTA_BORROWED", "INFO"),
    (("reclaimed", None), "QUOTA_RECLAIMED", "WARNING"),
];

/// Every `SchedulerEventType` the API defines.
pub const EVENT_TYPES: [&str; 14] = [
    "CONFIG_UPDATED",
    "REQUEST_SUBMITTED",
    "REQUEST_QUEUED",
    "REQUEST_ADMITTED",
    "REQUEST_REJECTED",
    "REQUEST_PREEMPTED",
    "REQUEST_REQUEUED",
    "REQUEST_RELEASED",
    "REQUEST_FULFILLED",
    "REQUEST_ABORTED",
    "REQUEST_FAILED",
    "REQUEST_FALLBACK",
    "QUOTA_BORROWED",
    "QUOTA_RECLAIMED",
];

/// Every `EventLevel` the API defines.
pub const LEVELS: [&str; 7] = ["INFO", "WARNING", "ERROR", "TRACE", "DEBUG", "CRITICAL", "UNKNOWN"];

/// The `event_type` and `level` of a stored event (`UNKNOWN` for a kind not mapped).
fn classify(e: &Event) -> (&'static str, &'static str) {
    let succeeded = (e.kind == "finished").then(|| e.message == "succeeded");
    MAPPING
        .iter()
        .find(|((kind, outcome), _, _)| *kind == e.kind && *outcome == succeeded)
        .map_or(("REQUEST_QUEUED", "UNKNOWN"), |(_, t, l)| (t, l))
}

/// `SchedulerEventRecord`.
#[derive(Debug, Serialize)]
pub struct Record {
    id: String,
    organization_id: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cloud_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user_email: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    queue_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    flavor_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    workload_type: Option<&'static str>,
    created_at: DateTime<Utc>,
    event_timestamp: DateTime<Utc>,
    level: &'static str,
    event_type: &'static str,
    message: String,
    /// Berth's own record of the event: `kind`, `node`, `config_version`, `rule_index`, `detail`.
    metadata_json: Map<String, Value>,
}

/// What the request asks for, as the store's filter; `None` when nothing can match.
fn filter(query: &Query) -> Result<Option<EventFilter>, ApiError> {
    let mut f = EventFilter { newest_first: query.bool("order_desc", true)?, ..EventFilter::default() };
    let types = query.list("event_type", MAX_VALUES)?;
    let levels = query.list("level", MAX_VALUES)?;
    for (name, given, known) in [("event_type", &types, &EVENT_TYPES[..]), ("level", &levels, &LEVELS[..])] {
        if let Some(bad) = given.iter().find(|v| !known.contains(v)) {
            return Err(ApiError::bad_request(format!("{name}: `{bad}` is not one of {}", known.join(", "))));
        }
    }
    if !types.is_empty() || !levels.is_empty() {
        let classes: Vec<Class> = MAPPING
            .iter()
            .filter(|(_, t, l)| (types.is_empty() || types.contains(t)) && (levels.is_empty() || levels.contains(l)))
            .map(|(c, _, _)| *c)
            .collect();
        let finished: Vec<bool> = classes.iter().filter_map(|c| c.1).collect();
        f.kinds = classes.iter().filter(|c| c.1.is_none()).map(|c| c.0.to_string()).collect();
        match finished.as_slice() {
            [] => {}
            [ok] => f.finished_succeeded = Some(*ok),
            _ => f.kinds.push("finished".into()),
        }
        if f.kinds.is_empty() && f.finished_succeeded.is_none() {
            return Ok(None);
        }
    }
    // Berth has no projects and no cloud resources: no event is in one.
    if query.one("project_id")?.is_some() || query.one("cloud_resource_id")?.is_some() {
        return Ok(None);
    }
    f.queues = query.list("queue_name", MAX_VALUES)?.into_iter().map(str::to_string).collect();
    f.flavors = query.list("flavor_name", MAX_VALUES)?.into_iter().map(str::to_string).collect();
    f.backend = query.one("cloud_id")?.map(str::to_string);
    f.job_id = query.one("cluster_id")?.map(str::to_string);
    f.user = query.one("user_id")?.map(str::to_string);
    if let Some(id) = query.one("search_id")? {
        if let Some(seq) = id.strip_prefix("ev-") {
            f.seq = Some(seq.parse().map_err(|_| ApiError::bad_request(format!("search_id: `{id}` is not an event id (ev-<number>)")))?);
        } else if id.starts_with("j-") {
            if f.job_id.as_deref().is_some_and(|j| j != id) {
                return Ok(None);
            }
            f.job_id = Some(id.to_string());
        } else {
            if f.user.as_deref().is_some_and(|u| u != id) {
                return Ok(None);
            }
            f.user = Some(id.to_string());
        }
    }
    f.since_us = query.time("start_time")?;
    // The API's end is inclusive; the store's is not.
    f.until_us = query.time("end_time")?.map(|t| t.saturating_add(1));
    Ok(Some(f))
}

/// `GET /api/v2/scheduler/events`.
pub async fn events(State(state): State<AppState>, query: Query) -> Result<Page<Record>, ApiError> {
    let count = query.int("count", 0, 100, 20)?;
    let cursor = match query.one("paging_token")? {
        None => None,
        Some(t) => Some(t.parse::<i64>().ok().filter(|c| *c > 0).ok_or_else(|| ApiError::bad_request(format!("paging_token: `{t}` is not a token returned by this API")))?),
    };
    let Some(filter) = filter(&query)? else {
        return Ok(Page { results: Vec::new(), total: None, next: None });
    };
    if count == 0 {
        return Ok(Page { results: Vec::new(), total: None, next: None });
    }
    let page = state.runtime.events(&filter, cursor, count).await?;
    let ids: Vec<String> = page.events.iter().filter_map(|e| e.job_id.clone()).collect();
    let owners = state.runtime.store().owners(&ids).await.map_err(crate::services::jobs::RuntimeError::from)?;
    let mut creators: HashMap<i64, String> = HashMap::new();
    let mut results = Vec::with_capacity(page.events.len());
    for e in page.events {
        let (user, backend) = match (&e.job_id, e.config_version) {
            (Some(job), _) => owners.get(job).map_or((None, None), |(u, b)| (Some(u.clone()), b.clone())),
            (None, Some(v)) if e.kind == "config_applied" => {
                let creator = match creators.get(&v) {
                    Some(c) => c.clone(),
                    None => {
                        let c = state.config.get(Some(v)).await.map(|c| c.creator_id).unwrap_or_default();
                        creators.insert(v, c.clone());
                        c
                    }
                };
                ((!creator.is_empty()).then_some(creator), None)
            }
            _ => (None, None),
        };
        results.push(record(e, user, backend));
    }
    Ok(Page { results, total: None, next: page.next_cursor })
}

fn record(e: Event, user: Option<String>, backend: Option<String>) -> Record {
    let (event_type, level) = classify(&e);
    let mut metadata = Map::new();
    metadata.insert("kind".into(), json!(e.kind));
    for (key, value) in [("node", json!(e.node)), ("config_version", json!(e.config_version)), ("rule_index", json!(e.rule_index)), ("detail", e.detail.clone())] {
        if !value.is_null() {
            metadata.insert(key.into(), value);
        }
    }
    Record {
        id: format!("ev-{}", e.seq),
        organization_id: ORGANIZATION_ID,
        cloud_id: backend,
        workload_type: e.job_id.as_ref().map(|_| "JOB"),
        cluster_id: e.job_id,
        user_email: user.as_deref().map(email_of),
        user_id: user,
        queue_name: e.queue,
        flavor_name: e.flavor,
        created_at: e.at,
        event_timestamp: e.at,
        level,
        event_type,
        message: e.message,
        metadata_json: metadata,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter_of(q: &str) -> Option<EventFilter> {
        filter(&Query::parse(q).unwrap()).unwrap()
    }

    #[test]
    fn every_berth_kind_and_every_mapped_type_is_known() {
        // Every kind the OpenAPI document lists (`EventKind`), so a new kind cannot be missed.
        let doc = include_str!("../openapi.yaml");
        let list = doc.split("    EventKind:").nth(1).and_then(|t| t.split("enum: [").nth(1)).and_then(|t| t.split(']').next()).expect("EventKind's enum");
        let kinds: Vec<&str> = list.split(',').map(str::trim).collect();
        assert!(kinds.len() >= 18, "{kinds:?}");
        for kind in kinds {
            assert!(MAPPING.iter().any(|((k, _), _, _)| *k == kind), "{kind} is not mapped");
        }
        for (_, t, l) in MAPPING {
            assert!(EVENT_TYPES.contains(&t) && LEVELS.contains(&l), "{t} {l}");
        }
    }

    #[test]
    fn finished_reads_by_outcome() {
        let e = |message: &str| Event { seq: 1, at: Utc::now(), kind: "finished".into(), job_id: None, queue: None, flavor: None, node: None, config_version: None, rule_index: None, message: message.into(), detail: Value::Null, job_name: None };
        assert_eq!(classify(&e("succeeded")), ("REQUEST_RELEASED", "INFO"));
        assert_eq!(classify(&e("exited with code 2")), ("REQUEST_FAILED", "ERROR"));
    }

    #[test]
    fn types_and_levels_become_kinds() {
        let f = filter_of("event_type=REQUEST_FAILED&event_type=REQUEST_ADMITTED").unwrap();
        assert_eq!((f.kinds, f.finished_succeeded), (vec!["admitted".to_string(), "timed_out".to_string(), "dependency_failed".to_string()], Some(false)));
        let f = filter_of("event_type=REQUEST_FAILED&level=ERROR&order_desc=False").unwrap();
        assert!(!f.newest_first);
        assert_eq!((f.kinds, f.finished_succeeded), (vec!["timed_out".to_string(), "dependency_failed".to_string()], Some(false)));
        let f = filter_of("level=INFO").unwrap();
        assert!(f.kinds.contains(&"submitted".to_string()) && f.finished_succeeded == Some(true));
        // Types Berth never records, levels it never uses, and projects match nothing.
        assert!(filter_of("event_type=REQUEST_FALLBACK").is_none());
        assert!(filter_of("level=DEBUG").is_none());
        assert!(filter_of("project_id=prj_1").is_none());
        assert!(filter_of("").unwrap().newest_first, "newest first by default");
        let many = vec!["queue_name=q"; 101].join("&");
        assert_eq!(filter(&Query::parse(&many).unwrap()).unwrap_err().message, "queue_name: at most 100 values, got 101");
        let bad = filter(&Query::parse("event_type=NOPE").unwrap()).unwrap_err();
        assert!(bad.message.starts_with("event_type: `NOPE` is not one of CONFIG_UPDATED"), "{}", bad.message);
    }

    #[test]
    fn search_ids_are_read_by_prefix_and_the_end_is_inclusive() {
        assert_eq!(filter_of("search_id=ev-42").unwrap().seq, Some(42));
        assert_eq!(filter_of("search_id=j-abc").unwrap().job_id.as_deref(), Some("j-abc"));
        assert_eq!(filter_of("search_id=ann").unwrap().user.as_deref(), Some("ann"));
        assert!(filter_of("search_id=j-abc&cluster_id=j-other").is_none());
        let f = filter_of("end_time=2026-01-01T00:00:00%2B00:00&queue_name=a&queue_name=b&flavor_name=spot").unwrap();
        assert_eq!(f.until_us, Some(chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap().timestamp_micros() + 1));
        assert_eq!((f.queues.len(), f.flavors.len()), (2, 1));
    }
}
