//! The draft being edited: one signal holding the whole config, validated by a memo on
//! every change with the server's own validator (compiled to wasm, no request), and the
//! problems indexed by field path so each field finds its own.

use std::collections::{BTreeMap, HashMap};

use leptos::prelude::*;

use crate::config::{
    validate, FlavorQuota, MatchExpression, Problem, Report, ResourceFlavor, ResourceGroup, ResourceQueue, SchedulerConfig,
    SchedulingRule,
};

/// The problems of a report by exact path, grouped by the item (flavor, queue, rule) they
/// are in, so each item's fields can watch only their item's problems.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProblemIndex(HashMap<String, HashMap<String, Vec<Problem>>>);

/// The item a path is in: `resource_queues[3]` for `resource_queues[3].name`, else the path.
fn item_of(path: &str) -> &str {
    match path.find(']') {
        Some(end) => &path[..=end],
        None => path,
    }
}

impl ProblemIndex {
    fn new(report: &Report) -> Self {
        let mut map: HashMap<String, HashMap<String, Vec<Problem>>> = HashMap::new();
        for p in &report.problems {
            map.entry(item_of(&p.path).to_string()).or_default().entry(p.path.clone()).or_default().push(p.clone());
        }
        ProblemIndex(map)
    }

    /// The problems at exactly `path`.
    pub fn at(&self, path: &str) -> &[Problem] {
        self.0.get(item_of(path)).and_then(|m| m.get(path)).map(Vec::as_slice).unwrap_or_default()
    }

    /// Only the problems inside `item` (e.g. `resource_queues[3]`).
    pub fn scope(&self, item: &str) -> ProblemIndex {
        ProblemIndex(self.0.get(item).map(|m| HashMap::from([(item.to_string(), m.clone())])).unwrap_or_default())
    }
}

/// The problems of one item, provided as context by its card: its fields subscribe to this
/// instead of the whole index, so a keystroke wakes the fields of one item, not of all.
#[derive(Clone, Copy)]
pub struct ProblemScope(pub ReadSignal<ProblemIndex>);

impl ProblemScope {
    /// Provides the scope of `item` to the component being built.
    pub fn provide(draft: Draft, item: String) {
        provide_context(ProblemScope(slice(draft.problems, move |ix| ix.scope(&item))));
    }

    /// The nearest scope, or the whole index outside any item.
    pub fn current(draft: Draft) -> Signal<ProblemIndex> {
        use_context::<ProblemScope>().map_or(draft.problems.into(), |s| s.0.into())
    }
}

/// The part `f` of `source`, as a signal that is set only when that part changes.
///
/// A `Memo` would do the same work, but a memo wakes every effect below it to re-check on
/// each change of its source; with a hundred fields per queue and hundreds of queues, one
/// keystroke would then poll tens of thousands of effects. Here only this one effect runs
/// and the fields of the one item that changed.
pub fn slice<S, T>(
    source: impl With<Value = S> + WithUntracked<Value = S> + Copy + Send + Sync + 'static,
    f: impl Fn(&S) -> T + Send + Sync + 'static,
) -> ReadSignal<T>
where
    S: 'static,
    T: Clone + PartialEq + Send + Sync + 'static,
{
    let part = RwSignal::new(source.with_untracked(&f));
    Effect::new(move |_| {
        let now = source.with(&f);
        if part.with_untracked(|old| *old != now) {
            part.set(now);
        }
    });
    part.read_only()
}

/// The editor's state, shared as context by every field (all parts are `Copy` signals).
#[derive(Clone, Copy)]
pub struct Draft {
    pub config: RwSignal<SchedulerConfig>,
    /// The active version the draft started from: sent as `expected_active_version`.
    pub base: RwSignal<i64>,
    /// Field ids whose text does not parse (e.g. `abc` as a quota), with the reason. They
    /// block Apply like validation errors, since the config cannot hold them.
    pub unparsed: RwSignal<BTreeMap<String, String>>,
    /// What the server's nodes say of the draft (flavors selecting no node, quotas above
    /// what the nodes have), as last fetched; see `Editor::check_capacity`.
    pub capacity: RwSignal<Vec<Problem>>,
    /// The browser's own checks plus `capacity`.
    pub report: Memo<Report>,
    pub problems: Memo<ProblemIndex>,
    /// The names of the flavors and queues, for the selects that pick one: a select
    /// re-renders only when these change, not on every keystroke elsewhere.
    pub flavor_names: Memo<Vec<String>>,
    pub queue_names: Memo<Vec<String>>,
}

impl Draft {
    /// A draft of `config`, based on version `base`.
    pub fn new(config: SchedulerConfig, base: i64) -> Self {
        let config = RwSignal::new(config);
        let capacity = RwSignal::new(Vec::new());
        let report = Memo::new(move |_| {
            let mut report = config.with(validate);
            report.problems.extend(capacity.get());
            report
        });
        Draft {
            config,
            capacity,
            base: RwSignal::new(base),
            unparsed: RwSignal::new(BTreeMap::new()),
            report,
            problems: Memo::new(move |_| report.with(ProblemIndex::new)),
            flavor_names: Memo::new(move |_| config.with(|c| c.flavors().iter().map(|f| f.name.clone()).collect())),
            queue_names: Memo::new(move |_| config.with(|c| c.queues().iter().map(|q| q.name.clone()).collect())),
        }
    }

