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
mod history;
mod job_detail;
mod jobs_list;
mod live;
mod overview;
mod queue;
mod reason;
pub mod server_fns;
mod session;
mod stage;
mod submit;
mod versions;
mod widgets;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::components::{Route, Router, Routes, A};
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

/// The HTML document around the app, rendered on the server.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="icon" href="data:,"/>
                // ECharts draws the charts; served by the app itself, never from a CDN.
                <script defer src="/pkg/echarts.min.js"></script>
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
    session::provide_session();
    live::provide_live();
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
                    <A href="/" exact=true>"Overview"</A>
                    <A href="/jobs">"Jobs"</A>
                    <A href="/events">"Events"</A>
                    <A href="/history">"Usage"</A>
                    <A href="/usage">"Accounting"</A>
                    <A href="/config">"Config"</A>
                    {session::can(crate::auth::Role::Admin).then(|| view! { <A href="/admin/tokens">"Admin"</A> })}
                </nav>
                <session::UserMenu/>
            </header>
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
