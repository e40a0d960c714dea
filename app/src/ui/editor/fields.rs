//! Form fields with a visible label, the validator's problems for their path right below,
//! and `data-path` so the problem summary can jump to them. Fields whose text is not the
//! config's value as such (numbers, lists, YAML) keep the typed text locally and write the
//! config only when it parses, so typing `1.` or `a,` is never rewritten under the cursor.

use leptos::prelude::*;

use super::draft::{Draft, ListOp, ProblemIndex, ProblemScope};

use crate::config::Severity;

/// The DOM id of the input for `path`, e.g. `f-resource_queues-0-name`.
pub fn field_id(path: &str) -> String {
    let mut id = String::from("f-");
    let mut last_dash = true;
    for c in path.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            id.push(c);
            last_dash = false;
        } else if !last_dash {
            id.push('-');
            last_dash = true;
        }
    }
    id.trim_end_matches('-').to_string()
}

/// Moves the keyboard focus to element `id` once the DOM has caught up.
pub fn focus_later(id: String) {
    request_animation_frame(move || {
        use leptos::wasm_bindgen::JsCast;
        if let Some(el) = document().get_element_by_id(&id).and_then(|e| e.dyn_into::<leptos::web_sys::HtmlElement>().ok()) {
            let _ = el.focus();
        }
    });
}

/// The validator's problems at exactly `path`, errors first.
#[component]
pub fn FieldProblems(#[prop(into)] path: Signal<String>, id: String) -> impl IntoView {
    let scope = ProblemScope::current(expect_context::<Draft>());
    view! {
        <ul class="field-problems" id=id aria-live="polite">
            {move || {
                let path = path.get();
                let mut problems = scope.with(|ix| ix.at(&path).to_vec());
                problems.sort_by_key(|p| p.severity);
                problems.into_iter().map(|p| {
                    let class = match p.severity { Severity::Error => "problem error", Severity::Warning => "problem warning" };
                    view! { <li class=class data-testid="field-problem">{p.message}</li> }
                }).collect_view()
            }}
        </ul>
    }
}

/// Whether the validator has an error at `path` (for `aria-invalid`).
fn has_error(scope: Signal<ProblemIndex>, path: &str) -> bool {
    scope.with(|ix| ix.at(path).iter().any(|p| p.is_error()))
}

/// A text input bound to a string of the config.
#[component]
pub fn TextField(
    label: String,
    path: String,
    #[prop(into)] value: Signal<String>,
    on_input: Callback<String>,
    #[prop(optional)] placeholder: &'static str,
) -> impl IntoView {
    let scope = ProblemScope::current(expect_context::<Draft>());
    let id = field_id(&path);
    let described = format!("{id}-problems");
    let invalid_path = path.clone();
    view! {
        <div class="field">
            <label for=id.clone()>{label}</label>
            <input
                type="text"
                id=id
                data-path=path.clone()
                placeholder=placeholder
                autocomplete="off"
                spellcheck="false"
                aria-describedby=described.clone()
                aria-invalid=move || has_error(scope, &invalid_path).to_string()
                prop:value=move || value.get()
                on:input=move |ev| on_input.run(event_target_value(&ev))
            />
            <FieldProblems path=path id=described/>
        </div>
    }
}

/// How a [`ParsedField`] reads and writes its value.
pub struct Codec<T: 'static> {
    pub parse: fn(&str) -> Result<T, String>,
    pub format: fn(&T) -> String,
}

