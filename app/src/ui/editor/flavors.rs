//! The `resource_flavors` section of the form: name, selector, advanced_instance_config.

use leptos::prelude::*;

use super::draft::{slice, ProblemScope, flavors_mut, unique_name, Draft, ListOp};
use super::fields::{focus_later, Codec, EditorSection, FieldProblems, ItemActions, ParsedField, TextField};
use super::selector::SelectorEditor;
use crate::config::ResourceFlavor;

type Map = serde_json::Map<String, serde_json::Value>;

/// `advanced_instance_config` as YAML: empty = absent, else a mapping.
const ADVANCED: Codec<Option<Map>> = Codec { parse: parse_advanced, format: format_advanced };

fn parse_advanced(s: &str) -> Result<Option<Map>, String> {
    if s.trim().is_empty() {
        return Ok(None);
    }
    match serde_norway::from_str::<serde_json::Value>(s) {
        Ok(serde_json::Value::Object(m)) => Ok(Some(m)),
        Ok(_) => Err("advanced_instance_config must be a mapping (key: value lines)".into()),
        Err(e) => Err(format!("invalid YAML: {e}")),
    }
}

fn format_advanced(m: &Option<Map>) -> String {
    m.as_ref().and_then(|m| serde_norway::to_string(m).ok()).unwrap_or_default()
}

/// Every flavor, in order, with an add button.
#[component]
pub fn FlavorsSection() -> impl IntoView {
    let draft = expect_context::<Draft>();
    let len = Memo::new(move |_| draft.config.with(|c| c.flavors().len()));
    let add = Callback::new(move |()| {
        let at = len.get_untracked();
        draft.edit(|c| {
            let name = unique_name("flavor", c.flavors().iter().map(|f| f.name.as_str()));
            flavors_mut(c).push(ResourceFlavor { name, ..Default::default() });
        });
        focus_later(format!("f-resource_flavors-{at}-name"));
    });
    view! {
        <EditorSection id="flavor" title="Resource flavors" len add_label="+ Add flavor" on_add=add
            hint="Which nodes count as what. A flavor without selector matches every node.">
            <For each=move || 0..len.get() key=|i| *i children=move |i| view! { <FlavorCard i len/> }/>
        </EditorSection>
    }
}

#[component]
fn FlavorCard(i: usize, len: Memo<usize>) -> impl IntoView {
    let draft = expect_context::<Draft>();
    ProblemScope::provide(draft, format!("resource_flavors[{i}]"));
    let flavor = slice(draft.config, move |c| c.flavors().get(i).cloned());
    let path = format!("resource_flavors[{i}]");
    let name = Signal::derive(move || flavor.with(|f| f.as_ref().map(|f| f.name.clone()).unwrap_or_default()));
    let selector = Signal::derive(move || flavor.with(|f| f.as_ref().and_then(|f| f.selector.clone()).unwrap_or_default()));
    let advanced = Signal::derive(move || flavor.with(|f| f.as_ref().and_then(|f| f.advanced_instance_config.clone())));
    let edit = move |f: Box<dyn FnOnce(&mut ResourceFlavor)>| {
        draft.edit(|c| {
            if let Some(fl) = flavors_mut(c).get_mut(i) {
                f(fl)
            }
        })
    };
    let on_op = Callback::new(move |op: ListOp| draft.edit(|c| op.apply_named(flavors_mut(c), |f| &mut f.name)));
    let noun = format!("flavor {}", i + 1);
    view! {
        <article class="item" data-testid="flavor" aria-label=noun.clone()>
            <header class="item-head">
                <h3><span class="item-index">{i + 1}</span>{move || name.get()}</h3>
                <ItemActions noun=noun.clone() id_prefix="flavor".into() i len on_op/>
            </header>
            <FieldProblems path=path.clone() id=format!("f-{i}-flavor-problems")/>
            <div class="field-grid">
                <TextField label="Name".into() path=format!("{path}.name") value=name placeholder="e.g. spot"
                    on_input=Callback::new(move |v| edit(Box::new(move |f| f.name = v)))/>
            </div>
            <SelectorEditor path=format!("{path}.selector") owner=noun.clone() rows=selector
                empty_text="No selector: this flavor matches every node."
                on_edit=Callback::new(move |e: super::draft::SelectorEdit| edit(Box::new(move |f| e.apply(&mut f.selector))))/>
            <details class="advanced" open=advanced.with_untracked(Option::is_some)>
            <summary>"Advanced instance config"</summary>
            <ParsedField label="Advanced instance config (YAML)".into() path=format!("{path}.advanced_instance_config")
                value=advanced codec=ADVANCED multiline=true placeholder="e.g. instance_type: g5.xlarge"
                hint="Passed to the backend when it starts nodes of this flavor. Leave empty for none."
                on_change=Callback::new(move |v| edit(Box::new(move |f| f.advanced_instance_config = v)))/>
            </details>
        </article>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advanced_config_round_trips_and_errors_name_the_line() {
        let text = "instance_type: m5.large\ncount: 2\nratio: 1.5\ntags:\n  team: ml\nzones:\n- a\n- b\n";
        let map = (ADVANCED.parse)(text).unwrap();
        assert_eq!((ADVANCED.format)(&map), text);
        assert_eq!((ADVANCED.parse)(&(ADVANCED.format)(&map)), Ok(map));
        assert_eq!((ADVANCED.parse)("  "), Ok(None));
        assert!((ADVANCED.parse)("- a\n").unwrap_err().contains("must be a mapping"));
        let err = (ADVANCED.parse)("a: [1\n").unwrap_err();
        assert!(err.starts_with("invalid YAML: ") && err.contains("line 2 column 1"), "{err}");
    }
}
