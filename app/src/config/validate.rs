//! Checks a parsed config against the rules of PRODUCT.md §2 and reports *every* problem at
//! once, in document order, each with its field path and a message that names the value.
//!
//! Errors block an apply; warnings (unreachable rules, unused flavors and queues, quotas
//! above the capacity the nodes have, what the `anyscale` SDK cannot read back) are shown
//! but allowed. The same code runs on the
//! server on apply and in the browser as the admin types.
//!
//! The built-in queue `default`: with no queues defined at all, every job goes to a built-in
//! `default` queue, so rules may target `default` (and nothing else). As soon as any queue is
//! defined, `default` is an ordinary name: a rule may target it only if a queue of that name
//! is defined.

mod cohorts;
mod flavors;
pub mod portability;
mod queues;
mod rules;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::model::{MatchExpression, SchedulerConfig};
use super::parse::parse_auto;
use super::problem::{Problem, Report};
use super::selector::Labels;

/// The queue every job goes to when no queues are defined.
pub const BUILTIN_QUEUE: &str = "default";

/// A node as a backend reports it: its labels (what flavors select on) and its capacity per
/// resource (`cpu`, `gpu`, `memory_gb`, custom names).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub name: String,
    #[serde(default)]
    pub labels: Labels,
    #[serde(default)]
    pub capacity: BTreeMap<String, f64>,
}

/// Every problem of `cfg` that can be found without knowing the nodes.
pub fn validate(cfg: &SchedulerConfig) -> Report {
    Checker::new(cfg, None).run()
}

/// Like [`validate`], plus warnings about flavors that select no node and quotas above the
/// total capacity of the nodes a flavor selects.
pub fn validate_with_nodes(cfg: &SchedulerConfig, nodes: &[NodeInfo]) -> Report {
    Checker::new(cfg, Some(nodes)).run()
}

/// Parses (YAML or JSON) and validates; parse problems, if any, are the whole report.
pub fn validate_text(text: &str) -> (Option<SchedulerConfig>, Report) {
    match parse_auto(text) {
        Ok(cfg) => {
            let report = validate(&cfg);
            (Some(cfg), report)
        }
        Err(problems) => (None, Report { problems }),
    }
}

/// One validation run: the config, what is known about it up front, and the problems found.
struct Checker<'a> {
    cfg: &'a SchedulerConfig,
    nodes: Option<&'a [NodeInfo]>,
    /// Index of the first flavor with each name.
    flavor_index: HashMap<&'a str, usize>,
    /// Index of the first queue with each name.
    queue_index: HashMap<&'a str, usize>,
    /// Flavor names some queue refers to.
    used_flavors: HashSet<&'a str>,
    /// Queue names some rule routes to.
    routed_queues: HashSet<&'a str>,
    /// Number of queues naming each cohort.
    cohort_sizes: HashMap<&'a str, usize>,
    problems: Vec<Problem>,
}

impl<'a> Checker<'a> {
    fn new(cfg: &'a SchedulerConfig, nodes: Option<&'a [NodeInfo]>) -> Self {
        let used_flavors = cfg
            .queues()
            .iter()
            .flat_map(|q| q.resource_groups.as_deref().unwrap_or_default())
            .flat_map(|g| &g.flavors)
            .map(|f| f.name.as_str())
            .collect();
        Checker {
            cfg,
            nodes,
            flavor_index: first_indices(cfg.flavors().iter().map(|f| f.name.as_str())),
            queue_index: first_indices(cfg.queues().iter().map(|q| q.name.as_str())),
            used_flavors,
            routed_queues: cfg.rules().iter().map(|r| r.resource_queue.as_str()).collect(),
            cohort_sizes: cfg.queues().iter().filter_map(|q| q.cohort_name.as_deref()).fold(HashMap::new(), |mut m, c| {
                *m.entry(c).or_default() += 1;
                m
            }),
            problems: Vec::new(),
        }
    }

    fn run(mut self) -> Report {
        self.flavors();
        self.queues();
        self.rules();
        self.recycle_policy();
        self.no_nul_characters();
        if let (false, Ok(root)) = (self.problems.is_empty(), serde_json::to_value(self.cfg)) {
            for p in &mut self.problems {
                p.place = super::place::describe_in(&root, &p.path);
            }
        }
        Report { problems: self.problems }
    }

    /// No text anywhere in the config may hold a NUL character: PostgreSQL cannot store one,
    /// and names end up in its columns (a job's queue, an event's flavor, a sample's resource).
    fn no_nul_characters(&mut self) {
        let mut paths = Vec::new();
        if let Ok(value) = serde_json::to_value(self.cfg) {
            nul_paths(&value, String::new(), &mut paths);
        }
        for path in paths {
            self.error(path, "must not contain a NUL character");
        }
    }

