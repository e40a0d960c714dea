//! TEMPORARY stub until the config branch lands.
use super::SchedulerConfig;
pub fn to_canonical_yaml(cfg: &SchedulerConfig) -> String { serde_yaml::to_string(cfg).unwrap() }
