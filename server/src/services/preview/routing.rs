//! The routing preview: where a draft config would send the recorded workload, label set by
//! label set, next to where the active config sends it. What the Anyscale scheduler API's
//! preview answers (`POST /api/v2/scheduler/config/preview`); Berth's replay report
//! ([`super::preview`]) answers more, and stays on `/api/v1`.
//!
//! Steps: check the draft like an apply would; read the labels of every job submitted in
//! the window; group the jobs by label set; route each set with the engine's own router
//! under the draft (and the active config); find the rules whose selector keys no recorded
//! job carries, whose verdicts the record cannot show.

use std::collections::{BTreeMap, BTreeSet};

use app::config::{Labels, Problem, SchedulerConfig};

use super::{check_draft, PreviewError, Sources, Span};
use crate::engine::{self, Compiled};

/// Most label sets listed; the most frequent are kept.
pub const MAX_LABEL_SETS: usize = 1000;

/// Where one config sends a label set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The queue, or `None` when no rule matches (the job would be rejected).
    pub queue: Option<String>,
    /// The matching rule; `None` also when there are no rules (all to the built-in queue).
    pub rule_index: Option<usize>,
}

/// One distinct label set of the window and its fate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelSet {
    pub labels: Labels,
    /// Jobs submitted with exactly these labels.
    pub jobs: u64,
    pub draft: Verdict,
    /// Under the active config, when asked for.
    pub active: Option<Verdict>,
}

/// The whole preview.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutingPreview {
    pub span: Span,
    /// Jobs submitted in the window.
    pub jobs: u64,
    /// Distinct label sets among them (all, also those not listed).
    pub label_sets_total: usize,
    /// The most frequent label sets, at most [`MAX_LABEL_SETS`].
    pub label_sets: Vec<LabelSet>,
    /// The draft's validation warnings.
    pub warnings: Vec<Problem>,
    /// `(rule index, selector keys no recorded job carries)`, for rules with such keys.
    pub unevaluable: Vec<(usize, Vec<String>)>,
}

/// Routes the window's label sets under `draft` (and the active config when `compare`).
pub async fn routing(src: &Sources, draft: &SchedulerConfig, span: Span, compare: bool) -> Result<RoutingPreview, PreviewError> {
    let draft_c = check_draft(draft)?;
    let warnings = app::config::validate(draft).warnings().cloned().collect();
    let mut counts: BTreeMap<Labels, u64> = BTreeMap::new();
    src.store
        .for_each_in_window(span.from_us, span.to_us, |row| {
            // Jobs from before the window (still live at its start) are not part of it.
            if row.submitted_at_us >= span.from_us {
                *counts.entry(row.spec.labels).or_default() += 1;
            }
        })
        .await?;
    let active = compare.then(|| src.config.active().compiled.clone());
    Ok(verdicts(span, counts, &draft_c, active.as_deref(), draft, warnings))
}

/// The preview of `counts` (jobs per label set): pure, so tests need no database.
pub fn verdicts(
    span: Span,
    counts: BTreeMap<Labels, u64>,
    draft_c: &Compiled,
    active: Option<&Compiled>,
    draft: &SchedulerConfig,
    warnings: Vec<Problem>,
) -> RoutingPreview {
    let keys: BTreeSet<&str> = counts.keys().flat_map(|l| l.keys().map(String::as_str)).collect();
    let unevaluable = draft
        .rules()
        .iter()
        .enumerate()
        .filter_map(|(i, rule)| {
            let mut unknown: Vec<String> = Vec::new();
            for e in rule.selector.as_deref().unwrap_or_default() {
                if !keys.contains(e.key.as_str()) && !unknown.contains(&e.key) {
                    unknown.push(e.key.clone());
                }
            }
            (!unknown.is_empty()).then_some((i, unknown))
        })
        .collect();
    let jobs = counts.values().sum();
    let label_sets_total = counts.len();
    let mut sets: Vec<(Labels, u64)> = counts.into_iter().collect();
    // Most frequent first; equal counts in label order, so the answer is deterministic.
    sets.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    sets.truncate(MAX_LABEL_SETS);
    let label_sets = sets
        .into_iter()
        .map(|(labels, jobs)| LabelSet { draft: route(draft_c, &labels), active: active.map(|c| route(c, &labels)), labels, jobs })
        .collect();
    RoutingPreview { span, jobs, label_sets_total, label_sets, warnings, unevaluable }
}

/// Where `c` routes a job with `labels` and no requested priority (so only a missing rule
/// can refuse it).
fn route(c: &Compiled, labels: &Labels) -> Verdict {
    match engine::route(c, labels, None) {
        Ok(r) => Verdict { queue: Some(r.queue.to_string()), rule_index: r.rule_index },
        Err(_) => Verdict { queue: None, rule_index: None },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRAFT: &str = r#"resource_flavors: [{name: f}]
resource_queues:
  - {name: research, resource_groups: [{covered_resources: [cpu], flavors: [{name: f}]}]}
  - {name: other, resource_groups: [{covered_resources: [cpu], flavors: [{name: f}]}]}
scheduling_rules:
  - resource_queue: research
    selector: [{key: team, operator: in, values: [research]}]
  - resource_queue: other
    selector: [{key: tier, operator: exists}]
"#;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn label_sets_are_routed_under_both_configs_most_frequent_first() {
        let draft = app::config::parse(DRAFT, app::config::Format::Yaml).unwrap();
        let draft_c = engine::compile(&draft).unwrap();
        let active_c = engine::compile(&SchedulerConfig::initial()).unwrap();
        let counts = BTreeMap::from([(labels(&[("team", "research")]), 3), (labels(&[("team", "infra")]), 5), (Labels::new(), 1)]);
        let span = Span { from_us: 0, to_us: 1 };
        let p = verdicts(span, counts, &draft_c, Some(&active_c), &draft, Vec::new());
        assert_eq!((p.jobs, p.label_sets_total), (9, 3));
        // (labels, jobs, draft's queue and rule, active config's queue)
        let seen: Vec<String> = p
            .label_sets
            .iter()
            .map(|s| format!("{:?} {} {:?} {:?} {:?}", s.labels, s.jobs, s.draft.queue, s.draft.rule_index, s.active.as_ref().map(|a| &a.queue)))
            .collect();
        assert_eq!(
            seen,
            [
                r#"{"team": "infra"} 5 None None Some(Some("default"))"#,
                r#"{"team": "research"} 3 Some("research") Some(0) Some(Some("default"))"#,
                r#"{} 1 None None Some(Some("default"))"#,
            ]
        );
        // No recorded job has a `tier` label: rule 1 cannot be judged from the record.
        assert_eq!(p.unevaluable, [(1, vec!["tier".to_string()])]);
    }
}
