//! The `scheduling_rules` section: evaluated top to bottom, the first match wins, so the
//! order is the meaning. Each rule: target queue, selector, priority policy.

use leptos::prelude::*;

use super::draft::{slice, ProblemScope, name_options, rules_mut, Draft, ListOp, SelectorEdit};
use super::fields::{codec, focus_later, EditorSection, FieldProblems, ItemActions, ParsedField, SelectField};
use super::selector::SelectorEditor;
use crate::config::{OnViolation, PriorityPolicy, SchedulingRule};

/// Every rule in evaluation order, with an add button.
#[component]
pub fn RulesSection() -> impl IntoView {
    let draft = expect_context::<Draft>();
    let len = Memo::new(move |_| draft.config.with(|c| c.rules().len()));
    let add = Callback::new(move |()| {
        let at = len.get_untracked();
        draft.edit(|c| {
            let queue = c.queues().first().map(|q| q.name.clone()).unwrap_or_else(|| "default".into());
            rules_mut(c).push(SchedulingRule { resource_queue: queue, ..Default::default() });
        });
        focus_later(format!("f-scheduling_rules-{at}-resource_queue"));
    });
    view! {
        <EditorSection id="rule" title="Scheduling rules" len add_label="+ Add rule" on_add=add
            hint="Checked top to bottom; the first rule whose selector matches a job routes it. A rule without selector matches every job.">
            <FieldProblems path="scheduling_rules".to_string() id="f-rules-problems".into()/>
            <ol class="rule-list">
                <For each=move || 0..len.get() key=|i| *i children=move |i| view! { <RuleCard i len/> }/>
            </ol>
        </EditorSection>
    }
}

fn violation_text(v: Option<OnViolation>) -> &'static str {
    match v {
        None => "",
        Some(OnViolation::Reject) => "reject",
        Some(OnViolation::ForceUpdate) => "force_update",
    }
}

#[component]
fn RuleCard(i: usize, len: Memo<usize>) -> impl IntoView {
    let draft = expect_context::<Draft>();
    ProblemScope::provide(draft, format!("scheduling_rules[{i}]"));
    let rule = slice(draft.config, move |c| c.rules().get(i).cloned());
    let path = format!("scheduling_rules[{i}]");
    let queue = Signal::derive(move || rule.with(|r| r.as_ref().map(|r| r.resource_queue.clone()).unwrap_or_default()));
    let queue_options = Memo::new(move |_| draft.queue_names.with(|names| name_options(names, &queue.get(), "choose a queue")));
    let selector = Signal::derive(move || rule.with(|r| r.as_ref().and_then(|r| r.selector.clone()).unwrap_or_default()));
    let catch_all = move || selector.with(Vec::is_empty);
    let policy = move |f: fn(&PriorityPolicy) -> Option<i64>| {
        Signal::derive(move || rule.with(|r| r.as_ref().and_then(|r| r.priority_policy.as_ref()).and_then(f)))
    };
    let violation = Signal::derive(move || {
        rule.with(|r| violation_text(r.as_ref().and_then(|r| r.priority_policy.as_ref()?.on_violation)).to_string())
    });
    let edit = move |f: Box<dyn FnOnce(&mut SchedulingRule)>| {
        draft.edit(|c| {
            if let Some(r) = rules_mut(c).get_mut(i) {
                f(r)
            }
        })
    };
    let edit_policy = move |f: Box<dyn FnOnce(&mut PriorityPolicy)>| {
        edit(Box::new(move |r| f(r.priority_policy.get_or_insert_with(PriorityPolicy::default))))
    };
    let on_op = Callback::new(move |op: ListOp| draft.edit(|c| op.apply(rules_mut(c))));
    let violation_options = Signal::derive(|| {
        [("", "not set (reject)"), ("reject", "reject the job"), ("force_update", "clamp into range")]
            .map(|(v, t)| (v.to_string(), t.to_string()))
            .to_vec()
    });
    let noun = format!("rule {}", i + 1);
    let pp = format!("{path}.priority_policy");
    view! {
        <li class="item rule" data-testid="rule" aria-label=noun.clone()>
            <header class="item-head">
                <h3><span class="item-index">{i + 1}</span>"→ " {move || queue.get()}
                    <Show when=catch_all><span class="badge">"catch-all"</span></Show></h3>
                <ItemActions noun=noun.clone() id_prefix="rule".into() i len on_op/>
            </header>
            <FieldProblems path=path.clone() id=format!("f-{i}-rule-problems")/>
            <div class="field-grid">
                <SelectField label="Target queue".into() path=format!("{path}.resource_queue") options=queue_options value=queue
                    on_change=Callback::new(move |v| edit(Box::new(move |r| r.resource_queue = v)))/>
            </div>
            <SelectorEditor path=format!("{path}.selector") owner=noun.clone() rows=selector
                empty_text="No selector: this rule matches every job that reaches it."
                on_edit=Callback::new(move |e: SelectorEdit| edit(Box::new(move |r| e.apply(&mut r.selector))))/>
            <fieldset class="policy">
                <legend>"Priority policy"</legend>
                <div class="field-grid four">
                    <ParsedField label="Default".into() path=format!("{pp}.default") value=policy(|p| p.default)
                        codec=codec::PRIORITY numeric=true placeholder="none"
                        on_change=Callback::new(move |v| edit_policy(Box::new(move |p| p.default = v)))/>
                    <ParsedField label="Min".into() path=format!("{pp}.min") value=policy(|p| p.min)
                        codec=codec::PRIORITY numeric=true placeholder="none"
                        on_change=Callback::new(move |v| edit_policy(Box::new(move |p| p.min = v)))/>
                    <ParsedField label="Max".into() path=format!("{pp}.max") value=policy(|p| p.max)
                        codec=codec::PRIORITY numeric=true placeholder="none"
                        on_change=Callback::new(move |v| edit_policy(Box::new(move |p| p.max = v)))/>
                    <SelectField label="Outside min–max".into() path=format!("{pp}.on_violation") options=violation_options value=violation
                        on_change=Callback::new(move |v: String| {
                            let v = match v.as_str() {
                                "reject" => Some(OnViolation::Reject),
                                "force_update" => Some(OnViolation::ForceUpdate),
                                _ => None,
                            };
                            edit_policy(Box::new(move |p| p.on_violation = v))
                        })/>
                </div>
            </fieldset>
        </li>
    }
}
