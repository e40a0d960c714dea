//! `/config`: the config editor. A draft of the active version is edited in forms (flavors,
//! queues, rules) or as YAML (the same draft, both ways), validated on every keystroke in the
//! browser by the server's own validator, saved in local storage, and applied with a message
//! after a review of what would change. A stale draft is refused with a conflict, never
//! applied over someone else's change.

mod apply;
mod code;
mod draft;
mod fields;
mod flavors;
pub mod on_demand;
mod preview;
mod queues;
mod rules;
mod selector;
mod storage;

use leptos::prelude::*;

use self::apply::{ApplyNotice, ConflictBanner, ReviewDialog};
use self::draft::Draft;
use self::flavors::FlavorsSection;
use self::queues::QueuesSection;
use self::rules::RulesSection;
use self::storage::SavedDraft;
use super::server_fns::{capacity_warnings, get_config};
use super::widgets::{ErrorBox, Loading, LocalTime};
use crate::api::ConfigVersion;
use crate::config::{to_canonical_yaml, Problem, Severity};

/// Which view of the draft is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Form,
    Yaml,
}

/// The editor page's state around the draft (all `Copy` signals, shared as context).
#[derive(Clone, Copy)]
pub struct Editor {
    pub draft: Draft,
    /// The active version as last seen (what the review compares against).
    pub active: RwSignal<ConfigVersion>,
    pub tab: RwSignal<Tab>,
    /// The YAML tab's text; it may not parse, then the draft keeps its last good state.
    pub yaml_text: RwSignal<String>,
    /// Why `yaml_text` does not parse (with line and column), empty when it does.
    pub yaml_problems: RwSignal<Vec<Problem>>,
    pub reviewing: RwSignal<bool>,
    /// `(draft's base, active)` when someone else applied after the draft was started.
    pub conflict: RwSignal<Option<(i64, i64)>>,
    pub applied: RwSignal<Option<ApplyNotice>>,
    /// When the draft shown was restored from local storage.
    pub restored: RwSignal<Option<chrono::DateTime<chrono::Utc>>>,
    /// Whether the draft differs from the active version.
    pub dirty: Memo<bool>,
    /// Counts the texts sent to the parser, so that only the latest one's result is kept.
    parses: StoredValue<u64>,
    /// Whether the latest text is still being read (the form would show the draft before it).
    pub reading: RwSignal<bool>,
}

impl Editor {
    fn new(active: ConfigVersion) -> Self {
        let yaml = to_canonical_yaml(&active.config);
        let draft = Draft::new(active.config.clone(), active.version);
        let active = RwSignal::new(active);
        let yaml_problems = RwSignal::new(Vec::<Problem>::new());
        let dirty = Memo::new(move |_| {
            yaml_problems.with(|p| !p.is_empty()) || active.with(|a| draft.config.with(|c| a.config != *c))
        });
        Editor {
            draft,
            active,
            dirty,
            tab: RwSignal::new(Tab::Form),
            yaml_text: RwSignal::new(yaml),
            yaml_problems,
            reviewing: RwSignal::new(false),
            conflict: RwSignal::new(None),
            applied: RwSignal::new(None),
            restored: RwSignal::new(None),
            parses: StoredValue::new(0),
            reading: RwSignal::new(false),
        }
    }

    /// Whether the draft differs from the active version.
    pub fn dirty(&self) -> bool {
        self.dirty.get()
    }

    /// Errors that block Apply, in whichever tab is shown.
    pub fn blocking(&self) -> usize {
        match self.yaml_problems.with(Vec::len) {
            0 => self.draft.blocking(),
            n => n,
        }
    }

    /// New YAML text: the draft follows whenever it parses (as soon as the parser's code is
    /// there: see [`on_demand`]).
    pub fn set_yaml(&self, text: String) {
        self.yaml_text.set(text.clone());
        leptos::task::spawn_local(self.read_yaml(text));
    }

