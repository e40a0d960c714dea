//! The Leptos dashboard: the shell, the router and one module per page.

mod accounting;
mod admin;
#[cfg(feature = "ssr")]
pub mod backend;
#[cfg(feature = "hydrate")]
mod bench;
#[cfg(feature = "ssr")]
mod charts;
mod chart;
mod cohort;
mod diff_view;
mod editor;
mod events;
pub mod files;
mod history;
mod job_detail;
mod json_text;
mod jobs_list;
mod live;
mod nav;
mod overview;
mod queue;
mod reason;
pub mod scripts;
pub mod server_fns;
mod session;
mod stage;
mod submit;
mod versions;
mod widgets;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, Title};
#[cfg(feature = "ssr")]
use leptos_meta::MetaTags;
use leptos_router::components::{Route, Router, Routes};
use leptos_router::path;

use accounting::AccountingPage;
use admin::{AuditLogPage, SignInPage, TokensPage};
use cohort::CohortPage;
use editor::ConfigPage;
use events::EventsPage;
use history::HistoryPage;
use job_detail::JobPage;
use jobs_list::JobsPage;
use overview::OverviewPage;
use queue::QueuePage;
use stage::StagePage;
use submit::SubmitPage;
use versions::{DiffPage, VersionPage, VersionsPage};

/// `s` for a URL query value (RFC 3986 unreserved characters kept, the rest %-encoded).
pub fn urlencode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The HTML document around the app, rendered on the server. The stylesheet, the wasm and
/// its glue are linked by their content-hashed names (`files`); the module script starts
/// the wasm, which hydrates the page. ECharts and the YAML editor are not loaded here: the
/// pages that need them load them (`scripts`).
#[cfg(feature = "ssr")]
pub fn shell(_options: LeptosOptions) -> impl IntoView {
    let names = use_context::<files::FileNames>().unwrap_or_default();
    let nonce = leptos::nonce::use_nonce();
    let (js, wasm) = (names.url("berth.js"), names.url("berth_bg.wasm"));
    let start = format!("import init, {{ hydrate }} from {js:?};\ninit({{ module_or_path: {wasm:?} }}).then(hydrate);");
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="icon" href="data:,"/>
                <link rel="stylesheet" href=names.url("berth.css")/>
                <link rel="modulepreload" href=js/>
                <link rel="preload" href=wasm r#as="fetch" r#type="application/wasm" crossorigin=""/>
                <script type="application/json" id=files::FILES_ELEMENT_ID nonce=nonce.clone()>{names.to_json()}</script>
                <script type="module" nonce=nonce>{start}</script>
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
    session::provide_session();
    live::provide_live();
    // Marks the page as interactive once the wasm has taken over (tests wait for it).
    Effect::new(move |_| {
        if let Some(body) = document().body() {
            let _ = body.set_attribute("data-hydrated", "true");
        }
    });
    view! {
        <Title text="Berth"/>
        <Router>
            <nav::TopBar/>
            <main class="page">
                <Routes fallback=|| view! { <div class="card"><h1>"Not found"</h1><p>"There is no page here."</p><a href="/">"Back to the dashboard"</a></div> }>
                    <Route path=path!("/") view=OverviewPage/>
                    <Route path=path!("/queues/:name") view=QueuePage/>
                    <Route path=path!("/cohorts/:name") view=CohortPage/>
                    <Route path=path!("/jobs") view=JobsPage/>
                    <Route path=path!("/jobs/new") view=SubmitPage/>
                    <Route path=path!("/jobs/:id") view=JobPage/>
                    <Route path=path!("/events") view=EventsPage/>
                    <Route path=path!("/history") view=HistoryPage/>
                    <Route path=path!("/usage") view=AccountingPage/>
                    <Route path=path!("/stages/:id") view=StagePage/>
                    <Route path=path!("/config") view=ConfigPage/>
                    <Route path=path!("/config/versions") view=VersionsPage/>
                    <Route path=path!("/config/versions/:version") view=VersionPage/>
                    <Route path=path!("/config/diff") view=DiffPage/>
                    <Route path=path!("/signin") view=SignInPage/>
                    <Route path=path!("/admin/tokens") view=TokensPage/>
                    <Route path=path!("/admin/audit") view=AuditLogPage/>
                </Routes>
            </main>
        </Router>
    }
}
