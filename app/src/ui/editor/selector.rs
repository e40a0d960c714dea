//! Selector rows (key / operator / values), shared by flavors and rules.

use leptos::prelude::*;

use super::draft::SelectorEdit;
use super::fields::{codec, field_id, FieldProblems, ParsedField, SelectField, TextField};
use crate::config::{MatchExpression, Operator};

const OPERATORS: [Operator; 4] = [Operator::In, Operator::NotIn, Operator::Exists, Operator::DoesNotExist];

/// The selector at `path`; an empty one matches everything.
#[component]
pub fn SelectorEditor(
    path: String,
    /// Who the selector belongs to, for labels: "flavor 1", "rule 2".
    owner: String,
    #[prop(into)] rows: Signal<Vec<MatchExpression>>,
    on_edit: Callback<SelectorEdit>,
    /// What an empty selector means for this owner.
    empty_text: &'static str,
) -> impl IntoView {
    let len = Memo::new(move |_| rows.with(Vec::len));
    let add_id = format!("{}-add", field_id(&path));
    let list_path = path.clone();
    let owner_label = owner.clone();
    view! {
        <fieldset class="selector">
            <legend>"Selector"</legend>
            <FieldProblems path=path.clone() id=format!("{}-problems", field_id(&path))/>
            <Show when=move || len.get() == 0>
                <p class="field-hint">{empty_text}</p>
            </Show>
            <For each=move || 0..len.get() key=|j| *j children=move |j| {
                let row = Memo::new(move |_| rows.with(|r| r.get(j).cloned()));
                let at = format!("{list_path}[{j}]");
                let key = Signal::derive(move || row.with(|r| r.as_ref().map(|r| r.key.clone()).unwrap_or_default()));
                let op = Signal::derive(move || row.with(|r| r.as_ref().map_or("in", |r| r.operator.as_str()).to_string()));
                let values = Signal::derive(move || row.with(|r| r.as_ref().and_then(|r| r.values.clone()).unwrap_or_default()));
                let shows_values = move || row.with(|r| r.as_ref().is_some_and(|r| r.operator.takes_values() || r.values.is_some()));
                let options = Signal::derive(|| OPERATORS.iter().map(|o| (o.as_str().to_string(), o.as_str().replace('_', " "))).collect::<Vec<_>>());
                let n = j + 1;
                let values_path = format!("{at}.values");
                let values_label = format!("Values, row {n}");
                view! {
                    <div class="selector-row" data-testid="selector-row">
                        <TextField label=format!("Key, row {n}") path=format!("{at}.key") value=key placeholder="label key"
                            on_input=Callback::new(move |k| on_edit.run(SelectorEdit::Key(j, k)))/>
                        <SelectField label=format!("Operator, row {n}") path=format!("{at}.operator") options value=op
                            on_change=Callback::new(move |o: String| {
                                if let Some(op) = OPERATORS.into_iter().find(|x| x.as_str() == o) {
                                    on_edit.run(SelectorEdit::Operator(j, op));
                                }
                            })/>
                        <Show when=shows_values fallback=|| view! { <div class="field placeholder" aria-hidden="true"></div> }>
                            <ParsedField label=values_label.clone() path=values_path.clone() value=values codec=codec::LIST
                                placeholder="a, b"
                                on_change=Callback::new(move |v| on_edit.run(SelectorEdit::Values(j, v)))/>
                        </Show>
                        <button type="button" class="small danger row-remove" aria-label=format!("Remove selector row {n} of {}", owner_label.clone())
                            on:click=move |_| on_edit.run(SelectorEdit::Remove(j))>"Remove"</button>
                    </div>
                }
            }/>
            <button type="button" class="small" id=add_id aria-label=format!("Add a selector row to {owner}")
                on:click=move |_| on_edit.run(SelectorEdit::Add)>"+ Selector row"</button>
        </fieldset>
    }
}