    /// Parses `text` into the draft, or its problems into `yaml_problems`; a result that a
    /// newer text overtook is dropped.
    fn read_yaml(self, text: String) -> impl std::future::Future<Output = ()> + 'static {
        self.parses.update_value(|n| *n += 1);
        let ticket = self.parses.get_value();
        self.reading.set(true);
        async move {
            let parsed = (on_demand::parts().await.read_text)(&text);
            if self.parses.try_get_value() != Some(ticket) {
                return;
            }
            self.reading.set(false);
            match parsed {
                Ok(cfg) => {
                    self.draft.config.set(cfg);
                    self.yaml_problems.set(Vec::new());
                }
                Err(problems) => self.yaml_problems.set(problems),
            }
        }
    }

    /// Starts over from `v`: the draft, its base and the active version all become `v`.
    pub fn reset_to(&self, v: ConfigVersion) {
        // A text still being read must not land on top of the reset.
        self.parses.update_value(|n| *n += 1);
        self.reading.set(false);
        self.yaml_text.set(to_canonical_yaml(&v.config));
        self.yaml_problems.set(Vec::new());
        self.draft.config.set(v.config.clone());
        self.draft.base.set(v.version);
        self.active.set(v);
        self.conflict.set(None);
        self.restored.set(None);
    }

    fn show(&self, tab: Tab) {
        if tab == Tab::Yaml {
            self.yaml_text.set(self.draft.config.with(to_canonical_yaml));
        }
        self.tab.set(tab);
    }

    /// Restores a saved draft (first run), then saves the draft a moment after each change
    /// (writing 100 kB of YAML on every keystroke of a big config would make typing lag),
    /// and at once when the page goes away.
    fn persist(self) {
        let pending = StoredValue::new(0_u64);
        #[cfg(feature = "hydrate")]
        {
            let handle = window_event_listener(leptos::ev::pagehide, move |_| {
                if pending.try_get_value().is_some_and(|n| n > 0) {
                    self.save();
                }
            });
            on_cleanup(move || handle.remove());
        }
        Effect::new(move |first: Option<()>| {
            self.draft.config.track();
            self.draft.base.track();
            self.yaml_text.track();
            if first.is_none() {
                self.restore();
                return;
            }
            pending.update_value(|n| *n += 1);
            let ticket = pending.get_value();
            set_timeout(
                move || {
                    if pending.try_get_value() == Some(ticket) {
                        self.save();
                        pending.set_value(0);
                    }
                },
                std::time::Duration::from_millis(250),
            );
        });
    }

    /// Asks the server, a moment after each change, what its nodes say of the draft: the
    /// browser does not know the nodes, the server does. An answer for an older draft is
    /// dropped.
    fn check_capacity(self) {
        let asked = StoredValue::new(0_u64);
        Effect::new(move |_| {
            let yaml = self.draft.config.with(to_canonical_yaml);
            asked.update_value(|n| *n += 1);
            let ticket = asked.get_value();
            set_timeout(
                move || {
                    if asked.try_get_value() != Some(ticket) {
                        return;
                    }
                    leptos::task::spawn_local(async move {
                        let found = capacity_warnings(yaml).await.unwrap_or_default();
                        if asked.try_get_value() == Some(ticket) {
                            self.draft.capacity.set(found);
                        }
                    });
                },
                std::time::Duration::from_millis(300),
            );
        });
    }

    /// Writes the draft to local storage now (or forgets it when it equals the active one).
    fn save(&self) {
        let saved = self.dirty.get_untracked().then(|| SavedDraft {
            base: self.draft.base.get_untracked(),
            text: match self.yaml_problems.with_untracked(Vec::is_empty) {
                true => self.draft.config.with_untracked(to_canonical_yaml),
                false => self.yaml_text.get_untracked(),
            },
            saved_at: chrono::Utc::now(),
        });
        storage::save_draft(saved.as_ref());
    }

    fn restore(&self) {
        let Some(saved) = storage::load_draft() else { return };
        let (ed, read) = (*self, self.read_yaml(saved.text.clone()));
        // The rest changes once the text is read: a save before that (the draft then still
        // equal to the active version) would forget the stored draft.
        leptos::task::spawn_local(async move {
            read.await;
            let active = ed.active.get_untracked().version;
            ed.yaml_text.set(saved.text);
            ed.draft.base.set(saved.base);
            ed.restored.set(Some(saved.saved_at));
            if saved.base != active {
                ed.conflict.set(Some((saved.base, active)));
            }
            if !ed.yaml_problems.with_untracked(Vec::is_empty) {
                ed.tab.set(Tab::Yaml);
            }
        });
    }
}

