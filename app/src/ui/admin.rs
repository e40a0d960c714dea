//! `/signin`, and the admin pages: `/admin/tokens` (create, shown once; revoke) and
//! `/admin/audit` (who changed what). The server refuses non-admins whatever the page shows.

use leptos::prelude::*;
use leptos_router::components::Form;
use leptos_router::hooks::use_query_map;

use super::session::me;
use super::server_fns::{create_token, list_audit, list_tokens, revoke_token};
use super::jobs_list::options;
use super::widgets::{ErrorBox, Loading, LocalTime, Pager};
use crate::auth::{AuditPage, CreatedToken, Role, TokenInfo, AUDIT_ACTIONS};

/// The sign-in form: paste an API token. A plain form posted to `/auth/signin`, so it works
/// before (and without) the wasm.
#[component]
pub fn SignInPage() -> impl IntoView {
    let query = use_query_map();
    let next = move || query.read().get("next").unwrap_or_else(|| "/".into());
    let error = move || {
        query.read().get("error").map(|e| match e.as_str() {
            "empty" => "Paste your API token first.".to_string(),
            _ => "That token is not valid: it is unknown or has been revoked.".to_string(),
        })
    };
    view! {
        <section class="card signin" aria-labelledby="signin-h">
            <h1 id="signin-h">"Sign in to Berth"</h1>
            {move || me().map(|m| view! { <p class="hint" data-testid="signed-in">{format!("You are signed in as {} ({}).", m.user, m.role)}</p> })}
            <form method="post" action="/auth/signin">
                <input type="hidden" name="next" prop:value=next/>
                <div class="field wide">
                    <label for="signin-token">"API token"</label>
                    <input id="signin-token" name="token" type="password" autocomplete="current-password" required
                        aria-describedby="signin-hint" aria-invalid=move || error().is_some().to_string()/>
                    <span class="field-hint" id="signin-hint">"An admin creates tokens with "<code>"berth tokens create"</code>" or on the Tokens page. The first admin token is printed when the server first starts."</span>
                </div>
                {move || error().map(|e| view! { <p class="error-box" role="alert" data-testid="signin-error">{e}</p> })}
                <button type="submit" class="button primary">"Sign in"</button>
            </form>
        </section>
    }
}

/// Refuses to render an admin page for anyone else (the server would refuse the data too).
fn admin_only() -> Option<AnyView> {
    if super::session::can(Role::Admin) {
        return None;
    }
    Some(view! { <section class="card"><h1>"Admins only"</h1><p>"This page is for admins. Ask one if you need a token or the audit log."</p></section> }.into_any())
}

#[component]
pub fn TokensPage() -> impl IntoView {
    if let Some(refusal) = admin_only() {
        return refusal;
    }
    let changed = RwSignal::new(0u32);
    let tokens = Resource::new(move || changed.get(), |_| list_tokens());
    let created = RwSignal::new(None::<CreatedToken>);
    view! {
        <header class="page-head">
            <h1>"API tokens"</h1>
            <nav class="head-actions"><a class="button" href="/admin/audit">"Audit log"</a></nav>
        </header>
        <CreateToken created changed/>
        {move || created.get().map(|c| view! {
            <section class="card secret" role="status" data-testid="new-secret">
                <h2>{format!("Token for {} ({})", c.token.user, c.token.role)}</h2>
                <p>"Copy it now: it is shown only once and Berth keeps only its hash."</p>
                <pre class="log mono" data-testid="secret">{c.secret.clone()}</pre>
                <button type="button" class="button" on:click=move |_| created.set(None)>"I have copied it"</button>
            </section>
        })}
        <section class="card">
            <Transition fallback=Loading>
                {move || tokens.get().map(|r| match r {
                    Ok(list) => view! { <TokenTable list changed/> }.into_any(),
                    Err(e) => view! { <ErrorBox message=e.to_string()/> }.into_any(),
                })}
            </Transition>
        </section>
    }
    .into_any()
}