/// An input whose text is parsed into a value of the config (a number, a list, YAML).
#[component]
pub fn ParsedField<T>(
    label: String,
    path: String,
    #[prop(into)] value: Signal<T>,
    codec: Codec<T>,
    on_change: Callback<T>,
    #[prop(optional)] placeholder: &'static str,
    #[prop(optional)] hint: &'static str,
    #[prop(optional)] multiline: bool,
    #[prop(optional)] numeric: bool,
    /// Where the validator reports this value when it is not `path` (it may move).
    #[prop(optional, into)]
    problems_at: Option<Signal<String>>,
) -> impl IntoView
where
    T: Clone + PartialEq + Send + Sync + 'static,
{
    let draft = expect_context::<Draft>();
    let scope = ProblemScope::current(draft);
    let Codec { parse, format } = codec;
    let id = field_id(&path);
    let text = RwSignal::new(value.with_untracked(format));
    let local_error = RwSignal::new(None::<String>);
    // The config changed from elsewhere (a move, the YAML tab): show its value, unless the
    // text already means it.
    Effect::new(move |_| {
        let v = value.get();
        if parse(&text.get_untracked()).ok().as_ref() != Some(&v) {
            text.set(format(&v));
            local_error.set(None);
        }
    });
    let unparsed_id = id.clone();
    Effect::new(move |_| draft.set_unparsed(&unparsed_id, local_error.get()));
    let cleanup_id = id.clone();
    on_cleanup(move || draft.set_unparsed(&cleanup_id, None));
    let on_input = move |ev: leptos::ev::Event| {
        let t = event_target_value(&ev);
        text.set(t.clone());
        match parse(&t) {
            Ok(v) => {
                local_error.set(None);
                if value.with_untracked(|old| *old != v) {
                    on_change.run(v);
                }
            }
            Err(e) => local_error.set(Some(e)),
        }
    };
    let described = format!("{id}-problems");
    let fixed = path.clone();
    let at = problems_at.unwrap_or_else(|| Signal::derive(move || fixed.clone()));
    let invalid = move || (local_error.with(Option::is_some) || has_error(scope, &at.get())).to_string();
    let input = if multiline {
        view! {
            <textarea id=id.clone() data-path=move || at.get() class="code-input" rows="4" spellcheck="false"
                placeholder=placeholder aria-describedby=described.clone() aria-invalid=invalid
                prop:value=move || text.get() on:input=on_input>{text.get_untracked()}</textarea>
        }.into_any()
    } else {
        view! {
            <input type="text" id=id.clone() data-path=move || at.get() placeholder=placeholder autocomplete="off"
                spellcheck="false" inputmode=numeric.then_some("decimal") class:numeric=numeric
                aria-describedby=described.clone() aria-invalid=invalid
                prop:value=move || text.get() on:input=on_input/>
        }.into_any()
    };
    view! {
        <div class="field" class:wide=multiline>
            <label for=id>{label}</label>
            {input}
            {(!hint.is_empty()).then(|| view! { <p class="field-hint">{hint}</p> })}
            {move || local_error.get().map(|e| view! { <p class="problem error local">{e}</p> })}
            <FieldProblems path=at id=described/>
        </div>
    }
}

/// A select bound to a string of the config; `options` are (value, text) pairs.
///
/// Until the select is first focused it holds only the selected option: a rule's queue
/// select may offer hundreds of queues, and hundreds of rules would make that a DOM of
/// tens of thousands of options that every rename has to update.
#[component]
pub fn SelectField(
    label: String,
    path: String,
    #[prop(into)] options: Signal<Vec<(String, String)>>,
    #[prop(into)] value: Signal<String>,
    on_change: Callback<String>,
) -> impl IntoView {
    let scope = ProblemScope::current(expect_context::<Draft>());
    let id = field_id(&path);
    let described = format!("{id}-problems");
    let invalid_path = path.clone();
    let expanded = RwSignal::new(false);
    let shown = Memo::new(move |_| match expanded.get() {
        true => options.get(),
        false => value.with(|cur| options.with(|o| o.iter().filter(|(v, _)| v == cur).cloned().collect())),
    });
    let expand = move || {
        if !expanded.get_untracked() {
            expanded.set(true);
        }
    };
    view! {
        <div class="field">
            <label for=id.clone()>{label}</label>
            <select id=id data-path=path.clone() aria-describedby=described.clone()
                aria-invalid=move || has_error(scope, &invalid_path).to_string()
                prop:value=move || value.get()
                on:focus=move |_| expand() on:pointerdown=move |_| expand()
                on:change=move |ev| on_change.run(event_target_value(&ev))>
                // `selected` is set once, when an option is created: a new option for the
                // current value (its text changed) takes the selection over; later changes
                // of the value go through `prop:value`.
                <For each=move || shown.get() key=|o| o.clone() children=move |(v, text)| {
                    let selected = value.with_untracked(|cur| *cur == v);
                    view! { <option value=v selected=selected>{text}</option> }
                }/>
            </select>
            <FieldProblems path=path id=described/>
        </div>
    }
}