/// `/` and `/config`.
#[component]
pub fn ConfigPage() -> impl IntoView {
    let active = Resource::new(|| (), |_| get_config(None));
    view! {
        <Suspense fallback=Loading>
            {move || active.get().map(|result| match result {
                Ok(v) => view! { <EditorView v/> }.into_any(),
                Err(e) => view! { <ErrorBox message=e.to_string()/> }.into_any(),
            })}
        </Suspense>
    }
}

#[component]
fn EditorView(v: ConfigVersion) -> impl IntoView {
    let ed = Editor::new(v);
    provide_context(ed);
    provide_context(ed.draft);
    ed.persist();
    ed.check_capacity();
    #[cfg(feature = "hydrate")]
    {
        crate::ui::bench::install();
        // Once the user edits, the review is likely: its code comes ahead of the click.
        Effect::new(move |fetched: Option<bool>| {
            if fetched == Some(true) || !ed.dirty() {
                return fetched.unwrap_or(false);
            }
            on_demand::preload();
            true
        });
    }
    let discard = move |_| {
        ed.reset_to(ed.active.get_untracked());
        ed.applied.set(None);
    };
    view! {
        <header class="page-head">
            <div>
                <h1>"Scheduler config"</h1>
                {move || ed.active.with(|v| {
                    let v = v.clone();
                    view! {
                        <p class="meta" data-testid="active-meta">
                            "Draft of " <span class="badge active">{format!("version {}", v.version)}</span>
                            " (active when loaded), applied " <LocalTime at=v.created_at/> " by " <strong>{v.creator_id}</strong>
                            {v.message.map(|m| view! { " — " <em>{m}</em> })}
                        </p>
                    }
                })}
            </div>
            <div class="head-actions">
                <UploadButton/>
                <a class="button" href="/config/versions">"Version history"</a>
            </div>
        </header>
        {move || ed.active.with(|v| v.not_in_force.clone()).map(|note| view! {
            <div class="banner conflict" role="alert" data-testid="not-in-force">
                <p><strong>"This version is not running. "</strong>{note}</p>
            </div>
        })}
        <ConflictBanner/>
        <Show when=move || ed.restored.get().is_some() && ed.dirty()>
            <div class="banner info" role="status" data-testid="restored">
                <span>"Restored your unsaved draft from "
                    {move || ed.restored.get().map(|at| view! { <LocalTime at/> })}
                    {move || format!(", started from version {}.", ed.draft.base.get())}</span>
                <button type="button" class="small" on:click=discard>"Discard draft"</button>
            </div>
        </Show>
        <div class="editor-bar">
            <div class="tabs" role="tablist" aria-label="Edit as">
                <button type="button" role="tab" id="tab-form" aria-controls="panel-form"
                    aria-selected=move || (ed.tab.get() == Tab::Form).to_string()
                    disabled=move || ed.reading.get() || ed.yaml_problems.with(|p| !p.is_empty())
                    title=move || match (ed.reading.get(), ed.yaml_problems.with(|p| !p.is_empty())) {
                        (true, _) => "Reading the YAML…",
                        (false, true) => "Fix the YAML first: the form shows a config, not text",
                        (false, false) => "",
                    }
                    on:click=move |_| ed.show(Tab::Form)>"Form"</button>
                <button type="button" role="tab" id="tab-yaml" aria-controls="panel-yaml"
                    aria-selected=move || (ed.tab.get() == Tab::Yaml).to_string()
                    on:click=move |_| ed.show(Tab::Yaml)>"YAML"</button>
            </div>
            <ProblemSummary/>
            <div class="bar-actions">
                <Show when=move || ed.dirty()>
                    <button type="button" class="small" data-testid="discard" on:click=discard>"Discard draft"</button>
                </Show>
                <button type="button" class="button primary" id="review-apply-button" data-testid="review-apply"
                    disabled=move || { !may_apply() || ed.reading.get() || ed.blocking() > 0 || !ed.dirty() || ed.conflict.with(Option::is_some) }
                    title=move || review_hint(ed)
                    on:click=move |_| ed.reviewing.set(true)>"Review & apply"</button>
            </div>
            // In the sticky bar, beside the button: in view wherever the page is scrolled.
            <ApplyNotice/>
        </div>
        <div class="editor-layout">
            <div class="editor-main">
                <Show when=move || ed.tab.get() == Tab::Form>
                    <div role="tabpanel" id="panel-form" aria-labelledby="tab-form" class="form-panel">
                        <FlavorsSection/>
                        <QueuesSection/>
                        <RulesSection/>
                    </div>
                </Show>
                <Show when=move || ed.tab.get() == Tab::Yaml>
                    <YamlPanel/>
                </Show>
            </div>
            <aside class="editor-aside" aria-label="Problems"
                class:clean=move || ed.blocking() == 0 && ed.draft.report.with(|r| r.problems.is_empty())>
                <ProblemPanel/>
            </aside>
        </div>
        <ReviewDialog/>
    }
}

