//! Version history: the list (newest first, paged, any two picked for a diff), one version
//! with its changes against its predecessor, download and rollback, and the diff of any two
//! versions.

use leptos::prelude::*;
use leptos_router::hooks::{use_navigate, use_params_map, use_query_map};
use serde::{Deserialize, Serialize};

use super::diff_view::DiffView;
use super::server_fns::{get_config, get_diff, list_versions, rollback_to, ApplyInput, ApplyOutcome};
use super::widgets::{ErrorBox, Loading, LocalTime};
use crate::api::{ConfigVersion, VersionPage};
use crate::config::diff::ConfigDiff;
use crate::config::yaml::to_canonical_yaml;

/// Versions shown per page.
const PAGE: i64 = 20;

/// Where version `v` is downloaded as YAML (the REST API, ready to edit and apply again).
fn download_href(v: i64) -> String {
    format!("/api/v1/scheduler/config/versions/{v}?format=yaml")
}

/// `/config/versions?cursor=N`.
#[component]
pub fn VersionsPage() -> impl IntoView {
    let query = use_query_map();
    let cursor = move || query.read().get("cursor");
    let page = Resource::new(cursor, |cursor| list_versions(cursor, PAGE));
    view! {
        <header class="page-head">
            <h1>"Version history"</h1>
            <a class="button" href="/config">"Edit the config"</a>
        </header>
        <section class="card">
            <Suspense fallback=Loading>
                {move || page.get().map(|result| match result {
                    Ok(p) => view! { <VersionTable page=p first=cursor().is_none()/> }.into_any(),
                    Err(e) => view! { <ErrorBox message=e.to_string()/> }.into_any(),
                })}
            </Suspense>
        </section>
    }
}

/// The table is a GET form: the From and To radio columns pick the versions `/config/diff`
/// compares.
#[component]
fn VersionTable(page: VersionPage, first: bool) -> impl IntoView {
    let rows = page.versions.into_iter().enumerate().map(|(i, v)| {
        let n = v.version;
        let href = format!("/config/versions/{n}");
        view! {
            <tr class:active=v.is_active data-testid="version-row">
                <td class="pick">
                    <input type="radio" name="from" id=format!("from-{n}") value=n checked=i == 1
                        aria-label=format!("Compare from version {n}")/>
                    <label class="pick-label" for=format!("from-{n}") aria-hidden="true">"from"</label>
                </td>
                <td class="pick">
                    <input type="radio" name="to" id=format!("to-{n}") value=n checked=i == 0
                        aria-label=format!("Compare to version {n}")/>
                    <label class="pick-label" for=format!("to-{n}") aria-hidden="true">"to"</label>
                </td>
                <td><a href=href>{format!("v{n}")}</a>
                    {v.is_active.then(|| view! { " " <span class="badge active">"active"</span> })}</td>
                <td><LocalTime at=v.created_at/></td>
                <td>{v.creator_id}</td>
                <td class="message-cell">{v.message.unwrap_or_default()}</td>
                <td><a href=download_href(n) download=format!("berth-config-v{n}.yaml") aria-label=format!("Download version {n} as YAML")>"YAML"</a></td>
            </tr>
        }
    }).collect_view();
    view! {
        <form method="get" action="/config/diff" class="versions-form">
            <div class="table-wrap">
                <table class="versions" data-testid="versions">
                    <thead><tr>
                        <th scope="col" class="pick" title="Pick the older version to compare">"From"</th>
                        <th scope="col" class="pick" title="Pick the newer version to compare">"To"</th>
                        <th scope="col">"Version"</th><th scope="col">"Applied"</th><th scope="col">"By"</th>
                        <th scope="col">"Message"</th><th scope="col">"Download"</th>
                    </tr></thead>
                    <tbody>{rows}</tbody>
                </table>
            </div>
            <div class="pager">
                <button type="submit" class="button primary" data-testid="compare">"Compare selected versions"</button>
                <nav class="pager-links" aria-label="Pages">
                    {(!first).then(|| view! { <a class="button" href="/config/versions">"← Newest"</a> })}
                    {page.next_cursor.map(|c| view! { <a class="button" data-testid="older" href=format!("/config/versions?cursor={c}")>"Older →"</a> })}
                </nav>
            </div>
        </form>
    }
}

