//! Where the dashboard's static files are served: `/pkg/` plus the content-hashed name the
//! build gave each one (`berth.js` → `/pkg/berth.3f9c0a1b2c4d5e6f.js`; see
//! `frontend/pack.mjs`). The server reads the names from the site's `manifest.json` and
//! renders them into every page (the scripts, and a JSON block the browser reads to load
//! ECharts or the YAML editor when a page needs them).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The id of the JSON block in each page's head that lists the files' URLs.
pub const FILES_ELEMENT_ID: &str = "berth-files";

/// Plain file name → the name it is served under.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FileNames(BTreeMap<String, String>);

impl FileNames {
    /// The names in a `manifest.json`; none (plain names) when it cannot be read.
    pub fn from_manifest(json: &str) -> Self {
        serde_json::from_str(json).unwrap_or_default()
    }

    /// The URL of the file built as `name`: its hashed name when the manifest has one.
    pub fn url(&self, name: &str) -> String {
        format!("/pkg/{}", self.0.get(name).map(String::as_str).unwrap_or(name))
    }

    /// Whether `file` (a name under `/pkg/`) is a content-hashed name, or lies in a
    /// content-hashed directory (a name ending in `/`), so it never changes.
    pub fn is_hashed(&self, file: &str) -> bool {
        self.0.values().any(|hashed| hashed == file || (hashed.ends_with('/') && file.starts_with(hashed.as_str())))
    }

    /// The names as JSON, for the page.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }

    /// The names the server rendered into this page.
    #[cfg(feature = "hydrate")]
    pub fn from_page() -> Self {
        leptos::prelude::document()
            .get_element_by_id(FILES_ELEMENT_ID)
            .and_then(|el| el.text_content())
            .map(|json| Self::from_manifest(&json))
            .unwrap_or_default()
    }
}

/// What each page group's code needs (`pkg/split.json`, written by `frontend/pack.mjs`): the
/// wasm chunks that `wasm-split-cli` cut out, by the name of the lazy function that loads them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitLoads {
    /// The directory under `/pkg/` holding the app's files (`app.<hash>`).
    pub dir: String,
    /// The loader script, in that directory.
    pub loader: String,
    /// Lazy function (`config_pages_<n>`) → the modules it loads, without `.wasm`.
    pub loads: BTreeMap<String, Vec<String>>,
}

impl SplitLoads {
    /// The loads in a `split.json`; none when it cannot be read.
    pub fn from_json(json: &str) -> Option<Self> {
        serde_json::from_str(json).ok()
    }

    /// As Leptos reads it: with this in a page's context, a page that renders a page group
    /// links that group's chunks for preloading, so hydration does not wait on fetching them.
    #[cfg(feature = "ssr")]
    pub fn manifest(&self) -> leptos::WasmSplitManifest {
        let loads = self.loads.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        leptos::WasmSplitManifest(leptos::prelude::ArcStoredValue::new((format!("/pkg/{}", self.dir), loads, self.loader.clone())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashed_names_from_the_manifest_else_plain_ones() {
        let names = FileNames::from_manifest(r#"{"berth.js": "berth.0123456789abcdef.js"}"#);
        assert_eq!(names.url("berth.js"), "/pkg/berth.0123456789abcdef.js");
        assert_eq!(names.url("berth.css"), "/pkg/berth.css");
        assert!(names.is_hashed("berth.0123456789abcdef.js"));
        assert!(!names.is_hashed("berth.js"));
        assert_eq!(FileNames::from_manifest("not json"), FileNames::default());
    }

    #[test]
    fn files_in_a_hashed_directory_are_hashed() {
        let names = FileNames::from_manifest(r#"{"app/": "app.0123456789abcdef/", "berth.js": "app.0123456789abcdef/berth.js"}"#);
        assert_eq!(names.url("berth.js"), "/pkg/app.0123456789abcdef/berth.js");
        assert!(names.is_hashed("app.0123456789abcdef/chunk_7.wasm"));
        assert!(!names.is_hashed("app.fedcba9876543210/chunk_7.wasm"));
        assert!(!names.is_hashed("chunk_7.wasm"));
    }
}
