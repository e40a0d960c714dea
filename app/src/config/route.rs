//! Routing: which queue and priority a job gets from its labels. The server routes every
//! submission with this code (through the engine's compiled config) and the submit form runs
//! it in the browser to say where a job will go as it is typed.
//!
//! The scheduling rules are walked in order and the first whose selector matches the job's
//! labels wins (selector semantics are Kubernetes', see [`super::selector`]). A rule without
//! selector matches everything not matched earlier. With no rules at all, everything goes to
//! the built-in `default` queue.

use super::model::{MatchExpression, OnViolation, SchedulerConfig};
use super::selector::{self, Labels};
use super::validate::BUILTIN_QUEUE;

/// The routing part of a config: its rules in order, ready to route with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Routing {
    rules: Vec<RuleTerms>,
}

/// One scheduling rule as routing reads it.
#[derive(Debug, Clone, PartialEq)]
struct RuleTerms {
    queue: String,
    selector: Option<Vec<MatchExpression>>,
    default: Option<i64>,
    min: Option<i64>,
    max: Option<i64>,
    on_violation: OnViolation,
}

/// Where a job goes and with which priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route<'a> {
    /// The queue.
    pub queue: &'a str,
    /// Index of the matching rule in `scheduling_rules`; `None` when routed to the built-in
    /// default because there are no rules.
    pub rule_index: Option<usize>,
    /// Effective priority.
    pub priority: i64,
}

/// A job refused at submit, with the reason shown to its submitter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Rejection {
    /// What kind of refusal, in a few snake_case words (a metric's label: one of a fixed set).
    pub code: &'static str,
    /// One human sentence.
    pub reason: String,
}

/// A rejection of kind `code`.
pub fn reject(code: &'static str, reason: impl Into<String>) -> Rejection {
    Rejection { code, reason: reason.into() }
}

impl Routing {
    /// The rules of `cfg`, in order. Omitted `on_violation` means reject: silently changing
    /// a priority the user asked for is the surprising choice, so it has to be asked for.
    pub fn new(cfg: &SchedulerConfig) -> Self {
        let rules = cfg
            .rules()
            .iter()
            .map(|r| {
                let p = r.priority_policy.clone().unwrap_or_default();
                RuleTerms {
                    queue: r.resource_queue.clone(),
                    selector: r.selector.clone(),
                    default: p.default,
                    min: p.min,
                    max: p.max,
                    on_violation: p.on_violation.unwrap_or(OnViolation::Reject),
                }
            })
            .collect();
        Routing { rules }
    }

    /// Routes a job by its labels and applies the matching rule's priority policy.
    ///
    /// Priority: the requested one, else the rule's `default`, else 0. A requested (or
    /// default) priority outside `[min, max]` is rejected with the bound in the reason when
    /// `on_violation` is `reject` — also when it is omitted — and clamped to the bound with
    /// `force_update`. A job that gave no priority is never rejected for it: with no default,
    /// 0 is clamped into the bounds.
    pub fn route(&self, labels: &Labels, requested_priority: Option<i64>) -> Result<Route<'_>, Rejection> {
        if self.rules.is_empty() {
            return Ok(Route { queue: BUILTIN_QUEUE, rule_index: None, priority: requested_priority.unwrap_or(0) });
        }
        let (index, rule) = self
            .rules
            .iter()
            .enumerate()
            .find(|(_, r)| selector::matches(r.selector.as_deref(), labels))
            .ok_or_else(|| reject("no_rule_matches", format!("no scheduling rule matches labels {}", describe_labels(labels))))?;
        let priority = rule.bounded(index, requested_priority.or(rule.default))?;
        Ok(Route { queue: &rule.queue, rule_index: Some(index), priority })
    }

    /// The priority a routed job may be changed to, under the rule that routed it (the same
    /// policy as at submit); a job no rule routed takes any priority.
    pub fn bounded_priority(&self, rule_index: Option<i64>, priority: i64) -> Result<i64, Rejection> {
        let found = rule_index.and_then(|i| usize::try_from(i).ok()).and_then(|i| Some((i, self.rules.get(i)?)));
        match found {
            Some((index, rule)) => rule.bounded(index, Some(priority)),
            None => Ok(priority),
        }
    }
}

