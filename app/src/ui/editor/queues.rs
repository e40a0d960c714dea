//! The `resource_queues` section: preemption, the cohort (its name, reclaim and borrow
//! policies, Berth's fair-sharing weight), resource groups (covered resources, flavors in
//! order of preference, a nominal quota per flavor and covered resource, and in a cohort the
//! lending and borrowing limits).

use leptos::prelude::*;

use super::draft::{slice, ProblemScope, flavor_quota_mut, group_mut, name_options, queues_mut, unique_name, Draft, ListOp};
use super::fields::{codec, focus_later, EditorSection, FieldProblems, ItemActions, ParsedField, SelectField, TextField};
use crate::config::{
    CohortPreemption, FlavorQuota, PreemptionPolicy, ResourceGroup, ResourceQueue, ResourceQuotaSpec, WithinQueuePreemption,
};

/// Every queue, in order, with an add button.
#[component]
pub fn QueuesSection() -> impl IntoView {
    let draft = expect_context::<Draft>();
    let len = Memo::new(move |_| draft.config.with(|c| c.queues().len()));
    let add = Callback::new(move |()| {
        let at = len.get_untracked();
        draft.edit(|c| {
            let name = unique_name("queue", c.queues().iter().map(|q| q.name.as_str()));
            queues_mut(c).push(ResourceQueue { name, ..Default::default() });
        });
        focus_later(format!("f-resource_queues-{at}-name"));
    });
    view! {
        <EditorSection id="queue" title="Resource queues" len add_label="+ Add queue" on_add=add
            hint="Quotas per flavor and resource. Empty quota = unlimited, 0 = blocked.">
            <For each=move || 0..len.get() key=|i| *i children=move |i| view! { <QueueCard i len/> }/>
        </EditorSection>
    }
}

fn preemption_text(p: Option<WithinQueuePreemption>) -> &'static str {
    match p {
        None => "",
        Some(WithinQueuePreemption::Never) => "never",
        Some(WithinQueuePreemption::LowerPriority) => "lower_priority",
    }
}

fn cohort_policy(v: &str) -> Option<CohortPreemption> {
    match v {
        "never" => Some(CohortPreemption::Never),
        "lower_priority" => Some(CohortPreemption::LowerPriority),
        "any" => Some(CohortPreemption::Any),
        _ => None,
    }
}

/// Select options from (value, text) pairs.
fn options(pairs: &'static [(&'static str, &'static str)]) -> Signal<Vec<(String, String)>> {
    Signal::derive(move || pairs.iter().map(|(v, t)| (v.to_string(), t.to_string())).collect())
}

