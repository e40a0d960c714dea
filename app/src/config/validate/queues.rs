//! The `resource_queues` section: names, resource groups, flavor quotas and their numbers,
//! extension fields, and (with nodes) quotas above what the flavor's nodes can hold. The
//! cohort fields are checked in `cohorts.rs`.

use std::collections::HashMap;

use super::{list, number, Checker};
use crate::config::model::*;
use crate::config::selector;

/// A queue without resource groups: it has quota for nothing, so it can admit no job.
pub(super) fn covers_nothing(queue: &ResourceQueue) -> bool {
    queue.resource_groups.as_deref().unwrap_or_default().is_empty()
}

/// Where in one queue a resource or flavor was first seen: (group index, item index).
type Seen<'a> = HashMap<&'a str, (usize, usize)>;

impl<'a> Checker<'a> {
    pub(super) fn queues(&mut self) {
        for (i, queue) in self.cfg.queues().iter().enumerate() {
            self.queue(i, queue);
        }
    }

    fn queue(&mut self, i: usize, queue: &'a ResourceQueue) {
        let path = format!("resource_queues[{i}]");
        let name = queue.name.as_str();
        let first = self.queue_index.get(name).copied();
        let has_rules = !self.cfg.rules().is_empty();
        if has_rules && !super::is_blank(name) && first == Some(i) && !self.routed_queues.contains(name) {
            self.warning(&path, format!("no scheduling rule routes jobs to queue `{name}`"));
        }
        self.unique_name(format!("{path}.name"), "queue", name, i, first);
        // In a cohort, the missing groups are an error already (see `cohorts`).
        if !super::is_blank(name) && first == Some(i) && covers_nothing(queue) && queue.cohort_name.is_none() {
            self.warning(
                &path,
                format!("queue `{name}` covers no resource (it has no resource group), so every job routed to it is rejected"),
            );
        }
        self.cohort_preemption(&path, queue);
        let mut covered = Seen::new();
        let mut flavors = Seen::new();
        let in_cohort = queue.cohort_name.is_some();
        for (g, group) in queue.resource_groups.as_deref().unwrap_or_default().iter().enumerate() {
            self.group(&format!("{path}.resource_groups[{g}]"), g, group, &mut covered, &mut flavors, in_cohort);
        }
        if queue.cohort_name.as_deref().is_some_and(super::is_blank) {
            self.error(format!("{path}.cohort_name"), "must not be empty when given");
        }
        self.cohort_membership(&path, queue);
        let policies = [
            ("ordering_policy", queue.ordering_policy.as_deref(), ORDERING_POLICIES),
            ("placement_policy", queue.placement_policy.as_deref(), PLACEMENT_POLICIES),
            ("queueing_strategy", queue.queueing_strategy.as_deref(), QUEUEING_STRATEGIES),
        ];
        for (field, value, accepted) in policies {
            self.one_of(format!("{path}.{field}"), value, accepted);
        }
        self.queue_extensions(&path, queue);
    }

    /// One resource group; `covered` and `flavors` carry what earlier groups of the queue hold.
    fn group(
        &mut self,
        path: &str,
        g: usize,
        group: &'a ResourceGroup,
        covered: &mut Seen<'a>,
        flavors: &mut Seen<'a>,
        in_cohort: bool,
    ) {
        if group.covered_resources.is_empty() {
            self.error(format!("{path}.covered_resources"), "a resource group must cover at least one resource");
        }
        for (k, resource) in group.covered_resources.iter().enumerate() {
            let at = format!("{path}.covered_resources[{k}]");
            match covered.get(resource.as_str()) {
                _ if super::is_blank(resource) => self.error(at, "resource name must not be empty"),
                Some(&(fg, fk)) if fg == g => self.error(
                    at,
                    format!(
                        "resource `{resource}` is listed twice in this group's covered resources (first as covered resource {})",
                        fk + 1
                    ),
                ),
                Some(&(fg, _)) => self.error(
                    at,
                    format!(
                        "resource `{resource}` is already covered by resource group {} of this queue; \
                         a resource may be covered by only one group per queue",
                        fg + 1
                    ),
                ),
                None => {
                    covered.insert(resource, (g, k));
                    self.sdk_resource(at, resource);
                }
            }
        }
        if group.flavors.is_empty() {
            self.error(format!("{path}.flavors"), "a resource group needs at least one flavor");
        }
        for (f, fq) in group.flavors.iter().enumerate() {
            self.flavor_quota(&format!("{path}.flavors[{f}]"), (g, f), group, fq, flavors, in_cohort);
        }
    }