/// Why "Review & apply" is disabled, if it is.
/// Whether the signed-in user may apply (editors and admins); others can still draft and
/// preview.
fn may_apply() -> bool {
    super::session::can(crate::auth::Role::Editor)
}

fn review_hint(ed: Editor) -> String {
    if !may_apply() {
        return "Applying needs the editor role; you can still draft and preview".into();
    }
    match (ed.blocking(), ed.dirty()) {
        (0, true) => String::new(),
        (0, false) => "The draft equals the active version".into(),
        (n, _) => format!("Fix {n} error{} first", if n == 1 { "" } else { "s" }),
    }
}

/// The draft as YAML text, in a code editor that marks each problem at its line.
#[component]
fn YamlPanel() -> impl IntoView {
    view! {
        <section role="tabpanel" id="panel-yaml" aria-labelledby="tab-yaml" class="card">
            <label class="field-label" for="draft">"Draft config (YAML or JSON)"</label>
            <p class="hint">"The same draft as the form: edits here show there and back. Validated as you type, in your browser."</p>
            <code::YamlCode/>
        </section>
    }
}

/// Error and warning counts, as badges.
#[component]
fn ProblemSummary() -> impl IntoView {
    let ed = expect_context::<Editor>();
    let warnings = move || match ed.yaml_problems.with(Vec::is_empty) {
        true => ed.draft.report.with(|r| r.warnings().count()),
        false => 0,
    };
    view! {
        <p class="problem-summary" data-testid="problem-summary" aria-live="polite">
            {move || match (ed.blocking(), warnings()) {
                (0, 0) => view! { <span class="badge ok">"No problems"</span> }.into_any(),
                (e, w) => view! {
                    {(e > 0).then(|| view! { <span class="badge error">{format!("{e} error{}", if e == 1 { "" } else { "s" })}</span> })}
                    {(e == 0).then(|| view! { <span class="badge ok">"No errors"</span> })}
                    {(w > 0).then(|| view! { <span class="badge warning">{format!("{w} warning{}", if w == 1 { "" } else { "s" })}</span> })}
                }.into_any(),
            }}
        </p>
    }
}