#[component]
fn QueueCard(i: usize, len: Memo<usize>) -> impl IntoView {
    let draft = expect_context::<Draft>();
    ProblemScope::provide(draft, format!("resource_queues[{i}]"));
    let queue = slice(draft.config, move |c| c.queues().get(i).cloned());
    let path = format!("resource_queues[{i}]");
    let name = Signal::derive(move || queue.with(|q| q.as_ref().map(|q| q.name.clone()).unwrap_or_default()));
    let preemption = Signal::derive(move || {
        queue.with(|q| preemption_text(q.as_ref().and_then(|q| q.preemption.as_ref()?.within_resource_queue)).to_string())
    });
    let groups = Memo::new(move |_| queue.with(|q| q.as_ref().and_then(|q| q.resource_groups.as_ref()).map_or(0, Vec::len)));
    let edit = move |f: Box<dyn FnOnce(&mut ResourceQueue)>| {
        draft.edit(|c| {
            if let Some(q) = queues_mut(c).get_mut(i) {
                f(q)
            }
        })
    };
    let on_op = Callback::new(move |op: ListOp| draft.edit(|c| op.apply_named(queues_mut(c), |q| &mut q.name)));
    let set_preemption = Callback::new(move |v: String| {
        let within = match v.as_str() {
            "never" => Some(WithinQueuePreemption::Never),
            "lower_priority" => Some(WithinQueuePreemption::LowerPriority),
            _ => None,
        };
        edit(Box::new(move |q| q.preemption.get_or_insert_with(PreemptionPolicy::default).within_resource_queue = within));
    });
    let preemption_options = options(&[("", "not set (never)"), ("never", "never"), ("lower_priority", "lower priority jobs")]);
    let cohort = Signal::derive(move || queue.with(|q| q.as_ref().and_then(|q| q.cohort_name.clone()).unwrap_or_default()));
    let in_cohort = Signal::derive(move || queue.with(|q| q.as_ref().is_some_and(|q| q.cohort_name.is_some())));
    let set_cohort = Callback::new(move |v: String| edit(Box::new(move |q| q.cohort_name = (!v.is_empty()).then_some(v))));
    let policy = move |f: fn(&PreemptionPolicy) -> Option<CohortPreemption>| {
        Signal::derive(move || queue.with(|q| q.as_ref().and_then(|q| f(q.preemption.as_ref()?)).map_or("", CohortPreemption::as_str).to_string()))
    };
    let reclaim = policy(|p| p.reclaim_within_cohort);
    let borrow = policy(|p| p.borrow_within_cohort);
    let set_reclaim = Callback::new(move |v: String| {
        edit(Box::new(move |q| q.preemption.get_or_insert_with(PreemptionPolicy::default).reclaim_within_cohort = cohort_policy(&v)))
    });
    let set_borrow = Callback::new(move |v: String| {
        edit(Box::new(move |q| q.preemption.get_or_insert_with(PreemptionPolicy::default).borrow_within_cohort = cohort_policy(&v)))
    });
    let reclaim_options = options(&[
        ("", "not set (never)"),
        ("never", "never: wait for borrowers to finish"),
        ("lower_priority", "lower-priority borrowers"),
        ("any", "any borrower"),
    ]);
    let borrow_options = options(&[("", "not set (never)"), ("never", "never: only idle quota"), ("lower_priority", "preempt lower-priority borrowers")]);
    let weight = Signal::derive(move || queue.with(|q| q.as_ref().and_then(|q| q.fair_sharing_weight)));
    let set_weight = Callback::new(move |v: Option<f64>| edit(Box::new(move |q| q.fair_sharing_weight = v)));
    let add_group = move |_| {
        let g = groups.get_untracked();
        draft.edit(|c| {
            if let Some(q) = queues_mut(c).get_mut(i) {
                q.resource_groups.get_or_insert_with(Vec::new).push(ResourceGroup {
                    covered_resources: vec!["cpu".into(), "gpu".into(), "memory_gb".into()],
                    flavors: Vec::new(),
                });
            }
        });
        focus_later(format!("f-resource_queues-{i}-resource_groups-{g}-covered_resources"));
    };
    let noun = format!("queue {}", i + 1);
    view! {
        <article class="item" data-testid="queue" aria-label=noun.clone()>
            <header class="item-head">
                <h3><span class="item-index">{i + 1}</span>{move || name.get()}</h3>
                <ItemActions noun=noun.clone() id_prefix="queue".into() i len on_op/>
            </header>
            <FieldProblems path=path.clone() id=format!("f-{i}-queue-problems")/>
            <div class="field-grid">
                <TextField label="Name".into() path=format!("{path}.name") value=name placeholder="e.g. research"
                    on_input=Callback::new(move |v| edit(Box::new(move |q| q.name = v)))/>
                <SelectField label="Preempt within the queue".into() path=format!("{path}.preemption.within_resource_queue")
                    options=preemption_options value=preemption on_change=set_preemption/>
            </div>
            <fieldset class="cohort" data-testid="cohort-fields">
                <legend>"Cohort"</legend>
                <p class="hint">"Queues sharing a cohort lend each other their unused nominal quota."</p>
                <div class="field-grid">
                    <TextField label="Cohort name".into() path=format!("{path}.cohort_name") value=cohort placeholder="none (no borrowing)"
                        on_input=set_cohort/>
                    <SelectField label="Reclaim lent quota".into() path=format!("{path}.preemption.reclaim_within_cohort")
                        options=reclaim_options value=reclaim on_change=set_reclaim/>
                    <SelectField label="Preempt to borrow".into() path=format!("{path}.preemption.borrow_within_cohort")
                        options=borrow_options value=borrow on_change=set_borrow/>
                    <ParsedField label="Fair-sharing weight (Berth extension)".into() path=format!("{path}.fair_sharing_weight")
                        value=weight codec=codec::QUOTA numeric=true placeholder="off"
                        hint="Borrowers of a cohort share idle quota by weight once any member sets one." on_change=set_weight/>
                </div>
            </fieldset>
            <For each=move || 0..groups.get() key=|g| *g children=move |g| view! { <GroupEditor q=i g queue in_cohort/> }/>
            <button type="button" class="small" data-testid="add-group" on:click=add_group>"+ Resource group"</button>
        </article>
    }
}

