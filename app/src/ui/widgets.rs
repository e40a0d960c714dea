//! Small pieces shared by the pages: times in the viewer's zone, error boxes, loading.

use chrono::{DateTime, Utc};
use leptos::prelude::*;


/// A UTC instant shown in the viewer's local time once the page is hydrated (UTC before).
#[component]
pub fn LocalTime(at: DateTime<Utc>) -> impl IntoView {
    let text = RwSignal::new(at.format("%Y-%m-%d %H:%M:%S UTC").to_string());
    // Effects run only in the browser, where chrono knows the viewer's time zone.
    Effect::new(move |_| text.set(at.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M:%S").to_string()));
    view! { <time datetime=at.to_rfc3339() title=at.to_rfc3339()>{move || text.get()}</time> }
}

/// A failed load, shown in place of the content.
#[component]
pub fn ErrorBox(message: String) -> impl IntoView {
    view! { <div class="error-box" role="alert">{message}</div> }
}

/// A placeholder while data loads.
#[component]
pub fn Loading() -> impl IntoView {
    view! { <p class="loading">"Loading…"</p> }
}
