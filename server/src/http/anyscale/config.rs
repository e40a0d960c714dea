//! Config operations 1 to 6: apply, get the active config, get a version, list versions,
//! roll back, validate. Each is the `/api/v1` operation of the config service in the
//! Anyscale envelope; `message` and `expected_active_version` are still accepted in the
//! apply and rollback bodies (the SDK sends neither).

use app::api::{ApplyResponse, ConfigVersion, VersionSummary};
use app::config::validate::validate as check;
use app::config::{Problem, SchedulerConfig};
use axum::extract::State;
use axum::http::HeaderMap;
use serde::Serialize;
use serde_json::{Map, Value};

use super::query::Query;
use super::{One, Page};
use crate::http::body::{parse_i64, PathText, RawBody};
use crate::http::config::{read_apply_body, read_rollback_body};
use crate::http::error::ApiError;
use crate::http::preview::config_field;
use crate::services::auth::Caller;
use crate::services::config::ServiceError;
use crate::state::AppState;
use crate::store::config::ApplyMeta;

/// Most versions per page, as the Anyscale API allows.
pub const MAX_VERSIONS_PAGE: i64 = 50;

/// `POST /api/v2/scheduler/config` (`ApplySchedulerConfigRequest`): `{"result": {version, …}}`.
pub async fn apply(State(state): State<AppState>, caller: Caller, headers: HeaderMap, body: RawBody) -> Result<One<ApplyResponse>, ApiError> {
    let (config, meta) = read_apply_body(&headers, &body)?;
    Ok(One(state.config.apply(&caller, &config, &meta).await?))
}

/// `GET /api/v2/scheduler/config`: the active version (`SchedulerConfigResponse`).
pub async fn get_active(State(state): State<AppState>) -> Result<One<ConfigVersion>, ApiError> {
    Ok(One(state.config.get(None).await?))
}

/// `GET /api/v2/scheduler/config/versions/{version}`; 404 for a version never stored.
pub async fn get_version(State(state): State<AppState>, PathText(raw): PathText) -> Result<One<ConfigVersion>, ApiError> {
    let version = parse_i64("version", &raw)?;
    Ok(One(state.config.get(Some(version)).await?))
}

/// `GET /api/v2/scheduler/config/versions?count=&paging_token=`: summaries, newest first.
/// `count` 0 is an empty page; the paging token is the `/api/v1` cursor.
pub async fn list_versions(State(state): State<AppState>, query: Query) -> Result<Page<VersionSummary>, ApiError> {
    let count = query.int("count", 0, MAX_VERSIONS_PAGE, 10)?;
    let token = query.one("paging_token")?;
    if count == 0 {
        return Ok(Page { results: Vec::new(), total: None, next: None });
    }
    let page = state.config.list(Some(count), token).await.map_err(|e| match e {
        // The service names its own parameter; here it is the paging token.
        ServiceError::BadRequest(_) => ApiError::bad_request(format!("paging_token: `{}` is not a token returned by this API", token.unwrap_or(""))),
        other => other.into(),
    })?;
    Ok(Page { results: page.versions, total: None, next: page.next_cursor })
}

/// `POST /api/v2/scheduler/config/rollback` (`{"version": N}`): a copy of version N applied
/// as a new version, `{"result": {version, …}}`.
pub async fn rollback(State(state): State<AppState>, caller: Caller, body: RawBody) -> Result<One<ApplyResponse>, ApiError> {
    let request = read_rollback_body(&body)?;
    let version = request.version.ok_or_else(|| ApiError::bad_request("version: required (the version to roll back to)"))?;
    if version < 1 {
        return Err(ApiError::bad_request(format!("version: must be at least 1, got {version}")));
    }
    let meta = ApplyMeta { message: request.message, expected_active_version: request.expected_active_version, ..ApplyMeta::default() };
    Ok(One(state.config.rollback(&caller, version, &meta).await?))
}

/// What a valid config's check found: no errors, maybe warnings.
#[derive(Debug, Serialize)]
pub struct Validated {
    valid: bool,
    problems: Vec<Problem>,
}

/// `POST /api/v2/scheduler/config/validate` (`{"config": …}`): 200 when valid (with its
/// warnings), 422 with the error envelope and every problem in `details` when not. The
/// client treats any 2xx as valid, so an invalid config must not be a 200.
pub async fn validate(body: RawBody) -> Result<One<Validated>, ApiError> {
    let (config, _) = read_request(&body, "a validate request", &[])?;
    let report = check(&config);
    if report.has_errors() {
        return Err(ServiceError::Invalid(report).into());
    }
    Ok(One(Validated { valid: true, problems: report.problems }))
}

/// A request body `{"config": <config object, or its YAML or JSON text>, …}` whose other
/// keys are among `others`: the config (a 422 with every problem when it does not parse)
/// and the other fields.
pub fn read_request(body: &RawBody, what: &str, others: &[&str]) -> Result<(SchedulerConfig, Map<String, Value>), ApiError> {
    let text = body.text()?;
    if text.trim().is_empty() {
        return Err(ApiError::bad_request(format!("config: required; {what} is `{{\"config\": {{…}}}}`")));
    }
    let value: Value = serde_json::from_str(text).map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
    let Value::Object(mut fields) = value else {
        return Err(ApiError::bad_request(format!("{what} must be a JSON object with a `config` field")));
    };
    if let Some(k) = fields.keys().find(|k| *k != "config" && !others.contains(&k.as_str())) {
        let mut accepted = vec!["config"];
        accepted.extend(others);
        return Err(ApiError::bad_request(format!("{k}: unknown field; {what} has {}", accepted.join(", "))));
    }
    let config = match fields.remove("config") {
        None | Some(Value::Null) => return Err(ApiError::bad_request("config: required (the scheduler config)")),
        Some(v) => config_field(&v)?,
    };
    Ok((config, fields))
}
