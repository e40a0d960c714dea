//! `POST /api/v2/scheduler/config/preview` (`PreviewSchedulerConfigRequest`): where a draft
//! would route the last day's recorded jobs, label set by label set, and (with
//! `include_applied_comparison`) where the active config routes them; the draft's warnings
//! as lint, and the rules the record cannot judge. The routing comes from
//! [`crate::services::preview::routing`]. `refresh` is accepted and changes nothing: every
//! preview reads the record afresh.

use app::config::validate::portability::NOT_READABLE;
use app::config::Labels;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::config::read_request;
use super::One;
use crate::clock::now_us;
use crate::http::body::RawBody;
use crate::http::error::ApiError;
use crate::services::preview::routing::{self, LabelSet, RoutingPreview};
use crate::services::preview::{window, Sources};
use crate::state::AppState;
use crate::store::jobs::time_of;

/// `SchedulerConfigPreviewResponse`.
#[derive(Debug, Serialize)]
pub struct PreviewResponse {
    corpus: Corpus,
    verdicts: Vec<Verdict>,
    lint: Vec<Lint>,
    unevaluable_rules: Vec<Unevaluable>,
    /// No job was recorded in the window, so there is nothing to route.
    preview_unavailable: bool,
}

/// `ConfigPreviewCorpus`: the recorded jobs the verdicts are drawn from.
#[derive(Debug, Serialize)]
struct Corpus {
    window_days: i64,
    /// Jobs submitted in the window.
    total_events: u64,
    /// Distinct label sets among them.
    distinct_combos: usize,
    /// More label sets than listed.
    truncated: bool,
    snapshot_at: DateTime<Utc>,
}

/// `ConfigPreviewVerdict`: one label set.
#[derive(Debug, Serialize)]
struct Verdict {
    display_name: String,
    run_count: u64,
    labels: Labels,
    #[serde(skip_serializing_if = "Option::is_none")]
    queue_name: Option<String>,
    /// -1 when no rule matched, or when there are no rules (all to the built-in queue).
    matched_rule_index: i64,
    no_rule_matched: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    applied_queue_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    applied_no_rule_matched: Option<bool>,
}

#[derive(Debug, Serialize)]
struct Lint {
    code: &'static str,
    message: String,
}

#[derive(Debug, Serialize)]
struct Unevaluable {
    rule_index: usize,
    unknown_keys: Vec<String>,
}

pub async fn preview(State(state): State<AppState>, body: RawBody) -> Result<One<PreviewResponse>, ApiError> {
    let (draft, fields) = read_request(&body, "a preview request", &["include_applied_comparison", "refresh"])?;
    let flag = |name: &str| match fields.get(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(ApiError::bad_request(format!("{name}: must be true or false, got {other}"))),
    };
    let compare = flag("include_applied_comparison")?;
    flag("refresh")?;
    let now = now_us();
    let span = window::resolve(None, now).map_err(ApiError::bad_request)?;
    let preview = routing::routing(&Sources::of(&state), &draft, span, compare).await?;
    Ok(One(respond(preview, now)))
}

/// The service's preview in the Anyscale model.
fn respond(p: RoutingPreview, now: i64) -> PreviewResponse {
    let days = (p.span.to_us - p.span.from_us) / 86_400_000_000;
    PreviewResponse {
        corpus: Corpus {
            window_days: days.max(1),
            total_events: p.jobs,
            distinct_combos: p.label_sets_total,
            truncated: p.label_sets.len() < p.label_sets_total,
            snapshot_at: time_of(now),
        },
        preview_unavailable: p.jobs == 0,
        verdicts: p.label_sets.into_iter().map(verdict).collect(),
        lint: p
            .warnings
            .into_iter()
            .map(|w| Lint {
                code: if w.message.starts_with(NOT_READABLE) { "not_readable_by_sdk" } else { "warning" },
                message: if w.path.is_empty() { w.message } else { format!("{}: {}", w.path, w.message) },
            })
            .collect(),
        unevaluable_rules: p.unevaluable.into_iter().map(|(rule_index, unknown_keys)| Unevaluable { rule_index, unknown_keys }).collect(),
    }
}

fn verdict(set: LabelSet) -> Verdict {
    let display_name = match set.labels.is_empty() {
        true => "(no labels)".to_string(),
        false => set.labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", "),
    };
    Verdict {
        display_name,
        run_count: set.jobs,
        no_rule_matched: set.draft.queue.is_none(),
        matched_rule_index: set.draft.rule_index.map_or(-1, |i| i as i64),
        queue_name: set.draft.queue,
        applied_no_rule_matched: set.active.as_ref().map(|a| a.queue.is_none()),
        applied_queue_name: set.active.and_then(|a| a.queue),
        labels: set.labels,
    }
}