#[component]
fn GroupEditor(q: usize, g: usize, queue: ReadSignal<Option<ResourceQueue>>, in_cohort: Signal<bool>) -> impl IntoView {
    let draft = expect_context::<Draft>();
    // Derived from the queue's memo, not the whole config: a keystroke elsewhere wakes one
    // memo per item, not one per group and quota row.
    let group = Memo::new(move |_| queue.with(|x| x.as_ref()?.resource_groups.as_ref()?.get(g).cloned()));
    let path = format!("resource_queues[{q}].resource_groups[{g}]");
    let covered = Memo::new(move |_| group.with(|gr| gr.as_ref().map(|gr| gr.covered_resources.clone()).unwrap_or_default()));
    let rows = Memo::new(move |_| group.with(|gr| gr.as_ref().map_or(0, |gr| gr.flavors.len())));
    let edit = move |f: Box<dyn FnOnce(&mut ResourceGroup)>| {
        draft.edit(|c| {
            if let Some(gr) = group_mut(c, q, g) {
                f(gr)
            }
        })
    };
    let add_flavor = move |_| {
        let at = rows.get_untracked();
        draft.edit(|c| {
            let used: Vec<String> = c.queues().get(q).into_iter()
                .flat_map(|q| q.resource_groups.iter().flatten())
                .flat_map(|gr| gr.flavors.iter().map(|f| f.name.clone()))
                .collect();
            let name = c.flavors().iter().map(|f| f.name.clone()).find(|n| !used.contains(n)).unwrap_or_default();
            if let Some(gr) = group_mut(c, q, g) {
                gr.flavors.push(FlavorQuota { name, resources: None });
            }
        });
        focus_later(format!("f-resource_queues-{q}-resource_groups-{g}-flavors-{at}-name"));
    };
    let remove_group = move |_| {
        draft.edit(|c| {
            if let Some(groups) = queues_mut(c).get_mut(q).and_then(|q| q.resource_groups.as_mut()) {
                ListOp::Remove(g).apply(groups);
            }
        })
    };
    let label = format!("Resource group {} of queue {}", g + 1, q + 1);
    view! {
        <fieldset class="group" data-testid="group">
            <legend>{format!("Resource group {}", g + 1)}</legend>
            <div class="field-grid">
                <ParsedField label="Covered resources".into() path=format!("{path}.covered_resources") value=covered
                    codec=codec::LIST placeholder="cpu, gpu, memory_gb" hint="Comma-separated resource names."
                    on_change=Callback::new(move |v| edit(Box::new(move |gr| gr.covered_resources = v)))/>
            </div>
            <FieldProblems path=format!("{path}.flavors") id=format!("f-{q}-{g}-flavors-problems")/>
            <p class="subhead">"Flavors, in order of preference"</p>
            <ol class="quota-rows">
                <For each=move || 0..rows.get() key=|f| *f children=move |f| view! { <QuotaRow q g f rows covered group in_cohort/> }/>
            </ol>
            <div class="row-buttons">
                <button type="button" class="small" data-testid="add-quota" on:click=add_flavor>"+ Flavor"</button>
                <button type="button" class="small danger" aria-label=format!("Remove {label}") on:click=remove_group>"Remove group"</button>
            </div>
        </fieldset>
    }
}