#[component]
fn CreateToken(created: RwSignal<Option<CreatedToken>>, changed: RwSignal<u32>) -> impl IntoView {
    let user = RwSignal::new(String::new());
    let role = RwSignal::new("submitter".to_string());
    let label = RwSignal::new(String::new());
    let error = RwSignal::new(None::<String>);
    let create = Action::new(move |(user, role, label): &(String, Role, String)| {
        let (user, role, label) = (user.clone(), *role, label.clone());
        async move { create_token(user, role, Some(label).filter(|l| !l.trim().is_empty())).await }
    });
    Effect::new(move |_| match create.value().get() {
        Some(Ok(c)) => {
            created.set(Some(c));
            error.set(None);
            user.set(String::new());
            label.set(String::new());
            changed.update(|n| *n += 1);
        }
        Some(Err(e)) => error.set(Some(e.to_string())),
        None => {}
    });
    let user_problem = move || {
        let u = user.get();
        (!u.is_empty()).then(|| crate::auth::check_user(&u).err()).flatten()
    };
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let u = user.get_untracked().trim().to_string();
        if let Err(e) = crate::auth::check_user(&u) {
            error.set(Some(e));
            return;
        }
        let r = Role::parse(&role.get_untracked()).unwrap_or(Role::Viewer);
        create.dispatch((u, r, label.get_untracked()));
    };
    let roles: Vec<(&str, &str)> = Role::ALL.iter().map(|r| (r.as_str(), r.as_str())).collect();
    let role_hint = move || match role.get().as_str() {
        "viewer" => "Reads everything.",
        "submitter" => "Also submits jobs and cancels or re-prioritises its own.",
        "editor" => "Also applies and rolls back the config.",
        _ => "Everything: tokens, the audit log, everyone's jobs.",
    };
    view! {
        <section class="card" aria-labelledby="new-token-h">
            <h2 id="new-token-h">"New token"</h2>
            <form class="filters" on:submit=on_submit>
                <div class="field">
                    <label for="t-user">"User"</label>
                    <input id="t-user" required placeholder="ann" prop:value=move || user.get()
                        aria-invalid=move || user_problem().is_some().to_string() aria-describedby="t-user-problem"
                        on:input=move |ev| user.set(event_target_value(&ev))/>
                    <span class="field-problem" id="t-user-problem">{user_problem}</span>
                </div>
                <div class="field">
                    <label for="t-role">"Role"</label>
                    <select id="t-role" aria-describedby="t-role-hint" on:change=move |ev| role.set(event_target_value(&ev))>{options(&roles, "submitter")}</select>
                    <span class="field-hint" id="t-role-hint">{role_hint}</span>
                </div>
                <div class="field">
                    <label for="t-label">"Label"</label>
                    <input id="t-label" placeholder="laptop, CI…" prop:value=move || label.get() on:input=move |ev| label.set(event_target_value(&ev))/>
                </div>
                <div class="filter-actions">
                    <button type="submit" class="button primary" data-testid="create-token" disabled=move || create.pending().get()>"Create token"</button>
                </div>
            </form>
            {move || error.get().map(|e| view! { <p class="error-box" role="alert">{e}</p> })}
        </section>
    }
}

