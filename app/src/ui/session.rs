//! Who is signed in, known synchronously on both sides: the server renders it into a `<meta>`
//! tag from the request's caller, and the browser reads that tag back when it hydrates. The
//! dashboard hides what the user may not do; the server refuses it anyway.

use leptos::prelude::*;
use leptos_meta::Meta;

use crate::auth::{Role, Via, Whoami};

/// Name of the `<meta>` tag carrying the session.
const META: &str = "berth-session";

#[derive(Debug, Clone)]
struct Session(Option<Whoami>);

/// Finds the signed-in user and provides it to every page.
pub fn provide_session() {
    provide_context(Session(current()));
}

#[cfg(feature = "ssr")]
fn current() -> Option<Whoami> {
    use_context::<super::backend::SharedBackend>().and_then(|b| b.whoami())
}

#[cfg(feature = "hydrate")]
fn current() -> Option<Whoami> {
    let tag = document().query_selector(&format!("meta[name={META}]")).ok()??;
    serde_json::from_str(&tag.get_attribute("content")?).ok()
}

#[cfg(not(any(feature = "ssr", feature = "hydrate")))]
fn current() -> Option<Whoami> {
    None
}

/// The signed-in user, if any.
pub fn me() -> Option<Whoami> {
    use_context::<Session>().and_then(|s| s.0)
}

/// Whether the signed-in user's role includes `role`.
pub fn can(role: Role) -> bool {
    me().is_some_and(|m| m.role.allows(role))
}

/// Whether the signed-in user may cancel or re-prioritise a job of `submitter`.
pub fn may_act_on(submitter: &str) -> bool {
    me().is_some_and(|m| m.may_act_on(submitter))
}

/// "Signed in as ann (editor): recorded as the author." for forms that record who acted.
pub fn signed_in_as() -> String {
    match me() {
        Some(m) if m.via == Via::Anonymous => "Anonymous local mode: recorded as `anonymous`.".into(),
        Some(m) => format!("Signed in as {} ({}): recorded as the author.", m.user, m.role),
        None => "Not signed in.".into(),
    }
}

/// The session as a `<meta>` tag (for the browser) and the header's user menu.
#[component]
pub fn UserMenu() -> impl IntoView {
    let me = me();
    let json = serde_json::to_string(&me).unwrap_or_default();
    let menu = match me {
        Some(m) if m.via == Via::Anonymous => view! {
            <span class="user-menu" data-testid="user-menu">
                <span class="user-name" title="Started with --anonymous: everyone on this machine is an admin">"anonymous · local mode"</span>
            </span>
        }
        .into_any(),
        Some(m) => view! {
            <span class="user-menu" data-testid="user-menu">
                <span class="user-name">{m.user.clone()}</span>
                <span class=format!("badge role {}", m.role)>{m.role.to_string()}</span>
                <form method="post" action="/auth/signout" class="signout">
                    <button type="submit" class="small">"Sign out"</button>
                </form>
            </span>
        }
        .into_any(),
        None => view! { <a class="user-menu" href="/signin">"Sign in"</a> }.into_any(),
    };
    view! {
        <Meta name=META content=json/>
        {menu}
    }
}
