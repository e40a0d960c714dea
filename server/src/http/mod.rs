//! The HTTP surface: the REST API under `/api/v1`, the Anyscale scheduler API under
//! `/api/v2` (`anyscale`), Ray's job API (`ray_api`), health checks, Prometheus `/metrics`,
//! and the dashboard.
//!
//! [`router`] builds the whole thing so tests can drive it in-process with `oneshot`.

pub mod anyscale;
pub mod assets;
pub mod auth;
pub mod body;
pub mod config;
pub mod dashboard;
pub mod error;
pub mod follow;
pub mod logmux;
pub mod identity;
pub mod jobs;
pub mod metrics;
pub mod openapi;
pub mod preview;
pub mod ray_api;
pub mod runs;
pub mod stream;
pub mod workflows;

use std::time::Duration;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use leptos::config::LeptosOptions;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

use crate::state::AppState;
use error::ApiError;

/// The REST API, the sign-in form targets and health checks, without the dashboard (and
/// without authentication: [`router`] puts it in front of everything).
pub(crate) fn api_routes(state: AppState) -> Router {
    let v1 = Router::new()
        .nest("/scheduler/config", config::routes())
        .merge(jobs::routes())
        .merge(workflows::routes())
        .merge(runs::routes())
        .merge(auth::routes())
        .merge(stream::routes())
        .merge(openapi::routes())
        .fallback(|| async { ApiError::not_found("no such API endpoint") });
    let v2 = anyscale::routes().fallback(|| async { ApiError::not_found("no such API endpoint") });
    Router::new()
        .nest("/api/v1", v1)
        .nest("/api/v2", v2)
        .merge(jobs::mlumina_routes())
        .merge(ray_api::routes())
        .merge(auth::session_routes())
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics::scrape))
        .layer(DefaultBodyLimit::max(body::MAX_BODY))
        .with_state(state)
}

/// Where the dashboard's static files come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assets {
    /// Compiled into the binary ([`assets`]).
    Embedded,
    /// Under the Leptos options' site root.
    SiteRoot,
}

/// The API plus the server-rendered dashboard and its static files from the site root.
pub fn router(state: AppState, leptos: LeptosOptions) -> Router {
    router_serving(state, leptos, Assets::SiteRoot)
}

/// The API plus the server-rendered dashboard and its static files from `assets`, every
/// request authenticated first and timed by its route (see [`metrics::track`]).
pub fn router_serving(state: AppState, leptos: LeptosOptions, assets: Assets) -> Router {
    let recorder = state.runtime.metrics().clone();
    let site = match assets {
        Assets::Embedded => assets::Site::embedded(),
        Assets::SiteRoot => assets::Site::dir(std::path::PathBuf::from(leptos.site_root.to_string())),
    };
    let dashboard = assets::routes(site.clone()).merge(crate::http::dashboard::dashboard(state.clone(), leptos, site.names(), site.split()));
    api_routes(state.clone())
        .merge(dashboard)
        .route_layer(axum::middleware::from_fn(metrics::record_route))
        .layer(axum::middleware::from_fn_with_state(state, auth::authenticate))
        .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, Duration::from_secs(30)))
        .layer(axum::middleware::from_fn_with_state(recorder, metrics::track))
        .layer(TraceLayer::new_for_http())
}

/// Who runs the admission loop, in words: `leader: NAME (this replica)`, `leader: NAME`,
/// that no replica holds the lease now, or (SQLite) `leader: this server (the only one)`.
pub fn leader_line(leader: Option<&crate::services::jobs::Leadership>) -> String {
    match leader {
        Some(l) if !l.replicated => "leader: this server (the only one)".into(),
        Some(l) if l.this => format!("leader: {} (this replica)", l.leader),
        Some(l) => format!("leader: {}", l.leader),
        None => "leader: none (no replica holds the lease; one takes over within seconds)".into(),
    }
}

/// Ready when the database answers; the second line says which replica leads.
async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    match sqlx::query("SELECT 1").execute(&state.db.pool).await {
        Ok(_) => {
            let leader = state.runtime.leader().await.ok().flatten();
            (StatusCode::OK, format!("ready\n{}\n", leader_line(leader.as_ref()))).into_response()
        }
        Err(e) => {
            tracing::warn!(error = %e, "database not ready");
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "database unreachable").into_response()
        }
    }
}
