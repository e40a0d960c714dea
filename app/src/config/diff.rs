//! TEMPORARY stub until the config branch lands.
use serde::{Deserialize, Serialize};
use super::SchedulerConfig;
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigDiff { pub identical: bool, pub changes: Vec<Change>, pub unified: String }
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change { pub section: Section, pub kind: ChangeKind, pub path: String, pub old: Option<serde_json::Value>, pub new: Option<serde_json::Value>, pub summary: String }
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)] #[serde(rename_all = "snake_case")]
pub enum Section { Flavors, Queues, Rules }
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)] #[serde(rename_all = "snake_case")]
pub enum ChangeKind { Added, Removed, Changed, Reordered }
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)] #[serde(rename_all = "snake_case")]
pub enum LineTag { Equal, Delete, Insert }
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffLine { pub tag: LineTag, pub old_line: Option<usize>, pub new_line: Option<usize>, pub text: String }
pub fn diff_labeled(old: &SchedulerConfig, new: &SchedulerConfig, _a: &str, _b: &str) -> ConfigDiff { ConfigDiff { identical: old == new, changes: vec![], unified: String::new() } }
pub fn diff(old: &SchedulerConfig, new: &SchedulerConfig) -> ConfigDiff { diff_labeled(old, new, "a", "b") }
pub fn line_diff(_a: &str, _b: &str) -> Vec<DiffLine> { vec![] }