    fn flavor_quota(
        &mut self,
        path: &str,
        at: (usize, usize),
        group: &'a ResourceGroup,
        fq: &'a FlavorQuota,
        seen: &mut Seen<'a>,
        in_cohort: bool,
    ) {
        let name = fq.name.as_str();
        let name_path = format!("{path}.name");
        if super::is_blank(name) {
            self.error(name_path, "flavor name must not be empty");
        } else if !self.flavor_index.contains_key(name) {
            let defined = list(self.flavor_index.keys().copied().collect::<std::collections::BTreeSet<_>>());
            self.error(name_path, format!("no flavor named `{name}` is defined (defined flavors: {defined})"));
        } else if let Some(&(fg, ff)) = seen.get(name) {
            self.error(
                name_path,
                format!(
                    "flavor `{name}` already appears in this queue (resource group {}, flavor {}); \
                     a flavor may appear only once per queue",
                    fg + 1,
                    ff + 1
                ),
            );
        } else {
            seen.insert(name, at);
        }
        let mut quoted: HashMap<&str, usize> = HashMap::new();
        for (r, spec) in fq.resources.as_deref().unwrap_or_default().iter().enumerate() {
            let spec_path = format!("{path}.resources[{r}]");
            let resource = spec.name.as_str();
            if super::is_blank(resource) {
                self.error(format!("{spec_path}.name"), "resource name must not be empty");
            } else if !group.covered_resources.iter().any(|c| c == resource) {
                self.error(
                    format!("{spec_path}.name"),
                    format!(
                        "resource `{resource}` is not among this group's covered resources [{}]",
                        group.covered_resources.join(", ")
                    ),
                );
            } else if let Some(first) = quoted.get(resource) {
                self.error(
                    format!("{spec_path}.name"),
                    format!("resource `{resource}` already has a quota in this flavor (quota {})", first + 1),
                );
            } else {
                quoted.insert(resource, r);
            }
            self.quantity(format!("{spec_path}.nominal_quota"), spec.nominal_quota);
            self.capacity(&format!("{spec_path}.nominal_quota"), name, spec);
            self.cohort_limits(&spec_path, spec, in_cohort);
        }
    }

    /// With nodes known: warns when a quota exceeds the total the flavor's nodes have.
    fn capacity(&mut self, path: &str, flavor: &str, spec: &ResourceQuotaSpec) {
        let (Some(nodes), Some(quota)) = (self.nodes, spec.nominal_quota) else { return };
        let Some(&fi) = self.flavor_index.get(flavor) else { return };
        let selector = self.cfg.flavors()[fi].selector.as_deref();
        let matched: Vec<_> = nodes.iter().filter(|n| selector::matches(selector, &n.labels)).collect();
        // A flavor without nodes is already reported once, at the flavor.
        if matched.is_empty() || !quota.is_finite() {
            return;
        }
        let total: f64 = matched.iter().filter_map(|n| n.capacity.get(&spec.name)).sum();
        if quota > total + 1e-9 {
            let resource = &spec.name;
            let nodes = match matched.len() {
                1 => "the 1 node".to_string(),
                n => format!("the {n} nodes"),
            };
            self.warning(
                path,
                format!(
                    "quota {} {resource} is more than the {} {resource} that {nodes} of flavor `{flavor}` have in total",
                    number(quota),
                    number(total)
                ),
            );
        }
    }
}
