//! TEMPORARY stub until the config branch lands.
use super::{Problem, Report, SchedulerConfig};
pub fn validate(cfg: &SchedulerConfig) -> Report {
    let mut r = Report::default();
    for (i, q) in cfg.queues().iter().enumerate() { if q.name.is_empty() { r.problems.push(Problem::error(format!("resource_queues[{i}].name"), "empty")) } }
    r
}
pub fn validate_text(text: &str) -> (Option<SchedulerConfig>, Report) {
    match super::parse::parse_auto(text) {
        Ok(c) => { let r = validate(&c); (Some(c), r) }
        Err(p) => (None, Report { problems: p }),
    }
}
