//! Scripts a page loads only when it needs them: ECharts (1 MB, for the pages with charts)
//! and the YAML editor (CodeMirror, for the config page). Each is added to the document once,
//! by its content-hashed URL (`files`), and every caller waits for the same load.

/// A script some pages need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Script {
    /// `window.echarts`: draws the charts.
    ECharts,
    /// `window.berthYamlEditor`: the YAML tab's code editor.
    YamlEditor,
}

impl Script {
    /// Its plain file name (the build's manifest maps it to the hashed one).
    pub fn file(self) -> &'static str {
        match self {
            Script::ECharts => "echarts.min.js",
            Script::YamlEditor => "yaml-editor.js",
        }
    }
}

/// Loads `script` if no one has yet; true once it has run, false if it could not load.
#[cfg(feature = "hydrate")]
pub async fn load(script: Script) -> bool {
    let promise = browser::LOADS.with(|loads| loads.borrow_mut().entry(script).or_insert_with(|| browser::inject(script)).clone());
    wasm_bindgen_futures::JsFuture::from(promise).await.is_ok()
}

#[cfg(feature = "hydrate")]
mod browser {
    use std::cell::RefCell;
    use std::collections::HashMap;

    use js_sys::Promise;
    use wasm_bindgen::JsCast;

    use super::Script;
    use crate::ui::files::FileNames;

    thread_local! {
        pub static LOADS: RefCell<HashMap<Script, Promise>> = RefCell::new(HashMap::new());
        static NAMES: FileNames = FileNames::from_page();
    }

    /// A `<script src>` for `script` in the head; the promise settles when it has run (or failed).
    pub fn inject(script: Script) -> Promise {
        let src = NAMES.with(|n| n.url(script.file()));
        Promise::new(&mut |resolve, reject| {
            let doc = leptos::prelude::document();
            let Ok(el) = doc.create_element("script") else {
                let _ = reject.call0(&wasm_bindgen::JsValue::NULL);
                return;
            };
            let el: web_sys::HtmlScriptElement = el.unchecked_into();
            el.set_src(&src);
            el.set_onload(Some(&resolve));
            el.set_onerror(Some(&reject));
            if let Some(head) = doc.head() {
                let _ = head.append_child(&el);
            }
        })
    }
}
