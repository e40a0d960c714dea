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
use leptos_router::Lazy;
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

/// The pages come in four groups (queues, jobs, admin and history, the config editor), each a
/// lazy route: the browser fetches a group's code (a wasm chunk that `wasm-split-cli` cuts out
/// at build time) the first time one of its pages is shown, so a first visit loads the shell
/// and one group rather than the whole dashboard.
/// Few groups keep the chunks few: wasm-split also cuts out the code each set of groups shares.
///
/// A group also names the paths its pages live under, so the browser can load the group of
/// the page the server rendered before it hydrates ([`load_page_group`]); every route in
/// [`App`] must lie under its group's paths (`page_groups_cover_their_routes` checks it).
macro_rules! page_groups {
    ($($group:ident: $kind:ident under [$($under:literal),*] { $($route:ident => $page:ident),* $(,)? })*) => {
        mod lazy {
            use leptos::prelude::*;
            $(
                #[derive(Clone, Copy)]
                pub enum $kind { $($route),* }

                pub mod $group {
                    use leptos::prelude::*;

                    /// The group's pages: its own wasm chunk in the browser.
                    #[leptos::lazy($group)]
                    pub fn show(page: super::$kind) -> AnyView {
                        match page {
                            $(super::$kind::$route => view! { <super::super::$page/> }.into_any(),)*
                        }
                    }

                    /// Whether `path` is one of the group's pages.
                    #[cfg(any(feature = "hydrate", test))]
                    pub fn covers(path: &str) -> bool {
                        [$($under),*].iter().any(|under| super::super::lies_under(path, under))
                    }
                }

                $(
                    pub struct $route;
                    impl leptos_router::LazyRoute for $route {
                        fn data() -> Self {
                            $route
                        }
                        async fn view(_this: Self) -> AnyView {
                            $group::show($kind::$route).await
                        }
                    }
                )*
            )*

            /// The group `path` belongs to, by name: the first whose paths cover it.
            #[cfg(any(feature = "hydrate", test))]
            pub fn group_of(path: &str) -> Option<&'static str> {
                $(
                    if $group::covers(path) {
                        return Some(stringify!($group));
                    }
                )*
                None
            }

            /// Loads the code of the group `path` belongs to (nothing for a path in none).
            #[cfg(feature = "hydrate")]
            pub async fn load_group_of(path: &str) {
                let group = group_of(path);
                $(
                    if group == Some(stringify!($group)) {
                        return $group::__preload_show().await;
                    }
                )*
            }
        }
    };
}

page_groups! {
    queue_pages: QueuePages under ["/", "/queues", "/cohorts", "/history", "/usage"] {
        Overview => OverviewPage, Queue => QueuePage, Cohort => CohortPage, History => HistoryPage, Usage => AccountingPage,
    }
    job_pages: JobPages under ["/jobs", "/stages", "/events"] {
        Jobs => JobsPage, Job => JobPage, Submit => SubmitPage, Stage => StagePage, Events => EventsPage,
    }
    // The config's version history sits with the admin pages, not the editor: like the audit
    // log it is read now and then, and the editor's first visit is lighter without it. Listed
    // before the editor's group, whose "/config" covers these paths too.
    admin_pages: AdminPages under ["/signin", "/admin", "/config/versions", "/config/diff"] {
        SignIn => SignInPage, Tokens => TokensPage, AuditLog => AuditLogPage, Versions => VersionsPage, Version => VersionPage, Diff => DiffPage,
    }
    config_pages: ConfigPages under ["/config"] {
        Config => ConfigPage,
    }
}

/// `path` is `under` or below it (`/` only itself).
#[cfg(any(feature = "hydrate", test))]
fn lies_under(path: &str, under: &str) -> bool {
    let path = path.split(['?', '#']).next().unwrap_or(path);
    if under == "/" {
        return path == "/";
    }
    path == under || path.strip_prefix(under).is_some_and(|rest| rest.starts_with('/'))
}

/// Loads the code of the page group of the page shown (the server preloads its chunks), so
/// hydration finds it ready and runs in one go. Call before hydrating.
#[cfg(feature = "hydrate")]
pub async fn load_page_group() {
    let path = window().location().pathname().unwrap_or_default();
    lazy::load_group_of(&path).await;
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
                    <Route path=path!("/") view={Lazy::<lazy::Overview>::new()}/>
                    <Route path=path!("/queues/:name") view={Lazy::<lazy::Queue>::new()}/>
                    <Route path=path!("/cohorts/:name") view={Lazy::<lazy::Cohort>::new()}/>
                    <Route path=path!("/jobs") view={Lazy::<lazy::Jobs>::new()}/>
                    <Route path=path!("/jobs/new") view={Lazy::<lazy::Submit>::new()}/>
                    <Route path=path!("/jobs/:id") view={Lazy::<lazy::Job>::new()}/>
                    <Route path=path!("/events") view={Lazy::<lazy::Events>::new()}/>
                    <Route path=path!("/history") view={Lazy::<lazy::History>::new()}/>
                    <Route path=path!("/usage") view={Lazy::<lazy::Usage>::new()}/>
                    <Route path=path!("/stages/:id") view={Lazy::<lazy::Stage>::new()}/>
                    <Route path=path!("/config") view={Lazy::<lazy::Config>::new()}/>
                    <Route path=path!("/config/versions") view={Lazy::<lazy::Versions>::new()}/>
                    <Route path=path!("/config/versions/:version") view={Lazy::<lazy::Version>::new()}/>
                    <Route path=path!("/config/diff") view={Lazy::<lazy::Diff>::new()}/>
                    <Route path=path!("/signin") view={Lazy::<lazy::SignIn>::new()}/>
                    <Route path=path!("/admin/tokens") view={Lazy::<lazy::Tokens>::new()}/>
                    <Route path=path!("/admin/audit") view={Lazy::<lazy::AuditLog>::new()}/>
                </Routes>
            </main>
        </Router>
    }
}

#[cfg(test)]
mod tests {
    use super::lazy::group_of;

    #[test]
    fn page_groups_cover_their_routes() {
        for (path, group) in [
            ("/", "queue_pages"),
            ("/queues/vision", "queue_pages"),
            ("/cohorts/research", "queue_pages"),
            ("/history?range=1h", "queue_pages"),
            ("/usage", "queue_pages"),
            ("/jobs", "job_pages"),
            ("/jobs/new", "job_pages"),
            ("/jobs/j-1", "job_pages"),
            ("/stages/s-1", "job_pages"),
            ("/events", "job_pages"),
            ("/config", "config_pages"),
            ("/config/versions", "admin_pages"),
            ("/config/versions/3", "admin_pages"),
            ("/config/diff?from=1&to=2", "admin_pages"),
            ("/signin", "admin_pages"),
            ("/admin/tokens", "admin_pages"),
            ("/admin/audit", "admin_pages"),
        ] {
            assert_eq!(group_of(path), Some(group), "{path}");
        }
        for nowhere in ["/nowhere", "/jobsx", "/configure"] {
            assert_eq!(group_of(nowhere), None, "{nowhere}");
        }
    }
}
