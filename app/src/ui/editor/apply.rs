//! Applying the draft: a review of what would change against the active version (and, on
//! request, its impact on recorded workload), a message, then the apply itself. A draft started from an older version than the active one is a
//! conflict: the user sees what changed meanwhile and decides, nothing is overwritten.

use leptos::prelude::*;

use super::fields::focus_later;
use super::on_demand::parts;
use super::preview::PreviewPanel;
use super::storage;
use super::Editor;
use crate::config::diff::{diff_labeled, ConfigDiff};
use crate::config::to_canonical_yaml;
use crate::ui::diff_view::DiffView;
use crate::ui::server_fns::{apply_draft, get_config, get_diff, ApplyInput, ApplyOutcome};
use crate::ui::widgets::{ErrorBox, Loading};

/// What the last apply did, for the banner.
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyNotice {
    pub version: i64,
    pub changed: bool,
    pub warnings: usize,
}

/// "Applied as version N", after a successful apply.
#[component]
pub fn ApplyNotice() -> impl IntoView {
    let ed = expect_context::<Editor>();
    move || {
        ed.applied.get().map(|n| {
            let text = match (n.changed, n.warnings) {
                (false, _) => "nothing changed: it equals the previous version.".to_string(),
                (true, 0) => "it is active now.".to_string(),
                (true, w) => format!("it is active now, with {w} warning{}.", if w == 1 { "" } else { "s" }),
            };
            view! {
                <div class="banner ok" role="status" data-testid="applied">
                    <span>"Applied as "<a href=format!("/config/versions/{}", n.version)>{format!("version {}", n.version)}</a>"; " {text}</span>
                    <button type="button" class="small" aria-label="Dismiss" on:click=move |_| ed.applied.set(None)>"Dismiss"</button>
                </div>
            }
        })
    }
}

/// Shown when the draft's base is not the active version any more.
#[component]
pub fn ConflictBanner() -> impl IntoView {
    let ed = expect_context::<Editor>();
    let showing = RwSignal::new(false);
    let changes = Resource::new(
        move || ed.conflict.get().filter(|_| showing.get()),
        |c| async move {
            let Some((base, active)) = c else { return Ok(None) };
            let diff = get_diff(Some(base), Some(active)).await?;
            let (old, new) = (get_config(Some(base)).await?, get_config(Some(active)).await?);
            Ok::<_, ServerFnError>(Some((diff, to_canonical_yaml(&old.config), to_canonical_yaml(&new.config))))
        },
    );
    let rebase = move |_| {
        leptos::task::spawn_local(async move {
            if let Ok(v) = get_config(None).await {
                ed.draft.base.set(v.version);
                ed.active.set(v);
                ed.conflict.set(None);
                showing.set(false);
            }
        });
    };
    let discard = move |_| {
        leptos::task::spawn_local(async move {
            if let Ok(v) = get_config(None).await {
                ed.reset_to(v);
                showing.set(false);
            }
        });
    };
    move || {
        ed.conflict.get().map(|(base, active)| view! {
            <div class="banner conflict" role="alert" data-testid="conflict">
                <p><strong>{format!("Version {active} was applied after your draft was started from version {base}.")}</strong>
                    " Your draft was not applied and nothing was overwritten. Look at what changed, then either apply your draft on top of it or start over from the active version."</p>
                <div class="row-buttons">
                    <button type="button" class="small" data-testid="show-conflict-diff" aria-expanded=move || showing.get().to_string()
                        on:click=move |_| showing.update(|s| *s = !*s)>
                        {move || if showing.get() { "Hide what changed" } else { "Show what changed" }}</button>
                    <button type="button" class="small" data-testid="rebase" on:click=rebase>{format!("Keep my draft, on top of version {active}")}</button>
                    <button type="button" class="small danger" on:click=discard>"Discard my draft"</button>
                </div>
                <Show when=move || showing.get()>
                    <div class="conflict-diff" data-testid="conflict-diff">
                        <Suspense fallback=Loading>
                            {move || changes.get().map(|r| match r {
                                Ok(Some((diff, old, new))) => {
                                    let labels = (format!("version {base} (your base)"), format!("version {active} (active)"));
                                    Suspend::new(async move { (parts().await.changes)(diff, old, new, labels.0, labels.1) }).into_any()
                                }
                                Ok(None) => ().into_any(),
                                Err(e) => view! { <ErrorBox message=e.to_string()/> }.into_any(),
                            })}
                        </Suspense>
                    </div>
                </Show>
            </div>
        })
    }
}

