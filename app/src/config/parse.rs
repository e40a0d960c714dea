//! TEMPORARY stub until the config branch lands.
use super::{Problem, SchedulerConfig};
pub enum Format { Yaml, Json }
pub fn parse(text: &str, format: Format) -> Result<SchedulerConfig, Vec<Problem>> {
    match format {
        Format::Json => serde_json::from_str(text).map_err(|e| vec![Problem::error("", e.to_string())]),
        Format::Yaml => serde_yaml::from_str(text).map_err(|e| vec![Problem::error("", e.to_string())]),
    }
}
pub fn parse_auto(text: &str) -> Result<SchedulerConfig, Vec<Problem>> {
    if text.trim().is_empty() { return Ok(SchedulerConfig::default()) }
    if text.trim_start().starts_with('{') { parse(text, Format::Json) } else { parse(text, Format::Yaml) }
}
pub fn from_json_value(v: &serde_json::Value) -> Result<SchedulerConfig, Vec<Problem>> {
    serde_json::from_value(v.clone()).map_err(|e| vec![Problem::error("", e.to_string())])
}
