//! What changed between two configs: a structural list of changes (for the dashboard's
//! change list and the apply response) and a unified text diff of the canonical YAMLs.
//!
//! Path scheme of a [`Change`]: like a [`Problem`](super::Problem) path, except that items
//! with a name are addressed by name, not position: `resource_flavors[spot]`,
//! `resource_queues[research].resource_groups[0].flavors[spot].resources[gpu].nominal_quota`.
//! Items without a name use their index (`resource_groups[0]`, `selector[1]`); rules use their
//! index in the *new* config (in the old one for a removed rule). A list of named items is
//! matched by name only when the names are unique in both versions, and by position otherwise.
//! Lists of scalars (`covered_resources`, `values`) are compared whole.
//!
//! Named items are added, removed or changed field by field down to the leaves; when the
//! items both versions share appear in a different order, that is one `reordered` change at
//! the list's path, with the old and new name orders (for a group's flavors the order is the
//! order of preference). Rules have no names: they are matched by content first (a longest
//! common subsequence, then identical rules found elsewhere count as moved: `reordered`
//! with the old and new index), and what is left is paired up by position within each edited
//! stretch (`changed`, field by field) or else `added` / `removed`.

mod rules;
mod summary;
#[cfg(test)]
mod tests;
mod tree;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use similar::{ChangeTag, TextDiff};

use super::model::SchedulerConfig;
use super::parse::push_key;
use super::yaml::to_canonical_yaml;

/// The result of comparing two configs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigDiff {
    /// Whether the two configs are equal (then `changes` is empty and `unified` is "").
    pub identical: bool,
    pub changes: Vec<Change>,
    /// Unified diff of the canonical YAMLs, 3 lines of context.
    pub unified: String,
}

/// One structural change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub section: Section,
    pub kind: ChangeKind,
    /// Where, in the scheme of the module doc.
    pub path: String,
    /// The value before (absent for `added`); for a moved rule, its old index.
    pub old: Option<Value>,
    /// The value after (absent for `removed`); for a moved rule, its new index.
    pub new: Option<Value>,
    /// One human sentence, e.g. "queue research: gpu quota on flavor spot 64 → 32".
    pub summary: String,
}

/// The part of the config a change is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Section {
    Flavors,
    Queues,
    Rules,
    /// Settings outside the three lists (`recycle_policy`).
    Settings,
}

/// What happened at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Added,
    Removed,
    Changed,
    Reordered,
}

/// One line of a side-by-side text diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffLine {
    pub tag: LineTag,
    /// 1-based line number in the old text (absent for an inserted line).
    pub old_line: Option<usize>,
    /// 1-based line number in the new text (absent for a deleted line).
    pub new_line: Option<usize>,
    /// The line without its line break.
    pub text: String,
}

/// Whether a line is in both texts, only the old or only the new.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineTag {
    Equal,
    Delete,
    Insert,
}

/// Compares two configs; the unified diff is headed `version A` / `version B`.
pub fn diff(old: &SchedulerConfig, new: &SchedulerConfig) -> ConfigDiff {
    diff_labeled(old, new, "version A", "version B")
}

/// Compares two configs, heading the unified diff with the given labels.
pub fn diff_labeled(old: &SchedulerConfig, new: &SchedulerConfig, old_label: &str, new_label: &str) -> ConfigDiff {
    let (old_yaml, new_yaml) = (to_canonical_yaml(old), to_canonical_yaml(new));
    let unified = TextDiff::from_lines(&old_yaml, &new_yaml)
        .unified_diff()
        .context_radius(3)
        .header(old_label, new_label)
        .to_string();
    let mut raw = Vec::new();
    let (old_v, new_v) = (as_value(old), as_value(new));
    for key in ["resource_flavors", "resource_queues"] {
        tree::section(key, old_v.get(key), new_v.get(key), &mut raw);
    }
    rules::section(old, new, old_v.get("scheduling_rules"), new_v.get("scheduling_rules"), &mut raw);
    tree::setting("recycle_policy", old_v.get("recycle_policy"), new_v.get("recycle_policy"), &mut raw);
    let changes = raw.into_iter().map(|r| r.into_change(old, new)).collect();
    ConfigDiff { identical: old == new, changes, unified }
}

/// Line-by-line comparison of two texts, for a side-by-side view.
pub fn line_diff(old_text: &str, new_text: &str) -> Vec<DiffLine> {
    TextDiff::from_lines(old_text, new_text)
        .iter_all_changes()
        .map(|c| DiffLine {
            tag: match c.tag() {
                ChangeTag::Equal => LineTag::Equal,
                ChangeTag::Delete => LineTag::Delete,
                ChangeTag::Insert => LineTag::Insert,
            },
            old_line: c.old_index().map(|i| i + 1),
            new_line: c.new_index().map(|i| i + 1),
            text: strip_line_break(c.value()).to_string(),
        })
        .collect()
}

fn strip_line_break(line: &str) -> &str {
    let line = line.strip_suffix('\n').unwrap_or(line);
    line.strip_suffix('\r').unwrap_or(line)
}

fn as_value(cfg: &SchedulerConfig) -> Value {
    // Only strings, numbers, lists and string-keyed maps: this cannot fail.
    serde_json::to_value(cfg).expect("config serializes to JSON")
}

/// One step of a change's path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    /// A map key: `.key`.
    Key(String),
    /// A named item of a list: `[name]`.
    Name(String),
    /// A list item by position: `[0]`.
    Index(usize),
}

/// `path` with one more step.
fn child(path: &[Seg], seg: Seg) -> Vec<Seg> {
    let mut out = path.to_vec();
    out.push(seg);
    out
}

/// The path as text, e.g. `resource_queues[research].resource_groups[0]`.
fn render(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => push_key(&mut out, k),
            Seg::Name(n) => out.push_str(&format!("[{n}]")),
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// A change before its section and summary are worked out.
struct RawChange {
    kind: ChangeKind,
    path: Vec<Seg>,
    old: Option<Value>,
    new: Option<Value>,
    /// Set where the generic summary would say less than the producer knows (rules).
    summary: Option<String>,
}

impl RawChange {
    fn new(kind: ChangeKind, path: Vec<Seg>, old: Option<&Value>, new: Option<&Value>) -> Self {
        RawChange { kind, path, old: old.cloned(), new: new.cloned(), summary: None }
    }

    fn into_change(self, old_cfg: &SchedulerConfig, new_cfg: &SchedulerConfig) -> Change {
        let section = match self.path.first() {
            Some(Seg::Key(k)) if k == "resource_flavors" => Section::Flavors,
            Some(Seg::Key(k)) if k == "resource_queues" => Section::Queues,
            Some(Seg::Key(k)) if k == "scheduling_rules" => Section::Rules,
            _ => Section::Settings,
        };
        let summary = match self.summary {
            Some(s) => s,
            None => summary::sentence(&self, old_cfg, new_cfg),
        };
        Change { section, kind: self.kind, path: render(&self.path), old: self.old, new: self.new, summary }
    }
}
