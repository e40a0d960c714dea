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

    /// Whether `file` (a name under `/pkg/`) is a content-hashed name, so it never changes.
    pub fn is_hashed(&self, file: &str) -> bool {
        self.0.values().any(|hashed| hashed == file)
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
}
