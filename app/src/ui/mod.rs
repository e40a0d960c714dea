//! The Leptos dashboard: the shell, the router and one module per page.

#[cfg(feature = "ssr")]
pub mod backend;
#[cfg(feature = "hydrate")]
mod bench;
mod diff_view;
mod editor;
pub mod server_fns;
mod versions;
mod widgets;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::components::{Route, Router, Routes, A};
use leptos_router::path;

use editor::ConfigPage;
use versions::{DiffPage, VersionPage, VersionsPage};

/// The HTML document around the app, rendered on the server.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="icon" href="data:,"/>
                <HydrationScripts options/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// The root component: navigation and routes.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    // Marks the page as interactive once the wasm has taken over (tests wait for it).
    Effect::new(move |_| {
        if let Some(body) = document().body() {
            let _ = body.set_attribute("data-hydrated", "true");
        }
    });
    view! {
        <Stylesheet id="leptos" href="/pkg/berth.css"/>
        <Title text="Berth"/>
        <Router>
            <header class="topbar">
                <a class="brand" href="/">"⚓ Berth"</a>
                <nav class="mainnav" aria-label="Main">
                    <A href="/config" exact=true>"Config"</A>
                    <A href="/config/versions">"History"</A>
                    <A href="/config/diff">"Compare"</A>
                </nav>
            </header>
            <main class="page">
                <Routes fallback=|| view! { <div class="card"><h1>"Not found"</h1><p>"There is no page here."</p><a href="/">"Back to the dashboard"</a></div> }>
                    <Route path=path!("/") view=ConfigPage/>
                    <Route path=path!("/config") view=ConfigPage/>
                    <Route path=path!("/config/versions") view=VersionsPage/>
                    <Route path=path!("/config/versions/:version") view=VersionPage/>
                    <Route path=path!("/config/diff") view=DiffPage/>
                </Routes>
            </main>
        </Router>
    }
}