/// Every problem of the draft, errors first; each path jumps to its field.
#[component]
fn ProblemPanel() -> impl IntoView {
    let ed = expect_context::<Editor>();
    let problems = move || {
        let mut list = ed.yaml_problems.get();
        if list.is_empty() {
            list = ed.draft.report.get().problems;
            list.extend(ed.draft.unparsed.get().into_values().map(|why| Problem::error("", why)));
        }
        list.sort_by_key(|p| p.severity);
        list
    };
    view! {
        <section class="card problems" data-testid="problems" id="editor-problems">
            <h2>"Problems"</h2>
            <Show when=move || problems().is_empty()>
                <p class="hint">"None. The server runs the same checks on apply."</p>
            </Show>
            <ul class="problem-list">
                {move || problems().into_iter().map(|p| {
                    let class = match p.severity { Severity::Error => "problem error", Severity::Warning => "problem warning" };
                    let place = match (p.line, p.column) {
                        (Some(l), Some(c)) => format!(" (line {l}, column {c})"),
                        _ => String::new(),
                    };
                    let path = p.path.clone();
                    let label = if path.is_empty() { "(document)".to_string() } else { p.location() };
                    // The place reads into the message ("cpu quota must not be negative"); the
                    // schema path stays at hand for YAML and API users: shown small below
                    // when the label is in words, and as the button's tooltip.
                    let schema = (!p.place.is_empty()).then(|| view! { <code class="schema-path">{path.clone()}</code> });
                    let title = format!("Go to the field ({path})");
                    view! {
                        <li class=class data-testid="problem">
                            <button type="button" class="link path" title=title
                                on:click=move |_| jump_to(ed, &path)>{label}</button>
                            <span class="message">{p.message.clone()}{place}</span>
                            {schema}
                        </li>
                    }
                }).collect_view()}
            </ul>
        </section>
    }
}

/// Focuses the field of `path` in the form (or the nearest one inside it).
fn jump_to(ed: Editor, path: &str) {
    if ed.tab.get_untracked() == Tab::Yaml {
        code::focus_text();
        return;
    }
    let path = path.to_string();
    request_animation_frame(move || {
        use leptos::wasm_bindgen::JsCast;
        let doc = document();
        let exact = format!("[data-path=\"{}\"]", path.replace('"', "\\\""));
        let inside = format!("[data-path^=\"{}\"]", path.replace('"', "\\\""));
        let found = doc.query_selector(&exact).ok().flatten().or_else(|| doc.query_selector(&inside).ok().flatten());
        if let Some(el) = found.and_then(|e| e.dyn_into::<leptos::web_sys::HtmlElement>().ok()) {
            let _ = el.focus();
        }
    });
}

/// Loads a YAML (or JSON) file into the draft through the YAML tab, so problems point at
/// its lines.
#[component]
fn UploadButton() -> impl IntoView {
    let ed = expect_context::<Editor>();
    let on_change = move |ev: leptos::ev::Event| {
        #[cfg(feature = "hydrate")]
        {
            use leptos::wasm_bindgen::JsCast;
            let Some(input) = ev.target().and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok()) else { return };
            let Some(file) = input.files().and_then(|f| f.get(0)) else { return };
            let promise = file.text();
            input.set_value("");
            leptos::task::spawn_local(async move {
                if let Ok(text) = wasm_bindgen_futures::JsFuture::from(promise).await {
                    ed.set_yaml(text.as_string().unwrap_or_default());
                    ed.tab.set(Tab::Yaml);
                    ed.applied.set(None);
                }
            });
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = (ev, ed);
    };
    view! {
        <span class="upload">
            <input type="file" id="upload-yaml" class="file-input" accept=".yaml,.yml,.json,application/yaml,application/json"
                on:change=on_change/>
            <label for="upload-yaml" class="button">"Upload YAML"</label>
        </span>
    }
}
