//! What the public `anyscale` SDK cannot read back. Berth serves the Anyscale scheduler API
//! (`/api/v2/scheduler/…`), and the SDK re-validates every config it reads: it refuses some
//! configs Berth allows (custom resource names, negative priorities) and silently drops
//! Berth's extension fields. Each such field or value gets a warning, never an error: Berth
//! keeps its extensions, and the warning says what an SDK user would lose.
//!
//! Also the `recycle_policy` the Anyscale API model carries: accepted, checked like the API
//! checks it, and stored, but Berth recycles no nodes.

use super::Checker;
use crate::config::model::{RecyclePolicy, ResourceQueue};

/// Every portability warning starts with this.
pub const NOT_READABLE: &str = "not readable by the anyscale SDK";

/// The only names the SDK accepts in `covered_resources`.
pub const SDK_RESOURCES: [&str; 4] = ["cpu", "memory_gb", "gpu", "tpu"];

impl<'a> Checker<'a> {
    /// A warning at `path`: the SDK cannot read this field or value, and why.
    fn not_readable(&mut self, path: String, why: String) {
        self.warning(path, format!("{NOT_READABLE}: {why}"));
    }

    /// Berth's queue extensions, which the SDK drops on read.
    pub(super) fn queue_extensions(&mut self, path: &str, queue: &ResourceQueue) {
        let extensions = [
            ("ordering_policy", queue.ordering_policy.is_some()),
            ("placement_policy", queue.placement_policy.is_some()),
            ("queueing_strategy", queue.queueing_strategy.is_some()),
            // Without a cohort the weight is an error already (see `cohorts`).
            ("fair_sharing_weight", queue.fair_sharing_weight.is_some() && queue.cohort_name.is_some()),
        ];
        for (field, set) in extensions {
            if set {
                self.not_readable(format!("{path}.{field}"), "a Berth extension, which the SDK drops when it reads this config".into());
            }
        }
    }

    /// A covered resource outside the SDK's four names: `get_config` fails on the config.
    pub(super) fn sdk_resource(&mut self, path: String, resource: &str) {
        if !super::is_blank(resource) && !SDK_RESOURCES.contains(&resource) {
            self.not_readable(
                path,
                format!("it accepts only {} as covered resources, so reading this config with it fails on `{resource}`", SDK_RESOURCES.join(", ")),
            );
        }
    }

    /// A negative priority bound or default: the SDK accepts only priorities ≥ 0.
    pub(super) fn sdk_priority(&mut self, path: String, field: &str, value: Option<i64>) {
        if let Some(v) = value.filter(|v| *v < 0) {
            self.not_readable(path, format!("it refuses negative priorities, so reading this config with it fails on {field} {v}"));
        }
    }

    /// `recycle_policy`: the API's own rule (`max_workloads` ≥ 1, durations not blank), and
    /// a warning that Berth does not act on it.
    pub(super) fn recycle_policy(&mut self) {
        let Some(policy) = &self.cfg.recycle_policy else { return };
        let RecyclePolicy { rotation_interval, max_workloads, max_idle_duration } = policy;
        if let Some(n) = max_workloads.filter(|n| *n < 1) {
            self.error("recycle_policy.max_workloads", format!("must be at least 1, but is {n}"));
        }
        for (field, value) in [("rotation_interval", rotation_interval), ("max_idle_duration", max_idle_duration)] {
            if value.as_deref().is_some_and(super::is_blank) {
                self.error(format!("recycle_policy.{field}"), "must not be empty when given");
            }
        }
        self.warning("recycle_policy", "stored as given, but Berth does not recycle nodes: it has no effect here");
    }
}