    /// A form edit: applies `f`, then drops lists and policies the edit left empty.
    pub fn edit(&self, f: impl FnOnce(&mut SchedulerConfig)) {
        self.config.update(|c| {
            f(c);
            tidy(c);
        });
    }

    /// Marks field `id` as holding text that does not parse, or clears it (`None`).
    pub fn set_unparsed(&self, id: &str, reason: Option<String>) {
        let known = self.unparsed.with_untracked(|u| u.get(id).cloned());
        if known == reason {
            return;
        }
        self.unparsed.update(|u| match reason {
            Some(r) => {
                u.insert(id.to_string(), r);
            }
            None => {
                u.remove(id);
            }
        });
    }

    /// Errors that block Apply: the validator's plus fields that do not parse.
    pub fn blocking(&self) -> usize {
        self.report.with(|r| r.errors().count()) + self.unparsed.with(BTreeMap::len)
    }
}

/// Options for a select of `names`, plus `current` when it is not one of them (so the
/// validator's error about it has something to point at).
pub fn name_options(names: &[String], current: &str, missing: &str) -> Vec<(String, String)> {
    let mut opts: Vec<(String, String)> = names.iter().map(|n| (n.clone(), n.clone())).collect();
    if !names.iter().any(|n| n == current) {
        let text = if current.is_empty() { missing.to_string() } else { format!("{current} (not defined)") };
        opts.insert(0, (current.to_string(), text));
    }
    opts
}

/// Empty selectors, quota lists and policies mean the same as absent ones; the form writes
/// them as absent so its YAML stays minimal.
fn tidy(c: &mut SchedulerConfig) {
    fn none_if_empty<T>(v: &mut Option<Vec<T>>) {
        if v.as_ref().is_some_and(Vec::is_empty) {
            *v = None;
        }
    }
    for f in c.resource_flavors.iter_mut().flatten() {
        none_if_empty(&mut f.selector);
    }
    for q in c.resource_queues.iter_mut().flatten() {
        if q.preemption.as_ref().is_some_and(|p| *p == Default::default()) {
            q.preemption = None;
        }
        for g in q.resource_groups.iter_mut().flatten() {
            for fq in &mut g.flavors {
                none_if_empty(&mut fq.resources);
            }
        }
    }
    for r in c.scheduling_rules.iter_mut().flatten() {
        none_if_empty(&mut r.selector);
        if r.priority_policy.as_ref().is_some_and(|p| *p == Default::default()) {
            r.priority_policy = None;
        }
    }
}

/// The flavors, created when absent.
pub fn flavors_mut(c: &mut SchedulerConfig) -> &mut Vec<ResourceFlavor> {
    c.resource_flavors.get_or_insert_with(Vec::new)
}

/// The queues, created when absent.
pub fn queues_mut(c: &mut SchedulerConfig) -> &mut Vec<ResourceQueue> {
    c.resource_queues.get_or_insert_with(Vec::new)
}

/// The rules, created when absent.
pub fn rules_mut(c: &mut SchedulerConfig) -> &mut Vec<SchedulingRule> {
    c.scheduling_rules.get_or_insert_with(Vec::new)
}

/// Group `g` of queue `q`, if both exist.
pub fn group_mut(c: &mut SchedulerConfig, q: usize, g: usize) -> Option<&mut ResourceGroup> {
    queues_mut(c).get_mut(q)?.resource_groups.as_mut()?.get_mut(g)
}

/// Flavor quota `f` of group `g` of queue `q`, if it exists.
pub fn flavor_quota_mut(c: &mut SchedulerConfig, q: usize, g: usize, f: usize) -> Option<&mut FlavorQuota> {
    group_mut(c, q, g)?.flavors.get_mut(f)
}

/// A structural edit of an ordered list: the same four buttons on every item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListOp {
    Up(usize),
    Down(usize),
    Duplicate(usize),
    Remove(usize),
}

impl ListOp {
    /// Applies the edit; out-of-range indices (a stale click) do nothing.
    pub fn apply<T: Clone>(self, list: &mut Vec<T>) {
        match self {
            ListOp::Up(i) if i > 0 && i < list.len() => list.swap(i - 1, i),
            ListOp::Down(i) if i + 1 < list.len() => list.swap(i, i + 1),
            ListOp::Duplicate(i) if i < list.len() => list.insert(i + 1, list[i].clone()),
            ListOp::Remove(i) if i < list.len() => {
                list.remove(i);
            }
            _ => {}
        }
    }

