//! The YAML tab's text: a textarea (what the server renders, and what works until the
//! editor loads or if it cannot), which the browser replaces with a code editor: CodeMirror,
//! loaded on this page only (`scripts`), with line numbers and the draft's problems marked at
//! their lines. Both edit the same `Editor::yaml_text`, so validation and the form follow.

use leptos::html::Textarea;
use leptos::prelude::*;

use super::Editor;
#[cfg(feature = "hydrate")]
use crate::config::Problem;

/// The problems to mark: the YAML's own (with line and column) while it does not parse,
/// else the validator's (the editor finds their lines from their paths).
#[cfg(feature = "hydrate")]
fn marked_problems(ed: Editor) -> Vec<Problem> {
    let parse = ed.yaml_problems.get();
    if !parse.is_empty() {
        return parse;
    }
    ed.draft.report.get().problems
}

#[component]
pub fn YamlCode() -> impl IntoView {
    let ed = expect_context::<Editor>();
    let area = NodeRef::<Textarea>::new();
    #[cfg(feature = "hydrate")]
    browser::enhance(ed, area);
    view! {
        <div class="yaml-code">
            <textarea id="draft" node_ref=area class="code-input yaml-editor" spellcheck="false" rows="28"
                aria-describedby="editor-problems"
                prop:value=move || ed.yaml_text.get()
                on:input=move |ev| ed.set_yaml(event_target_value(&ev))>{ed.yaml_text.get_untracked()}</textarea>
        </div>
    }
}

/// Focuses the YAML text: the code editor when it is there, else the textarea.
pub fn focus_text() {
    request_animation_frame(|| {
        use leptos::wasm_bindgen::JsCast;
        let doc = document();
        let el = doc.query_selector("#panel-yaml .cm-content").ok().flatten().or_else(|| doc.get_element_by_id("draft"));
        if let Some(el) = el.and_then(|e| e.dyn_into::<leptos::web_sys::HtmlElement>().ok()) {
            let _ = el.focus();
        }
    });
}

#[cfg(feature = "hydrate")]
mod browser {
    use leptos::html::Textarea;
    use leptos::prelude::*;
    use wasm_bindgen::prelude::*;

    use super::{marked_problems, Editor};
    use crate::ui::scripts::{load, Script};

    #[wasm_bindgen]
    extern "C" {
        /// The handle `window.berthYamlEditor.attach` returns (frontend/js/yaml-editor.js).
        type CodeEditor;
        #[wasm_bindgen(catch, js_namespace = berthYamlEditor, js_name = attach)]
        fn attach(textarea: &web_sys::HtmlTextAreaElement, on_change: &js_sys::Function) -> Result<CodeEditor, JsValue>;
        #[wasm_bindgen(method, js_name = setText)]
        fn set_text(this: &CodeEditor, text: &str);
        #[wasm_bindgen(method, js_name = setProblems)]
        fn set_problems(this: &CodeEditor, problems: &JsValue);
        #[wasm_bindgen(method)]
        fn destroy(this: &CodeEditor);
    }

    /// The editor and the callback it calls on each edit (dropped together).
    type Attached = (CodeEditor, Closure<dyn FnMut(String)>);

    /// Replaces the textarea with the code editor once its script has loaded, and keeps the
    /// two in step with the draft.
    pub fn enhance(ed: Editor, area: NodeRef<Textarea>) {
        // The YAML reader is in the editor's on-demand chunk: fetched now, beside the script.
        super::super::on_demand::preload();
        let attached = StoredValue::new_local(None::<Attached>);
        let ready = RwSignal::new(false);
        Effect::new(move |_| {
            let Some(el) = area.get() else { return };
            leptos::task::spawn_local(async move {
                // The tab may have been left (and all this disposed) while the script loaded.
                if !load(Script::YamlEditor).await || attached.try_with_value(Option::is_none) != Some(true) {
                    return;
                }
                let on_change = Closure::<dyn FnMut(String)>::new(move |text: String| ed.set_yaml(text));
                if let Ok(editor) = attach(&el, on_change.as_ref().unchecked_ref()) {
                    if let Some((editor, _)) = attached.try_set_value(Some((editor, on_change))).flatten() {
                        editor.destroy();
                        return;
                    }
                    ready.try_set(true);
                }
            });
        });
        // Text set from elsewhere (an upload, a reset, the form) reaches the editor.
        Effect::new(move |_| {
            let text = ed.yaml_text.get();
            if ready.get() {
                attached.with_value(|a| a.as_ref().map(|(editor, _)| editor.set_text(&text)));
            }
        });
        Effect::new(move |_| {
            let problems = marked_problems(ed);
            if !ready.get() {
                return;
            }
            let json = serde_json::to_string(&problems).unwrap_or_else(|_| "[]".into());
            if let Ok(list) = js_sys::JSON::parse(&json) {
                attached.with_value(|a| a.as_ref().map(|(editor, _)| editor.set_problems(&list)));
            }
        });
        on_cleanup(move || {
            attached.update_value(|a| {
                if let Some((editor, _)) = a.take() {
                    editor.destroy();
                }
            });
        });
    }
}
