//! The top bar: the brand, the main navigation and who is signed in. On a narrow screen the
//! navigation folds into a "Menu" button that opens it as a list under the bar, so every
//! destination stays reachable; it closes again when a page is chosen (or on Escape).

use leptos::prelude::*;
use leptos_router::components::A;

use super::session;
use crate::auth::Role;

#[component]
pub fn TopBar() -> impl IntoView {
    let open = RwSignal::new(false);
    view! {
        <header class="topbar" on:keydown=move |ev| if ev.key() == "Escape" { open.set(false) }>
            <a class="brand" href="/">"⚓ Berth"</a>
            <button type="button" class="menu-toggle" aria-controls="mainnav" aria-expanded=move || open.get().to_string()
                data-testid="menu-toggle" on:click=move |_| open.update(|o| *o = !*o)>
                {move || if open.get() { "Close menu" } else { "Menu" }}
            </button>
            // Choosing a page closes the menu.
            <nav class="mainnav" id="mainnav" aria-label="Main" class:open=move || open.get() on:click=move |_| open.set(false)>
                <A href="/" exact=true>"Overview"</A>
                <A href="/jobs">"Jobs"</A>
                <A href="/events">"Events"</A>
                <A href="/history">"Usage"</A>
                <A href="/usage">"Accounting"</A>
                <A href="/config">"Config"</A>
                {session::can(Role::Admin).then(|| view! { <A href="/admin/tokens">"Admin"</A> })}
            </nav>
            <session::UserMenu/>
        </header>
    }
}