/// One flavor of a group: which flavor, then a quota for every covered resource (and, in a
/// cohort, or when set, its lending and borrowing limits).
#[component]
fn QuotaRow(
    q: usize,
    g: usize,
    f: usize,
    rows: Memo<usize>,
    covered: Memo<Vec<String>>,
    group: Memo<Option<ResourceGroup>>,
    in_cohort: Signal<bool>,
) -> impl IntoView {
    let draft = expect_context::<Draft>();
    let fq = Memo::new(move |_| group.with(|x| x.as_ref()?.flavors.get(f).cloned()));
    let path = format!("resource_queues[{q}].resource_groups[{g}].flavors[{f}]");
    let name = Signal::derive(move || fq.with(|x| x.as_ref().map(|x| x.name.clone()).unwrap_or_default()));
    let options = Memo::new(move |_| draft.flavor_names.with(|names| name_options(names, &name.get(), "choose a flavor")));
    let edit = move |e: Box<dyn FnOnce(&mut FlavorQuota)>| {
        draft.edit(|c| {
            if let Some(x) = flavor_quota_mut(c, q, g, f) {
                e(x)
            }
        })
    };
    let on_op = Callback::new(move |op: ListOp| {
        draft.edit(|c| {
            if let Some(gr) = group_mut(c, q, g) {
                op.apply(&mut gr.flavors)
            }
        })
    });
    let noun = format!("flavor {} of group {} in queue {}", f + 1, g + 1, q + 1);
    let resources_path = path.clone();
    // Limits show in a cohort, and wherever one is set (so the validator's error can be fixed).
    let limits_shown = Signal::derive(move || {
        in_cohort.get() || fq.with(|x| x.as_ref().and_then(|x| x.resources.as_ref()).is_some_and(|rs| rs.iter().any(|s| s.lending_limit.is_some() || s.borrowing_limit.is_some())))
    });
    view! {
        <li class="quota-row" data-testid="quota-row">
            <div class="quota-fields">
                <SelectField label=format!("Flavor {}", f + 1) path=format!("{path}.name") options value=name
                    on_change=Callback::new(move |v| edit(Box::new(move |x| x.name = v)))/>
                <For each=move || covered.get() key=|r| r.clone() children=move |resource: String| {
                    let resources_path = resources_path.clone();
                    let field = move |which: Limit| {
                        let res = resource.clone();
                        let index = Memo::new(move |_| fq.with(|x| x.as_ref()?.resources.as_ref()?.iter().position(|s| s.name == res)));
                        let res = resource.clone();
                        let value = Signal::derive(move || fq.with(|x| which.get(x.as_ref()?.resources.as_ref()?.iter().find(|s| s.name == res)?)));
                        let base = resources_path.clone();
                        // The validator names a quota by its index in `resources`; a quota not
                        // yet written has none, so its problems cannot exist yet either.
                        let at = move || match index.get() {
                            Some(r) => format!("{base}.resources[{r}].{}", which.field()),
                            None => format!("{base}.resources[-].{}", which.field()),
                        };
                        let res = resource.clone();
                        let set = Callback::new(move |v: Option<f64>| {
                            let (res, order) = (res.clone(), covered.get_untracked());
                            edit(Box::new(move |x| set_spec(x, &res, which, v, &order)))
                        });
                        view! {
                            <ParsedField label=which.label(&resource) path=format!("{resources_path}.{}.{resource}", which.key())
                                problems_at=Signal::derive(at) value codec=codec::QUOTA numeric=true
                                placeholder=which.placeholder() on_change=set/>
                        }
                    };
                    let limits = field.clone();
                    view! {
                        {field(Limit::Nominal)}
                        <Show when=move || limits_shown.get()>
                            <div class="limits" data-testid="limits">{limits(Limit::Lending)}{limits(Limit::Borrowing)}</div>
                        </Show>
                    }
                }/>
            </div>
            <FieldProblems path=format!("{path}.resources") id=format!("f-{q}-{g}-{f}-res-problems")/>
            <ItemActions noun id_prefix=format!("quota-{q}-{g}") i=f len=rows on_op no_duplicate=true/>
        </li>
    }
}

/// Which number of a quota a field edits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Limit {
    Nominal,
    Lending,
    Borrowing,
}

impl Limit {
    fn get(self, s: &ResourceQuotaSpec) -> Option<f64> {
        match self {
            Limit::Nominal => s.nominal_quota,
            Limit::Lending => s.lending_limit,
            Limit::Borrowing => s.borrowing_limit,
        }
    }