    fn error(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem::error(path, message));
    }

    fn warning(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem::warning(path, message));
    }

    /// A name of a flavor or queue (`what`) at `path`: non-blank, and the first of its kind.
    fn unique_name(&mut self, path: String, what: &str, name: &str, index: usize, first: Option<usize>) {
        if is_blank(name) {
            self.error(path, format!("{what} name must not be empty"));
        } else if let Some(first) = first.filter(|&f| f != index) {
            self.error(path, format!("duplicate {what} name `{name}`: already used by {what} {}", first + 1));
        }
    }

    /// The expressions of a flavor's or a rule's selector at `path`.
    fn selector(&mut self, path: &str, selector: Option<&[MatchExpression]>) {
        for (j, e) in selector.unwrap_or_default().iter().enumerate() {
            if is_blank(&e.key) {
                self.error(format!("{path}[{j}].key"), "must not be empty");
            }
            let values = e.values.as_deref().unwrap_or_default();
            let op = e.operator.as_str();
            if e.operator.takes_values() && values.is_empty() {
                self.error(format!("{path}[{j}].values"), format!("operator `{op}` needs at least one value"));
            } else if !e.operator.takes_values() && !values.is_empty() {
                self.error(
                    format!("{path}[{j}].values"),
                    format!("operator `{op}` takes no values, but has [{}]", values.join(", ")),
                );
            }
        }
    }

    /// A quota-like number at `path`: finite, not negative, at most 3 decimals. The message
    /// is said of the field, which the problem's place names ("cpu quota must not be negative").
    fn quantity(&mut self, path: String, value: Option<f64>) {
        let Some(x) = value else { return };
        if !x.is_finite() {
            self.error(path, format!("must be a finite number, not {}", number(x)));
        } else if x < 0.0 {
            self.error(path, format!("must not be negative, but is {}", number(x)));
        } else if !has_at_most_3_decimals(x) {
            self.error(path, format!("allows at most 3 decimal places, but is {}", number(x)));
        }
    }

    /// One of a fixed set of policy names (`accepted`) at `path`, when given.
    fn one_of(&mut self, path: String, value: Option<&str>, accepted: &[&str]) {
        if let Some(v) = value.filter(|v| !accepted.contains(v)) {
            self.error(path, format!("must be one of {}, not `{v}`", accepted.join(", ")));
        }
    }
}

/// Index of the first occurrence of each name.
fn first_indices<'a>(names: impl Iterator<Item = &'a str>) -> HashMap<&'a str, usize> {
    let mut out = HashMap::new();
    for (i, name) in names.enumerate() {
        out.entry(name).or_insert(i);
    }
    out
}

/// Paths (as in a [`Problem`]) of the strings and map keys under `value` that hold a NUL.
fn nul_paths(value: &serde_json::Value, path: String, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(s) if s.contains('\0') => out.push(path),
        serde_json::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                nul_paths(item, format!("{path}[{i}]"), out);
            }
        }
        serde_json::Value::Object(map) => {
            for (key, item) in map {
                let mut child = path.clone();
                super::parse::push_key(&mut child, &key.replace('\0', "\\0"));
                if key.contains('\0') {
                    out.push(child.clone());
                }
                nul_paths(item, child, out);
            }
        }
        _ => {}
    }
}

fn is_blank(s: &str) -> bool {
    s.trim().is_empty()
}

/// Whether `x` (finite) has at most 3 decimal places, as written: `0.1 + 0.2` passes. The
/// tolerance is a few ulps of `x * 1000`, which is how far binary rounding can move it.
pub(crate) fn has_at_most_3_decimals(x: f64) -> bool {
    let scaled = x * 1000.0;
    (scaled - scaled.round()).abs() <= 1e-7 + scaled.abs() * 2.0 * f64::EPSILON
}

/// A number as a person writes it: `64`, `0.5`, `1e300`, `inf`.
pub(crate) fn number(x: f64) -> String {
    if x == 0.0 || (1e-6..1e15).contains(&x.abs()) || !x.is_finite() {
        format!("{x}")
    } else {
        format!("{x:?}")
    }
}

/// `names` as `a, b, c`, or `none` when empty.
fn list(names: impl IntoIterator<Item = impl AsRef<str>>) -> String {
    let names: Vec<String> = names.into_iter().map(|n| format!("`{}`", n.as_ref())).collect();
    match names.is_empty() {
        true => "none".into(),
        false => names.join(", "),
    }
}