/// The review: the diff against the active version, a message, and the apply button.
#[component]
pub fn ReviewDialog() -> impl IntoView {
    let ed = expect_context::<Editor>();
    let message = RwSignal::new(String::new());
    let busy = RwSignal::new(false);
    let failure = RwSignal::new(None::<String>);
    let refused = RwSignal::new(Vec::new());
    // The dialog opens at its top, on the change summary: the heading takes the focus (a
    // focused message box further down would scroll the summary away).
    Effect::new(move |_| {
        if ed.reviewing.get() {
            failure.set(None);
            refused.set(Vec::new());
            focus_later("review-title".into());
        }
    });
    let close = move || {
        ed.reviewing.set(false);
        focus_later("review-apply-button".into());
    };
    let apply = move || {
        if busy.get_untracked() {
            return;
        }
        busy.set(true);
        let yaml = ed.draft.config.with_untracked(to_canonical_yaml);
        let input = ApplyInput {
            message: Some(message.get_untracked()).filter(|m| !m.trim().is_empty()),
            expected_active_version: Some(ed.draft.base.get_untracked()),
        };
        leptos::task::spawn_local(async move {
            let result = apply_draft(yaml, input).await;
            busy.set(false);
            match result {
                Ok(ApplyOutcome::Applied { version, changed, warnings }) => {
                    match get_config(Some(version)).await {
                        Ok(v) => ed.reset_to(v),
                        Err(_) => ed.draft.base.set(version),
                    }
                    storage::save_draft(None);
                    message.set(String::new());
                    ed.applied.set(Some(ApplyNotice { version, changed, warnings: warnings.len() }));
                    ed.reviewing.set(false);
                }
                Ok(ApplyOutcome::Conflict { expected, active }) => {
                    ed.conflict.set(Some((expected, active)));
                    ed.reviewing.set(false);
                }
                Ok(ApplyOutcome::Invalid { problems }) => refused.set(problems),
                Err(e) => failure.set(Some(e.to_string())),
            }
        });
    };
    view! {
        <Show when=move || ed.reviewing.get()>
            <div class="modal-backdrop" on:click=move |_| close()></div>
            <div class="modal" role="dialog" aria-modal="true" aria-labelledby="review-title" data-testid="review"
                on:keydown=move |ev| if ev.key() == "Escape" { close() }>
                <header class="modal-head">
                    <h2 id="review-title" tabindex="-1">{move || format!("Apply the draft as version {}?", ed.active.with(|a| a.version) + 1)}</h2>
                    <button type="button" class="small" aria-label="Close the review" on:click=move |_| close()>"Close"</button>
                </header>
                <div class="modal-body">
                    <p class="hint">{move || format!("What changes against the active version {}:", ed.active.with(|a| a.version))}</p>
                    <Suspense fallback=Loading>
                        {Suspend::new(async { (parts().await.review)() })}
                    </Suspense>
                    <div class="field wide">
                        <label for="apply-message">"Message (why this change)"</label>
                        <textarea id="apply-message" rows="2" placeholder="e.g. give research 8 more GPUs"
                            prop:value=move || message.get() on:input=move |ev| message.set(event_target_value(&ev))></textarea>
                    </div>
                    <p class="hint">{move || super::super::session::signed_in_as()}</p>
                    {move || failure.get().map(|e| view! { <ErrorBox message=e/> })}
                    <Show when=move || refused.with(|r| !r.is_empty())>
                        <div class="error-box" role="alert">"The server refused the draft:"
                            <ul>{move || refused.get().into_iter().map(|p| view! { <li>{p.to_string()}</li> }).collect_view()}</ul>
                        </div>
                    </Show>
                </div>
                <footer class="modal-foot">
                    <button type="button" class="button" on:click=move |_| close()>"Cancel"</button>
                    <button type="button" class="button primary" data-testid="confirm-apply" disabled=move || busy.get()
                        on:click=move |_| apply()>
                        {move || if busy.get() { "Applying…".to_string() } else { format!("Apply as version {}", ed.active.with(|a| a.version) + 1) }}</button>
                </footer>
            </div>
        </Show>
    }
}

/// The review's body: what the draft changes against the active version, then the what-if
/// preview. Code of the editor's on-demand chunk ([`super::on_demand`]).
pub fn review_body() -> AnyView {
    let ed = expect_context::<Editor>();
    let changes = move || {
        let active = ed.active.get();
        let draft = ed.draft.config.get();
        let label = format!("version {} (active)", active.version);
        let diff = diff_labeled(&active.config, &draft, &label, "draft");
        view! {
            <DiffView diff old_yaml=to_canonical_yaml(&active.config) new_yaml=to_canonical_yaml(&draft)
                old_label=label new_label="your draft".to_string()/>
        }
    };
    view! { {changes} <PreviewPanel/> }.into_any()
}

/// A diff of two configs as a [`DiffView`]; code of the editor's on-demand chunk.
pub fn changes_view(diff: ConfigDiff, old_yaml: String, new_yaml: String, old_label: String, new_label: String) -> AnyView {
    view! { <DiffView diff old_yaml new_yaml old_label new_label/> }.into_any()
}