    /// Like [`apply`](Self::apply) for items with unique names: a duplicate is renamed
    /// `name-copy` (or `name-copy-2`, …) so it is not an error at once.
    pub fn apply_named<T: Clone>(self, list: &mut Vec<T>, name: fn(&mut T) -> &mut String) {
        self.apply(list);
        if let ListOp::Duplicate(i) = self {
            if i + 1 < list.len() {
                let base = format!("{}-copy", name(&mut list[i]));
                let taken: Vec<String> = list.iter_mut().map(|x| name(x).clone()).collect();
                *name(&mut list[i + 1]) = unique_name(&base, taken.iter().map(String::as_str));
            }
        }
    }

    /// The index the item acted on has afterwards (where focus should go).
    pub fn target(self) -> usize {
        match self {
            ListOp::Up(i) => i.saturating_sub(1),
            ListOp::Down(i) | ListOp::Duplicate(i) => i + 1,
            ListOp::Remove(i) => i,
        }
    }
}

/// `base` if no name in `taken` equals it, else `base-2`, `base-3`, …
pub fn unique_name<'a>(base: &str, taken: impl Iterator<Item = &'a str> + Clone) -> String {
    let free = |n: &str| !taken.clone().any(|t| t == n);
    if free(base) {
        return base.to_string();
    }
    (2..).map(|k| format!("{base}-{k}")).find(|n| free(n)).expect("some suffix is free")
}

/// One edit of a selector (a flavor's or a rule's): rows of key / operator / values.
#[derive(Debug, Clone, PartialEq)]
pub enum SelectorEdit {
    Add,
    Remove(usize),
    Key(usize, String),
    Operator(usize, crate::config::Operator),
    Values(usize, Vec<String>),
}

impl SelectorEdit {
    /// Applies the edit to a selector (created when absent).
    pub fn apply(self, selector: &mut Option<Vec<MatchExpression>>) {
        let rows = selector.get_or_insert_with(Vec::new);
        match self {
            SelectorEdit::Add => rows.push(MatchExpression {
                key: String::new(),
                operator: crate::config::Operator::In,
                values: None,
            }),
            SelectorEdit::Remove(j) if j < rows.len() => {
                rows.remove(j);
            }
            SelectorEdit::Key(j, key) => {
                if let Some(r) = rows.get_mut(j) {
                    r.key = key;
                }
            }
            SelectorEdit::Operator(j, op) => {
                if let Some(r) = rows.get_mut(j) {
                    r.operator = op;
                }
            }
            SelectorEdit::Values(j, values) => {
                if let Some(r) = rows.get_mut(j) {
                    r.values = (!values.is_empty()).then_some(values);
                }
            }
            SelectorEdit::Remove(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_ops_move_copy_and_remove_and_ignore_stale_indices() {
        let mut v = vec![1, 2, 3];
        ListOp::Up(2).apply(&mut v);
        assert_eq!(v, [1, 3, 2]);
        ListOp::Down(0).apply(&mut v);
        assert_eq!(v, [3, 1, 2]);
        ListOp::Duplicate(1).apply(&mut v);
        assert_eq!(v, [3, 1, 1, 2]);
        ListOp::Remove(0).apply(&mut v);
        assert_eq!(v, [1, 1, 2]);
        for stale in [ListOp::Up(0), ListOp::Down(2), ListOp::Remove(9), ListOp::Duplicate(3)] {
            stale.apply(&mut v);
        }
        assert_eq!(v, [1, 1, 2]);
    }

    #[test]
    fn a_duplicate_of_a_named_item_gets_a_free_name() {
        let mut names = vec!["spot".to_string(), "spot-copy".to_string()];
        ListOp::Duplicate(0).apply_named(&mut names, |n| n);
        assert_eq!(names, ["spot", "spot-copy-2", "spot-copy"]);
    }

    #[test]
    fn problems_are_found_by_path_and_by_item() {
        let report = Report {
            problems: vec![
                Problem::error("resource_queues[1].name", "a"),
                Problem::error("resource_queues[1].resource_groups[0].flavors", "b"),
                Problem::warning("resource_queues[10]", "c"),
                Problem::warning("scheduling_rules", "d"),
            ],
        };
        let ix = ProblemIndex::new(&report);
        assert_eq!(ix.at("resource_queues[1].name")[0].message, "a");
        assert_eq!(ix.at("scheduling_rules")[0].message, "d");
        let one = ix.scope("resource_queues[1]");
        assert_eq!(one.at("resource_queues[1].resource_groups[0].flavors")[0].message, "b");
        assert!(one.at("resource_queues[10]").is_empty());
    }

    #[test]
    fn unique_names_get_a_suffix() {
        let taken = ["spot", "spot-2"];
        assert_eq!(unique_name("gpu", taken.iter().copied()), "gpu");
        assert_eq!(unique_name("spot", taken.iter().copied()), "spot-3");
    }

    #[test]
    fn tidy_writes_empty_things_as_absent() {
        let mut c = SchedulerConfig::initial();
        rules_mut(&mut c)[0].selector = Some(vec![]);
        rules_mut(&mut c)[0].priority_policy = Some(Default::default());
        tidy(&mut c);
        assert_eq!(c, SchedulerConfig::initial());
    }
}