/// Move up / move down / duplicate / remove for item `i` of a list of `len`. After a move
/// the focus follows the item, so the buttons can be pressed again and again.
#[component]
pub fn ItemActions(
    /// What the item is called in button labels, e.g. "rule 2".
    noun: String,
    /// Prefix of the buttons' ids; the index is appended.
    id_prefix: String,
    i: usize,
    #[prop(into)] len: Signal<usize>,
    on_op: Callback<ListOp>,
    #[prop(optional)] no_duplicate: bool,
) -> impl IntoView {
    let prefix = StoredValue::new(id_prefix);
    let id = move |what: &str, at: usize| prefix.with_value(|p| format!("{p}-{at}-{what}"));
    let act = move |op: ListOp| {
        on_op.run(op);
        // Focus the same button at the item's new place, or its twin when that one is
        // disabled at an end of the list.
        let (to, n) = (op.target(), len.get_untracked());
        match op {
            ListOp::Up(_) if to == 0 => focus_later(id("down", to)),
            ListOp::Up(_) => focus_later(id("up", to)),
            ListOp::Down(_) if to + 1 >= n => focus_later(id("up", to)),
            ListOp::Down(_) => focus_later(id("down", to)),
            _ => {}
        }
    };
    view! {
        <div class="item-actions" role="group" aria-label=format!("Actions for {noun}")>
            <button type="button" class="icon" id=id("up", i) title="Move up" aria-label=format!("Move {noun} up")
                disabled=move || i == 0 on:click=move |_| act(ListOp::Up(i))>"↑"</button>
            <button type="button" class="icon" id=id("down", i) title="Move down" aria-label=format!("Move {noun} down")
                disabled=move || { i + 1 >= len.get() } on:click=move |_| act(ListOp::Down(i))>"↓"</button>
            {(!no_duplicate).then(|| view! {
                <button type="button" class="small" aria-label=format!("Duplicate {noun}")
                    on:click=move |_| act(ListOp::Duplicate(i))>"Duplicate"</button>
            })}
            <button type="button" class="small danger" aria-label=format!("Remove {noun}")
                on:click=move |_| act(ListOp::Remove(i))>"Remove"</button>
        </div>
    }
}

/// A section of the form (flavors, queues, rules): heading with a count, a hint, the items
/// (`children`) and an add button.
#[component]
pub fn EditorSection(
    /// Id of the heading; also names the add button's test id: `add-{id}`.
    id: &'static str,
    title: &'static str,
    hint: &'static str,
    len: Memo<usize>,
    add_label: &'static str,
    on_add: Callback<()>,
    children: Children,
) -> impl IntoView {
    view! {
        <section class="card editor-section" aria-labelledby=format!("{id}-h")>
            <div class="section-head">
                <h2 id=format!("{id}-h")>{title} <span class="count">{move || len.get()}</span></h2>
                <p class="hint">{hint}</p>
            </div>
            {children()}
            <button type="button" class="button" data-testid=format!("add-{id}") on:click=move |_| on_add.run(())>{add_label}</button>
        </section>
    }
}

/// Codecs for the fields of the config.
pub mod codec {
    use super::Codec;

    /// A quota: empty = unlimited (absent), else a number.
    pub const QUOTA: Codec<Option<f64>> = Codec { parse: opt_number, format: fmt_opt_number };
    /// A priority: empty = not set, else an integer.
    pub const PRIORITY: Codec<Option<i64>> = Codec { parse: opt_int, format: fmt_opt_int };
    /// A comma-separated list of names.
    pub const LIST: Codec<Vec<String>> = Codec { parse: list, format: fmt_list };

    fn opt_number(s: &str) -> Result<Option<f64>, String> {
        let s = s.trim();
        if s.is_empty() {
            return Ok(None);
        }
        match s.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(Some(x)),
            _ => Err(format!("`{s}` is not a number")),
        }
    }

    fn fmt_opt_number(v: &Option<f64>) -> String {
        v.map(|x| x.to_string()).unwrap_or_default()
    }

    fn opt_int(s: &str) -> Result<Option<i64>, String> {
        let s = s.trim();
        if s.is_empty() {
            return Ok(None);
        }
        s.parse::<i64>().map(Some).map_err(|_| format!("`{s}` is not a whole number"))
    }

    fn fmt_opt_int(v: &Option<i64>) -> String {
        v.map(|x| x.to_string()).unwrap_or_default()
    }

    fn list(s: &str) -> Result<Vec<String>, String> {
        Ok(s.split(',').map(str::trim).filter(|x| !x.is_empty()).map(String::from).collect())
    }

    #[allow(clippy::ptr_arg)] // the codec's signature is `fn(&T)` with `T = Vec<String>`
    fn fmt_list(v: &Vec<String>) -> String {
        v.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_safe_and_readable() {
        assert_eq!(field_id("resource_queues[0].resource_groups[1].flavors[2].name"), "f-resource_queues-0-resource_groups-1-flavors-2-name");
        assert_eq!(field_id(""), "f");
    }

    #[test]
    fn codecs_round_trip_and_refuse_garbage() {
        assert_eq!((codec::QUOTA.parse)(" "), Ok(None));
        assert_eq!((codec::QUOTA.parse)("0"), Ok(Some(0.0)));
        assert_eq!((codec::QUOTA.format)(&Some(64.0)), "64");
        assert!((codec::QUOTA.parse)("abc").is_err());
        assert!((codec::PRIORITY.parse)("1.5").is_err());
        assert_eq!((codec::LIST.parse)("cpu, gpu,"), Ok(vec!["cpu".into(), "gpu".into()]));
    }
}
