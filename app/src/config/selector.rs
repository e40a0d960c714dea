//! Label selectors: how a list of [`MatchExpression`]s matches a set of labels.
//!
//! Semantics follow Kubernetes label selectors, so admins who know those are not surprised:
//! every expression must match (AND); `in` needs the key present with one of the values;
//! `not_in` matches when the key is absent *or* its value is not listed; `exists` and
//! `does_not_exist` look at the key only. An empty selector matches everything.

use std::collections::BTreeMap;

use super::model::{MatchExpression, Operator};

/// Labels of a job or a node.
pub type Labels = BTreeMap<String, String>;

impl MatchExpression {
    /// Whether this one expression matches `labels`.
    pub fn matches(&self, labels: &Labels) -> bool {
        let value = labels.get(&self.key);
        let listed = |v: &String| self.values.as_deref().unwrap_or_default().contains(v);
        match self.operator {
            Operator::In => value.is_some_and(listed),
            Operator::NotIn => !value.is_some_and(listed),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

/// Whether every expression of `selector` matches `labels` (an absent selector matches all).
pub fn matches(selector: Option<&[MatchExpression]>, labels: &Labels) -> bool {
    selector.unwrap_or_default().iter().all(|e| e.matches(labels))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(key: &str, operator: Operator, values: &[&str]) -> MatchExpression {
        let values = (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect());
        MatchExpression { key: key.into(), operator, values }
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn operators_follow_kubernetes_semantics() {
        let team_ml = labels(&[("team", "ml")]);
        let none = labels(&[]);
        let cases = [
            (expr("team", Operator::In, &["ml", "cv"]), &team_ml, true),
            (expr("team", Operator::In, &["cv"]), &team_ml, false),
            (expr("team", Operator::In, &["ml"]), &none, false),
            (expr("team", Operator::NotIn, &["cv"]), &team_ml, true),
            (expr("team", Operator::NotIn, &["ml"]), &team_ml, false),
            (expr("team", Operator::NotIn, &["ml"]), &none, true),
            (expr("team", Operator::Exists, &[]), &team_ml, true),
            (expr("team", Operator::Exists, &[]), &none, false),
            (expr("team", Operator::DoesNotExist, &[]), &team_ml, false),
            (expr("team", Operator::DoesNotExist, &[]), &none, true),
        ];
        for (e, l, want) in cases {
            assert_eq!(e.matches(l), want, "{e:?} on {l:?}");
        }
    }

    #[test]
    fn all_expressions_must_match_and_empty_matches_all() {
        let l = labels(&[("team", "ml"), ("tier", "prod")]);
        let both = [expr("team", Operator::In, &["ml"]), expr("tier", Operator::In, &["dev"])];
        assert!(!matches(Some(&both), &l));
        assert!(matches(Some(&both[..1]), &l));
        assert!(matches(None, &l));
        assert!(matches(Some(&[]), &l));
    }
}
