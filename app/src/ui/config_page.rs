//! The config page: the active version at a glance, its canonical YAML, and a draft box
//! validated live in the browser by the same validator the server runs on apply.

use leptos::prelude::*;

use super::server_fns::get_config;
use super::widgets::{ErrorBox, Loading, LocalTime, ProblemList};
use crate::api::ConfigVersion;
use crate::config::validate::validate_text;
use crate::config::yaml::to_canonical_yaml;

/// `/` and `/config`.
#[component]
pub fn ConfigPage() -> impl IntoView {
    let active = Resource::new(|| (), |_| get_config(None));
    view! {
        <Suspense fallback=Loading>
            {move || active.get().map(|result| match result {
                Ok(v) => view! { <ActiveConfig v/> }.into_any(),
                Err(e) => view! { <ErrorBox message=e.to_string()/> }.into_any(),
            })}
        </Suspense>
    }
}

#[component]
fn ActiveConfig(v: ConfigVersion) -> impl IntoView {
    let yaml = to_canonical_yaml(&v.config);
    let c = &v.config;
    let stats = [("Flavors", c.flavors().len()), ("Queues", c.queues().len()), ("Rules", c.rules().len())];
    view! {
        <header class="page-head">
            <div>
                <h1>"Scheduler config"</h1>
                <p class="meta" data-testid="active-meta">
                    <span class="badge active">{format!("version {}", v.version)}</span>
                    " applied " <LocalTime at=v.created_at/> " by " <strong>{v.creator_id.clone()}</strong>
                    {v.message.clone().map(|m| view! { " — " <em>{m}</em> })}
                </p>
            </div>
            <a class="button" href="/config/versions">"Version history"</a>
        </header>
        <section class="stats">
            {stats.into_iter().map(|(label, n)| view! {
                <div class="stat"><span class="stat-value">{n}</span><span class="stat-label">{label}</span></div>
            }).collect_view()}
        </section>
        <div class="columns">
            <section class="card">
                <h2>"Active config (YAML)"</h2>
                <pre class="yaml" data-testid="active-yaml">{yaml.clone()}</pre>
            </section>
            <section class="card">
                <h2>"Check a draft"</h2>
                <p class="hint">"Paste or edit YAML: it is validated in your browser as you type, with the server's own rules."</p>
                <DraftChecker initial=yaml/>
            </section>
        </div>
    }
}

/// A YAML text area with live validation (no request leaves the browser).
#[component]
fn DraftChecker(initial: String) -> impl IntoView {
    let draft = RwSignal::new(initial.clone());
    let report = Memo::new(move |_| validate_text(&draft.get()).1);
    view! {
        <label class="field-label" for="draft">"Draft config"</label>
        <textarea
            id="draft"
            class="code-input"
            spellcheck="false"
            rows="18"
            prop:value=move || draft.get()
            on:input=move |ev| draft.set(event_target_value(&ev))
        >{initial}</textarea>
        <ProblemList report=report/>
    }
}
