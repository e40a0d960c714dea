//! Serves the Leptos dashboard: server-side rendering, server functions and the static site
//! (wasm, js, css). The dashboard reaches the services through [`app::ui::backend::Backend`].

use std::sync::Arc;

use app::api::{ConfigVersion, VersionPage};
use app::config::diff::ConfigDiff;
use app::ui::backend::{Backend, BoxFuture, SharedBackend};
use axum::Router;
use leptos::prelude::*;
use leptos_axum::{generate_route_list, LeptosRoutes};

use crate::service::ServiceError;
use crate::state::AppState;

/// The dashboard routes and the static files under the site root.
pub fn dashboard(state: AppState, options: LeptosOptions) -> Router {
    let routes = generate_route_list(app::ui::App);
    let backend: SharedBackend = Arc::new(state);
    let shell_options = options.clone();
    Router::new()
        .leptos_routes_with_context(
            &options,
            routes,
            move || provide_context(backend.clone()),
            move || app::ui::shell(shell_options.clone()),
        )
        .fallback(leptos_axum::file_and_error_handler(app::ui::shell))
        .with_state(options)
}

fn message(e: ServiceError) -> String {
    crate::http::error::ApiError::from(e).message
}

impl Backend for AppState {
    fn config(&self, version: Option<i64>) -> BoxFuture<'_, Result<ConfigVersion, String>> {
        Box::pin(async move { self.config.get(version).await.map_err(message) })
    }

    fn versions(&self, cursor: Option<String>, max_items: i64) -> BoxFuture<'_, Result<VersionPage, String>> {
        Box::pin(async move { self.config.list(Some(max_items), cursor.as_deref()).await.map_err(message) })
    }

    fn diff(&self, from: Option<i64>, to: Option<i64>) -> BoxFuture<'_, Result<ConfigDiff, String>> {
        Box::pin(async move { self.config.diff(from, to).await.map_err(message) })
    }
}