impl RuleTerms {
    /// A priority under rule `index`'s policy: `None` (none asked, no default) is 0 clamped
    /// into the bounds; one outside `[min, max]` is clamped with `force_update` and rejected,
    /// naming the bound, with `reject`.
    fn bounded(&self, index: usize, priority: Option<i64>) -> Result<i64, Rejection> {
        let clamp = |p: i64| p.max(self.min.unwrap_or(i64::MIN)).min(self.max.unwrap_or(i64::MAX));
        let Some(p) = priority else { return Ok(clamp(0)) };
        let violated = match (self.min, self.max) {
            (Some(min), _) if p < min => Some(format!("below the minimum {min}")),
            (_, Some(max)) if p > max => Some(format!("above the maximum {max}")),
            _ => None,
        };
        match (violated, self.on_violation) {
            (None, _) => Ok(p),
            (Some(_), OnViolation::ForceUpdate) => Ok(clamp(p)),
            (Some(why), OnViolation::Reject) => Err(reject(
                "priority_out_of_range",
                format!("priority {p} is {why} allowed by scheduling_rules[{index}] (queue {})", self.queue),
            )),
        }
    }
}

/// `team=vision, tier=prod`, or `(none)`.
fn describe_labels(labels: &Labels) -> String {
    if labels.is_empty() {
        return "(none)".into();
    }
    labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")
}

/// The flavors of `queue` a job asking for `resources` would be tried on, in order (those of
/// the resource groups covering what it asks); `Err` names the first resource no group of the
/// queue covers. A config without queues has only the built-in queue, which covers everything.
pub fn flavors_for<'a>(cfg: &'a SchedulerConfig, queue: &str, resources: &[&str]) -> Result<Vec<&'a str>, String> {
    let Some(q) = cfg.queues().iter().find(|q| q.name == queue) else {
        return Ok(Vec::new());
    };
    let groups = q.resource_groups.as_deref().unwrap_or_default();
    let mut out = Vec::new();
    for r in resources {
        let group = groups.iter().find(|g| g.covered_resources.iter().any(|c| c == r)).ok_or_else(|| r.to_string())?;
        for f in &group.flavors {
            if !out.contains(&f.name.as_str()) {
                out.push(f.name.as_str());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_auto as parse;

    const CONFIG: &str = "resource_flavors:\n- name: team-cpu\n- name: big\n\
        resource_queues:\n- name: vision\n  resource_groups:\n  - covered_resources: [cpu]\n    flavors:\n    - name: team-cpu\n    - name: big\n- name: rest\n\
        scheduling_rules:\n- resource_queue: vision\n  selector:\n  - key: team\n    operator: in\n    values: [vision]\n  priority_policy:\n    default: 10\n    max: 20\n\
        - resource_queue: rest\n  priority_policy:\n    min: 5\n    max: 9\n    on_violation: force_update\n";

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_first_matching_rule_gives_queue_and_priority() {
        let cfg = parse(CONFIG).expect("parses");
        let r = Routing::new(&cfg);
        assert_eq!(r.route(&labels(&[("team", "vision")]), None), Ok(Route { queue: "vision", rule_index: Some(0), priority: 10 }));
        assert_eq!(r.route(&labels(&[("team", "x")]), Some(1)), Ok(Route { queue: "rest", rule_index: Some(1), priority: 5 }));
        let refused = r.route(&labels(&[("team", "vision")]), Some(30)).expect_err("above max");
        assert_eq!(refused.reason, "priority 30 is above the maximum 20 allowed by scheduling_rules[0] (queue vision)");
        assert_eq!(r.bounded_priority(Some(1), 100), Ok(9));
        assert_eq!(r.bounded_priority(None, 100), Ok(100));
    }

    #[test]
    fn no_rules_route_to_the_builtin_queue_and_unmatched_labels_are_refused() {
        let none = Routing::new(&SchedulerConfig::default());
        assert_eq!(none.route(&labels(&[]), Some(7)), Ok(Route { queue: "default", rule_index: None, priority: 7 }));
        let mut cfg = parse(CONFIG).expect("parses");
        cfg.scheduling_rules.as_mut().expect("rules").pop();
        let refused = Routing::new(&cfg).route(&labels(&[("a", "b")]), None).expect_err("no match");
        assert_eq!((refused.code, refused.reason.as_str()), ("no_rule_matches", "no scheduling rule matches labels a=b"));
    }

    #[test]
    fn flavors_are_those_of_the_groups_covering_the_request() {
        let cfg = parse(CONFIG).expect("parses");
        assert_eq!(flavors_for(&cfg, "vision", &["cpu"]), Ok(vec!["team-cpu", "big"]));
        assert_eq!(flavors_for(&cfg, "vision", &["cpu", "gpu"]), Err("gpu".to_string()));
        assert_eq!(flavors_for(&cfg, "rest", &["cpu"]), Err("cpu".to_string()));
    }
}
