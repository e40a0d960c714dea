//! Version history: the list (newest first, paged) and one version with its diff against
//! its predecessor.

use leptos::prelude::*;
use leptos_router::hooks::{use_params_map, use_query_map};

use super::server_fns::{get_config, get_diff, list_versions};
use super::widgets::{ErrorBox, Loading, LocalTime};
use crate::api::VersionPage;
use crate::config::diff::ConfigDiff;
use crate::config::yaml::to_canonical_yaml;

/// Versions shown per page.
const PAGE: i64 = 20;

/// `/config/versions?cursor=N`.
#[component]
pub fn VersionsPage() -> impl IntoView {
    let query = use_query_map();
    let cursor = move || query.read().get("cursor");
    let page = Resource::new(cursor, |cursor| list_versions(cursor, PAGE));
    view! {
        <header class="page-head">
            <h1>"Version history"</h1>
            <a class="button" href="/config">"Active config"</a>
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

#[component]
fn VersionTable(page: VersionPage, first: bool) -> impl IntoView {
    let rows = page.versions.into_iter().map(|v| {
        let href = format!("/config/versions/{}", v.version);
        view! {
            <tr class:active=v.is_active data-testid="version-row">
                <td><a href=href>{format!("v{}", v.version)}</a>
                    {v.is_active.then(|| view! { " " <span class="badge active">"active"</span> })}</td>
                <td><LocalTime at=v.created_at/></td>
                <td>{v.creator_id}</td>
                <td class="message-cell">{v.message.unwrap_or_default()}</td>
            </tr>
        }
    }).collect_view();
    view! {
        <div class="table-wrap">
            <table class="versions" data-testid="versions">
                <thead><tr><th scope="col">"Version"</th><th scope="col">"Applied"</th><th scope="col">"By"</th><th scope="col">"Message"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
        <nav class="pager" aria-label="Pages">
            {(!first).then(|| view! { <a class="button" href="/config/versions">"← Newest"</a> })}
            {page.next_cursor.map(|c| view! { <a class="button" data-testid="older" href=format!("/config/versions?cursor={c}")>"Older →"</a> })}
        </nav>
    }
}

/// `/config/versions/:version`.
#[component]
pub fn VersionPage() -> impl IntoView {
    let params = use_params_map();
    let version = move || params.read().get("version").and_then(|v| v.parse::<i64>().ok());
    let data = Resource::new(version, |v| async move {
        let Some(v) = v else { return Err(ServerFnError::new("not a version number")) };
        Ok((get_config(Some(v)).await?, get_diff(None, Some(v)).await?))
    });
    view! {
        <Suspense fallback=Loading>
            {move || data.get().map(|result| match result {
                Ok((v, diff)) => view! {
                    <header class="page-head">
                        <div>
                            <h1>{format!("Version {}", v.version)}
                                {v.is_active.then(|| view! { " " <span class="badge active">"active"</span> })}</h1>
                            <p class="meta">"Applied " <LocalTime at=v.created_at/> " by " <strong>{v.creator_id.clone()}</strong>
                                {v.message.clone().map(|m| view! { " — " <em>{m}</em> })}</p>
                        </div>
                        <a class="button" href="/config/versions">"All versions"</a>
                    </header>
                    <div class="columns">
                        <section class="card">
                            <h2>"Config (YAML)"</h2>
                            <pre class="yaml">{to_canonical_yaml(&v.config)}</pre>
                        </section>
                        <section class="card">
                            <h2>{format!("Changes since version {}", v.version - 1)}</h2>
                            <DiffView diff/>
                        </section>
                    </div>
                }.into_any(),
                Err(e) => view! { <ErrorBox message=e.to_string()/> }.into_any(),
            })}
        </Suspense>
    }
}

/// The structural changes as sentences, then the unified YAML diff.
#[component]
fn DiffView(diff: ConfigDiff) -> impl IntoView {
    if diff.identical {
        return view! { <p class="hint">"No changes: this version equals its predecessor."</p> }.into_any();
    }
    let lines = diff.unified.lines().map(|line| {
        let class = match line.chars().next() {
            Some('+') if !line.starts_with("+++") => "diff-line ins",
            Some('-') if !line.starts_with("---") => "diff-line del",
            Some('@') => "diff-line hunk",
            _ => "diff-line",
        };
        view! { <span class=class>{line.to_string()}"\n"</span> }
    }).collect_view();
    view! {
        <ul class="changes" data-testid="changes">
            {diff.changes.into_iter().map(|c| view! {
                <li><span class=format!("kind {:?}", c.kind).to_lowercase()>{format!("{:?}", c.kind).to_lowercase()}</span>
                    " " {c.summary}</li>
            }).collect_view()}
        </ul>
        <pre class="diff" data-testid="unified-diff">{lines}</pre>
    }.into_any()
}
