//! Cohorts: the fields of the real Anyscale model that pool quota between queues
//! (`cohort_name`, `lending_limit`, `borrowing_limit`, `reclaim_within_cohort`,
//! `borrow_within_cohort`), checked exactly as strictly as the `anyscale` SDK (0.26.112)
//! checks them, plus Berth's fair-sharing weight.

use super::{number, Checker};
use crate::config::model::*;

impl<'a> Checker<'a> {
    /// `preemption.reclaim_within_cohort` and `preemption.borrow_within_cohort` of a queue.
    pub(super) fn cohort_preemption(&mut self, path: &str, queue: &ResourceQueue) {
        let Some(p) = &queue.preemption else { return };
        let at = |field: &str| format!("{path}.preemption.{field}");
        if let Some(borrow) = p.borrow_within_cohort {
            if borrow == CohortPreemption::Any {
                self.error(
                    at("borrow_within_cohort"),
                    format!("must be one of {}, not `any`", BORROW_POLICIES.join(", ")),
                );
            } else if borrow != CohortPreemption::Never
                && !matches!(p.reclaim_within_cohort, Some(CohortPreemption::LowerPriority | CohortPreemption::Any))
            {
                let reclaim = p.reclaim_within_cohort.map_or("omitted", CohortPreemption::as_str);
                self.error(
                    at("borrow_within_cohort"),
                    format!(
                        "`{}` needs reclaim within cohort `lower_priority` or `any` (it is {reclaim})",
                        borrow.as_str()
                    ),
                );
            }
        }
        if queue.cohort_name.is_none() {
            for (field, value) in [("reclaim_within_cohort", p.reclaim_within_cohort), ("borrow_within_cohort", p.borrow_within_cohort)] {
                if value.is_some_and(|v| v != CohortPreemption::Never) {
                    self.warning(at(field), format!("has no effect: queue `{}` has no cohort", queue.name));
                }
            }
        }
    }

    /// `cohort_name` needs quota to pool; the fair-sharing weight needs a cohort to share in.
    pub(super) fn cohort_membership(&mut self, path: &str, queue: &ResourceQueue) {
        if let Some(cohort) = queue.cohort_name.as_deref().filter(|c| !super::is_blank(c)) {
            if self.cohort_sizes.get(cohort) == Some(&1) {
                self.warning(
                    format!("{path}.cohort_name"),
                    format!("cohort `{cohort}` has only this queue: there is no peer to borrow from or lend to"),
                );
            }
            if queue.resource_groups.as_deref().unwrap_or_default().is_empty() {
                self.error(
                    format!("{path}.cohort_name"),
                    format!(
                        "queue `{}` has no resource groups (no quota to pool), so it cannot join cohort `{cohort}`",
                        queue.name
                    ),
                );
            }
        }
        let weight_path = format!("{path}.fair_sharing_weight");
        self.quantity(weight_path.clone(), queue.fair_sharing_weight);
        if queue.fair_sharing_weight.is_some() && queue.cohort_name.is_none() {
            self.error(weight_path, "needs a cohort on the queue: it weighs borrowing from cohort peers");
        }
    }

    /// A quota's `lending_limit` and `borrowing_limit`: at most nominal (lending), and only in
    /// a cohort (both).
    pub(super) fn cohort_limits(&mut self, spec_path: &str, spec: &ResourceQuotaSpec, in_cohort: bool) {
        for (field, value) in [("borrowing_limit", spec.borrowing_limit), ("lending_limit", spec.lending_limit)] {
            let path = format!("{spec_path}.{field}");
            self.quantity(path.clone(), value);
            if value.is_some() && !in_cohort {
                self.error(path, "needs a cohort on the queue: only cohort peers lend and borrow");
            }
        }
        if let (Some(lend), Some(nominal)) = (spec.lending_limit, spec.nominal_quota) {
            if lend > nominal {
                self.error(
                    format!("{spec_path}.lending_limit"),
                    format!("{} is more than the quota {}: a queue lends only its own quota", number(lend), number(nominal)),
                );
            }
        }
    }
}