/// Two versions and their diff: `(from number, from version or none for 0, to version, diff)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Pair {
    from: i64,
    old: Option<ConfigVersion>,
    new: ConfigVersion,
    diff: ConfigDiff,
}

/// Loads `to` (default: active) and `from` (default: its predecessor; 0 = the empty config).
async fn load_pair(from: Option<i64>, to: Option<i64>) -> Result<Pair, ServerFnError> {
    let new = get_config(to).await?;
    let from = from.unwrap_or(new.version - 1);
    let old = match from {
        0 => None,
        v => Some(get_config(Some(v)).await?),
    };
    let diff = get_diff(Some(from), Some(new.version)).await?;
    Ok(Pair { from, old, new, diff })
}

/// The diff of a pair as a [`DiffView`].
fn pair_view(p: Pair) -> impl IntoView {
    let old_yaml = p.old.as_ref().map(|v| to_canonical_yaml(&v.config)).unwrap_or_default();
    let old_label = match p.from {
        0 => "(empty)".to_string(),
        v => format!("version {v}"),
    };
    view! {
        <DiffView diff=p.diff old_yaml new_yaml=to_canonical_yaml(&p.new.config) old_label new_label=format!("version {}", p.new.version)/>
    }
}

/// `/config/diff?from=A&to=B`.
#[component]
pub fn DiffPage() -> impl IntoView {
    let query = use_query_map();
    let number = move |key: &str| query.read().get(key).and_then(|v| v.trim().parse::<i64>().ok());
    let pair = Resource::new(move || (number("from"), number("to")), |(from, to)| load_pair(from, to));
    view! {
        <header class="page-head">
            <h1>"Compare versions"</h1>
            <a class="button" href="/config/versions">"Version history"</a>
        </header>
        <Suspense fallback=Loading>
            {move || pair.get().map(|result| match result {
                Ok(p) => view! {
                    <form method="get" action="/config/diff" class="card compare-form">
                        <div class="field">
                            <label for="diff-from">"From version"</label>
                            <input type="number" id="diff-from" name="from" min="0" value=p.from/>
                        </div>
                        <div class="field">
                            <label for="diff-to">"To version"</label>
                            <input type="number" id="diff-to" name="to" min="1" value=p.new.version/>
                        </div>
                        <button type="submit" class="button primary">"Compare"</button>
                    </form>
                    <section class="card" data-testid="diff-page">
                        <h2>{format!("Version {} → version {}", p.from, p.new.version)}</h2>
                        {pair_view(p)}
                    </section>
                }.into_any(),
                Err(e) => view! { <ErrorBox message=e.to_string()/> }.into_any(),
            })}
        </Suspense>
    }
}

/// `/config/versions/:version`.
#[component]
pub fn VersionPage() -> impl IntoView {
    let params = use_params_map();
    let version = move || params.read().get("version").and_then(|v| v.parse::<i64>().ok());
    let data = Resource::new(version, |v| async move {
        let Some(v) = v else { return Err(ServerFnError::new("not a version number")) };
        let active = get_config(None).await?.version;
        Ok((load_pair(None, Some(v)).await?, active))
    });
    view! {
        <Suspense fallback=Loading>
            {move || data.get().map(|result| match result {
                Ok((pair, active)) => {
                    let v = pair.new.clone();
                    let n = v.version;
                    view! {
                        <header class="page-head">
                            <div>
                                <h1>{format!("Version {n}")}
                                    {v.is_active.then(|| view! { " " <span class="badge active">"active"</span> })}</h1>
                                <p class="meta">"Applied " <LocalTime at=v.created_at/> " by " <strong>{v.creator_id.clone()}</strong>
                                    {v.message.clone().map(|m| view! { " — " <em>{m}</em> })}</p>
                            </div>
                            <div class="head-actions">
                                <a class="button" href=download_href(n) download=format!("berth-config-v{n}.yaml") data-testid="download">"Download YAML"</a>
                                {(!v.is_active).then(|| view! {
                                    <a class="button" href=format!("/config/diff?from={active}&to={n}")>"Compare with active"</a>
                                })}
                                <a class="button" href="/config/versions">"All versions"</a>
                            </div>
                        </header>
                        {(!v.is_active && super::session::can(crate::auth::Role::Editor)).then(|| view! { <Rollback version=n active/> })}
                        <section class="card">
                            <h2>{if n > 1 { format!("Changes since version {}", n - 1) } else { "Changes from the empty config".to_string() }}</h2>
                            {pair_view(pair)}
                        </section>
                        <details class="card">
                            <summary>"Full config (YAML)"</summary>
                            <pre class="yaml" data-testid="version-yaml">{to_canonical_yaml(&v.config)}</pre>
                        </details>
                    }.into_any()
                }
                Err(e) => view! { <ErrorBox message=e.to_string()/> }.into_any(),
            })}
        </Suspense>
    }
}

