//! The `scheduling_rules` section: the queue each rule names, selectors, priority bounds, and
//! reachability (first match wins, so nothing after a catch-all can match).

use super::{list, Checker, BUILTIN_QUEUE};
use crate::config::model::{PriorityPolicy, SchedulingRule};

/// A rule without selector (or with an empty one) matches every job that reaches it.
pub(crate) fn is_catch_all(rule: &SchedulingRule) -> bool {
    rule.selector.as_deref().unwrap_or_default().is_empty()
}

impl<'a> Checker<'a> {
    pub(super) fn rules(&mut self) {
        let rules = self.cfg.rules();
        if !rules.is_empty() && !rules.iter().any(is_catch_all) {
            self.warning(
                "scheduling_rules",
                "no rule is a catch-all (a rule without selector), so jobs that match no rule are rejected",
            );
        }
        let mut catch_all = None;
        for (i, rule) in rules.iter().enumerate() {
            let path = format!("scheduling_rules[{i}]");
            if let Some(c) = catch_all {
                self.warning(
                    &path,
                    format!("this rule can never match: rule {} before it is a catch-all (it has no selector)", c + 1),
                );
            } else if is_catch_all(rule) {
                catch_all = Some(i);
            }
            self.rule_queue(&path, &rule.resource_queue);
            self.selector(&format!("{path}.selector"), rule.selector.as_deref());
            if let Some(policy) = &rule.priority_policy {
                self.priority(&format!("{path}.priority_policy"), policy);
            }
        }
    }

    /// The queue a rule routes to must exist (see the module doc of `validate` for `default`).
    fn rule_queue(&mut self, path: &str, queue: &str) {
        let path = format!("{path}.resource_queue");
        if super::is_blank(queue) {
            self.error(path, "must name a queue");
        } else if self.cfg.queues().is_empty() {
            if queue != BUILTIN_QUEUE {
                self.error(
                    path,
                    format!(
                        "no queue named `{queue}` is defined; with no queues defined only the built-in queue \
                         `{BUILTIN_QUEUE}` exists"
                    ),
                );
            }
        } else if let Some(&q) = self.queue_index.get(queue) {
            if super::queues::covers_nothing(&self.cfg.queues()[q]) {
                self.warning(path, format!("queue `{queue}` covers no resource, so every job this rule routes is rejected"));
            }
        } else {
            let defined = list(self.queue_index.keys().copied().collect::<std::collections::BTreeSet<_>>());
            self.error(path, format!("no queue named `{queue}` is defined (defined queues: {defined})"));
        }
    }

    /// `min ≤ default ≤ max`, for the bounds that are given.
    fn priority(&mut self, path: &str, p: &PriorityPolicy) {
        for (field, value) in [("default", p.default), ("min", p.min), ("max", p.max)] {
            self.sdk_priority(format!("{path}.{field}"), field, value);
        }
        if let (Some(d), Some(min)) = (p.default, p.min) {
            if d < min {
                self.error(format!("{path}.default"), format!("{d} is below the minimum {min}"));
            }
        }
        if let (Some(d), Some(max)) = (p.default, p.max) {
            if d > max {
                self.error(format!("{path}.default"), format!("{d} is above the maximum {max}"));
            }
        }
        if let (Some(min), Some(max)) = (p.min, p.max) {
            if min > max {
                self.error(format!("{path}.min"), format!("{min} is greater than the maximum {max}"));
            }
        }
    }
}