    fn slot(self, s: &mut ResourceQuotaSpec) -> &mut Option<f64> {
        match self {
            Limit::Nominal => &mut s.nominal_quota,
            Limit::Lending => &mut s.lending_limit,
            Limit::Borrowing => &mut s.borrowing_limit,
        }
    }

    fn field(self) -> &'static str {
        match self {
            Limit::Nominal => "nominal_quota",
            Limit::Lending => "lending_limit",
            Limit::Borrowing => "borrowing_limit",
        }
    }

    /// The field's id part (`quota` as before, so existing ids and tests hold).
    fn key(self) -> &'static str {
        match self {
            Limit::Nominal => "quota",
            Limit::Lending => "lending",
            Limit::Borrowing => "borrowing",
        }
    }

    fn label(self, resource: &str) -> String {
        match self {
            Limit::Nominal => format!("{resource} quota"),
            Limit::Lending => format!("{resource} lending limit"),
            Limit::Borrowing => format!("{resource} borrowing limit"),
        }
    }

    fn placeholder(self) -> &'static str {
        match self {
            Limit::Nominal => "unlimited",
            Limit::Lending => "lends all unused",
            Limit::Borrowing => "no limit",
        }
    }
}

/// Sets one number of the quota of `resource` (None = omitted: the entry goes when nothing
/// else is set on it). A new entry goes where `covered` (the group's order) puts it.
fn set_spec(fq: &mut FlavorQuota, resource: &str, which: Limit, value: Option<f64>, covered: &[String]) {
    let specs = fq.resources.get_or_insert_with(Vec::new);
    match specs.iter().position(|s| s.name == resource) {
        Some(k) => {
            *which.slot(&mut specs[k]) = value;
            let s = &specs[k];
            if s.nominal_quota.is_none() && s.borrowing_limit.is_none() && s.lending_limit.is_none() {
                specs.remove(k);
            }
        }
        None if value.is_some() => {
            let rank = |name: &str| covered.iter().position(|c| c == name).unwrap_or(usize::MAX);
            let at = specs.iter().position(|s| rank(&s.name) > rank(resource)).unwrap_or(specs.len());
            let mut spec = ResourceQuotaSpec { name: resource.to_string(), ..Default::default() };
            *which.slot(&mut spec) = value;
            specs.insert(at, spec);
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_are_written_removed_and_kept_blocked_at_zero() {
        let covered = ["cpu".to_string(), "gpu".to_string()];
        let mut fq = FlavorQuota { name: "spot".into(), resources: None };
        set_spec(&mut fq, "gpu", Limit::Nominal, Some(8.0), &covered);
        set_spec(&mut fq, "cpu", Limit::Nominal, Some(0.0), &covered);
        let names: Vec<_> = fq.resources.iter().flatten().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["cpu", "gpu"], "in the group's order, not the typing order");
        set_spec(&mut fq, "gpu", Limit::Nominal, None, &covered);
        let specs = fq.resources.clone().unwrap();
        assert_eq!(specs.len(), 1);
        assert_eq!((specs[0].name.as_str(), specs[0].nominal_quota), ("cpu", Some(0.0)));
    }

    #[test]
    fn limits_keep_an_entry_alive_and_go_with_it() {
        let covered = ["cpu".to_string()];
        let mut fq = FlavorQuota { name: "spot".into(), resources: None };
        set_spec(&mut fq, "cpu", Limit::Borrowing, Some(3.0), &covered);
        let spec = &fq.resources.as_ref().unwrap()[0];
        assert_eq!((spec.nominal_quota, spec.borrowing_limit, spec.lending_limit), (None, Some(3.0), None));
        set_spec(&mut fq, "cpu", Limit::Lending, Some(1.0), &covered);
        set_spec(&mut fq, "cpu", Limit::Borrowing, None, &covered);
        assert_eq!(fq.resources.as_ref().unwrap()[0].lending_limit, Some(1.0), "a lending limit alone keeps the entry");
        set_spec(&mut fq, "cpu", Limit::Lending, None, &covered);
        assert!(fq.resources.unwrap().is_empty());
    }
}