#[component]
fn TokenTable(list: Vec<TokenInfo>, changed: RwSignal<u32>) -> impl IntoView {
    let confirming = RwSignal::new(None::<String>);
    let error = RwSignal::new(None::<String>);
    let revoke = Action::new(move |id: &String| {
        let id = id.clone();
        async move { revoke_token(id).await }
    });
    Effect::new(move |_| match revoke.value().get() {
        Some(Ok(_)) => {
            confirming.set(None);
            changed.update(|n| *n += 1);
        }
        Some(Err(e)) => error.set(Some(e.to_string())),
        None => {}
    });
    let rows = list
        .into_iter()
        .map(|t| {
            let id = t.id.clone();
            let revoked = t.revoked_at.is_some();
            let question = format!("Revoke the token of {} at once? ", t.user);
            let status = match (t.revoked_at, &t.revoked_by) {
                (Some(at), by) => view! { <span class="badge error">"revoked"</span>" "<LocalTime at/>{by.clone().map(|b| format!(" by {b}"))} }.into_any(),
                (None, _) => view! { <span class="badge ok">"active"</span> }.into_any(),
            };
            let action = (!revoked).then(|| {
                let (a, b, c) = (id.clone(), id.clone(), id.clone());
                view! {
                    <Show when=move || confirming.get().as_deref() == Some(a.as_str()) fallback=move || {
                        let b = b.clone();
                        view! { <button type="button" class="button danger small" data-testid="revoke" on:click=move |_| confirming.set(Some(b.clone()))>"Revoke…"</button> }
                    }>
                        {
                            let c = c.clone();
                            view! {
                                <span class="confirm" role="group" aria-label="Confirm revoke">
                                    {question.clone()}
                                    <button type="button" class="button danger small" data-testid="confirm-revoke"
                                        on:click=move |_| { revoke.dispatch(c.clone()); }>"Yes, revoke"</button>
                                    <button type="button" class="button small" on:click=move |_| confirming.set(None)>"Keep"</button>
                                </span>
                            }
                        }
                    </Show>
                }
            });
            view! {
                <tr data-testid="token" data-id=t.id.clone() data-revoked=revoked.to_string()>
                    <td data-label="id" class="mono">{t.id.clone()}</td>
                    <td data-label="user">{t.user.clone()}</td>
                    <td data-label="role"><span class=format!("badge role {}", t.role)>{t.role.to_string()}</span></td>
                    <td data-label="label">{t.label.clone().unwrap_or_default()}</td>
                    <td data-label="created"><LocalTime at=t.created_at/>{format!(" by {}", t.created_by)}</td>
                    <td data-label="last used">{t.last_used_at.map(|at| view! { <LocalTime at/> })}</td>
                    <td data-label="status">{status}</td>
                    <td>{action}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        {move || error.get().map(|e| view! { <p class="error-box" role="alert">{e}</p> })}
        <div class="table-wrap">
            <table class="jobs tokens" data-testid="tokens">
                <thead><tr>
                    <th scope="col">"Token"</th><th scope="col">"User"</th><th scope="col">"Role"</th><th scope="col">"Label"</th>
                    <th scope="col">"Created"</th><th scope="col">"Last used"</th><th scope="col">"Status"</th><th scope="col"><span class="sr-only">"Actions"</span></th>
                </tr></thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
    }
}

#[component]
pub fn AuditLogPage() -> impl IntoView {
    if let Some(refusal) = admin_only() {
        return refusal;
    }
    let query = use_query_map();
    let value = move |k: &str| query.read().get(k).unwrap_or_default();
    let api_query = move || {
        let mut parts = vec!["max_items=50".to_string()];
        for key in ["action", "actor", "cursor"] {
            let v = value(key);
            if !v.is_empty() {
                parts.push(format!("{key}={}", super::urlencode(&v)));
            }
        }
        parts.join("&")
    };
    let live = super::live::use_live();
    let page = Resource::new(move || (live.tick.get(), api_query()), |(_, q)| list_audit(q));
    let mut actions: Vec<(String, String)> = vec![(String::new(), "all actions".into())];
    actions.extend(AUDIT_ACTIONS.iter().map(|a| (a.to_string(), a.to_string())));
    view! {
        <header class="page-head">
            <h1>"Audit log"</h1>
            <nav class="head-actions"><a class="button" href="/admin/tokens">"Tokens"</a></nav>
        </header>
        <section class="card">
            <Form method="GET" action="/admin/audit" attr:class="filters">
                <div class="field">
                    <label for="a-action">"Action"</label>
                    <select id="a-action" name="action">{move || options(&actions, &value("action"))}</select>
                </div>
                <div class="field">
                    <label for="a-actor">"Actor"</label>
                    <input id="a-actor" name="actor" placeholder="user id" prop:value=move || value("actor")/>
                </div>
                <div class="filter-actions"><button type="submit" class="button primary">"Apply filters"</button></div>
            </Form>
        </section>
        <section class="card">
            <Transition fallback=Loading>
                {move || page.get().map(|r| match r {
                    Ok(p) => view! { <AuditTable page=p first=value("cursor").is_empty() action=value("action") actor=value("actor")/> }.into_any(),
                    Err(e) => view! { <ErrorBox message=e.to_string()/> }.into_any(),
                })}
            </Transition>
        </section>
    }
    .into_any()
}

#[component]
fn AuditTable(page: AuditPage, first: bool, action: String, actor: String) -> impl IntoView {
    if page.entries.is_empty() {
        return view! { <p class="hint" data-testid="no-audit">"Nothing audited matches these filters."</p> }.into_any();
    }
    let keep = format!("action={}&actor={}", super::urlencode(&action), super::urlencode(&actor));
    let older = page.next_cursor.map(|c| format!("/admin/audit?{keep}&cursor={c}"));
    let rows = page
        .entries
        .into_iter()
        .map(|e| {
            let target = if e.target.starts_with("j-") {
                view! { <a class="mono" href=format!("/jobs/{}", e.target)>{e.target.clone()}</a> }.into_any()
            } else if let Some(v) = e.target.strip_prefix("version ") {
                view! { <a href=format!("/config/versions/{v}")>{e.target.clone()}</a> }.into_any()
            } else {
                view! { <span class="mono">{e.target.clone()}</span> }.into_any()
            };
            view! {
                <tr data-testid="audit-entry" data-action=e.action.clone()>
                    <td data-label="when"><LocalTime at=e.at/></td>
                    <td data-label="who">{e.actor.clone()}</td>
                    <td data-label="action"><span class="badge role">{e.action.clone()}</span></td>
                    <td data-label="target">{target}</td>
                    <td data-label="what">{e.detail.clone()}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <div class="table-wrap">
            <table class="jobs audit" data-testid="audit">
                <thead><tr><th scope="col">"When"</th><th scope="col">"Who"</th><th scope="col">"Action"</th><th scope="col">"Target"</th><th scope="col">"What"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
        <Pager note="Newest first." newest=(!first).then(|| format!("/admin/audit?{keep}")) older/>
    }
    .into_any()
}
