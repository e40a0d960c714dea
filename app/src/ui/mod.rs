//! The Leptos dashboard.

use leptos::prelude::*;

/// The root component.
#[component]
pub fn App() -> impl IntoView {
    view! { <main>"Berth"</main> }
}
