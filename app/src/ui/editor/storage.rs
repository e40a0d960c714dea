//! The draft in the browser's local storage, so a reload (or a closed tab) loses nothing.
//! On the server these are no-ops: the draft only exists in the browser.

use serde::{Deserialize, Serialize};

const DRAFT_KEY: &str = "berth.config-draft";

/// A saved draft: its text (canonical YAML, or the raw text while it does not parse) and the
/// version it was started from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedDraft {
    pub base: i64,
    pub text: String,
    pub saved_at: chrono::DateTime<chrono::Utc>,
}

#[cfg(feature = "hydrate")]
fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok().flatten()
}

#[cfg(feature = "hydrate")]
fn get(key: &str) -> Option<String> {
    storage()?.get_item(key).ok().flatten()
}

#[cfg(feature = "hydrate")]
fn set(key: &str, value: Option<&str>) {
    if let Some(s) = storage() {
        let _ = match value {
            Some(v) => s.set_item(key, v),
            None => s.remove_item(key),
        };
    }
}

#[cfg(not(feature = "hydrate"))]
fn get(_key: &str) -> Option<String> {
    None
}

#[cfg(not(feature = "hydrate"))]
fn set(_key: &str, _value: Option<&str>) {}

/// The saved draft, if any (an unreadable one counts as none).
pub fn load_draft() -> Option<SavedDraft> {
    serde_json::from_str(&get(DRAFT_KEY)?).ok()
}

/// Saves the draft, or forgets it (`None`: nothing differs from the active version).
pub fn save_draft(draft: Option<&SavedDraft>) {
    let json = draft.and_then(|d| serde_json::to_string(d).ok());
    set(DRAFT_KEY, json.as_deref());
}

