//! Why a job waits, as pages show it: the engine's one-line headline first, its full
//! explanation (every flavor tried, with the numbers) one click away.

use leptos::prelude::*;

/// The headline with the full reason in a `<details>`; the reason alone when the engine gave
/// no headline (a job held back by a hold, a dependency or a retry's backoff).
#[component]
pub fn WhyItWaits(headline: Option<String>, reason: String) -> impl IntoView {
    match headline.filter(|h| !h.is_empty()) {
        Some(headline) => view! {
            <span class="reason-headline" data-testid="reason-headline">{headline}</span>
            <details class="reason-detail">
                <summary>"Full explanation"</summary>
                <p data-testid="reason-full">{reason}</p>
            </details>
        }
        .into_any(),
        None => view! { <span class="reason-headline" data-testid="reason-headline">{reason}</span> }.into_any(),
    }
}