/// "Roll back to this version": a confirmation with what it changes against the active
/// version, then a new version that copies this one.
#[component]
fn Rollback(version: i64, active: i64) -> impl IntoView {
    let open = RwSignal::new(false);
    let reason = RwSignal::new(String::new());
    let busy = RwSignal::new(false);
    let failure = RwSignal::new(None::<String>);
    let preview = Resource::new(move || open.get(), move |open| async move {
        if !open {
            return Ok(None);
        }
        Ok::<_, ServerFnError>(Some(load_pair(Some(active), Some(version)).await?))
    });
    let navigate = use_navigate();
    let confirm = move |_| {
        busy.set(true);
        let input = ApplyInput {
            message: Some(reason.get_untracked()).filter(|m| !m.trim().is_empty()),
            expected_active_version: Some(active),
        };
        let navigate = navigate.clone();
        leptos::task::spawn_local(async move {
            let result = rollback_to(version, input).await;
            busy.set(false);
            match result {
                Ok(ApplyOutcome::Applied { version: new, .. }) => navigate(&format!("/config/versions/{new}"), Default::default()),
                Ok(ApplyOutcome::Conflict { active: now, .. }) => failure.set(Some(format!(
                    "Version {now} was applied meanwhile; nothing was rolled back. Reload to review against it."
                ))),
                Ok(ApplyOutcome::Invalid { problems }) => failure.set(Some(format!(
                    "The server refused it: {}",
                    problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
                ))),
                Err(e) => failure.set(Some(e.to_string())),
            }
        });
    };
    view! {
        <section class="card rollback" aria-labelledby="rollback-h">
            <div class="section-head">
                <h2 id="rollback-h">"Roll back"</h2>
                <button type="button" class="button" data-testid="rollback" aria-expanded=move || open.get().to_string()
                    on:click=move |_| open.update(|o| *o = !*o)>{format!("Roll back to version {version}…")}</button>
            </div>
            <Show when=move || open.get()>
                <p class="hint">{format!("This creates version {} as a copy of version {version}. Against the active version {active}, it changes:", active + 1)}</p>
                <Suspense fallback=Loading>
                    {move || preview.get().map(|r| match r {
                        Ok(Some(p)) => pair_view(p).into_any(),
                        Ok(None) => ().into_any(),
                        Err(e) => view! { <ErrorBox message=e.to_string()/> }.into_any(),
                    })}
                </Suspense>
                <div class="field wide">
                    <label for="rollback-reason">"Reason (added to the message)"</label>
                    <input type="text" id="rollback-reason" placeholder="e.g. the new quotas starved the batch queue"
                        prop:value=move || reason.get() on:input=move |ev| reason.set(event_target_value(&ev))/>
                </div>
                {move || failure.get().map(|e| view! { <ErrorBox message=e/> })}
                <div class="row-buttons">
                    <button type="button" class="button" on:click=move |_| open.set(false)>"Cancel"</button>
                    <button type="button" class="button danger" data-testid="confirm-rollback" disabled=move || busy.get()
                        on:click=confirm.clone()>{format!("Roll back: create version {}", active + 1)}</button>
                </div>
            </Show>
        </section>
    }
}
