//! Serves the Leptos dashboard: server-side rendering, server functions and the static site
//! (wasm, js, css). The dashboard reaches the services through [`app::ui::backend::Backend`].

use std::sync::Arc;

use app::api::{ConfigVersion, VersionPage};
use app::preview::PreviewReport;
use app::config::diff::ConfigDiff;
use app::config::parse::{parse, Format};
use app::ui::backend::{Backend, BoxFuture, SharedBackend};
use app::ui::server_fns::{ApplyInput, ApplyOutcome};
use axum::Router;
use leptos::prelude::*;
use leptos_axum::{generate_route_list, LeptosRoutes};

use crate::service::ServiceError;
use crate::state::AppState;
use crate::store::{ApplyMeta, StoreError};

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

fn meta(input: ApplyInput) -> ApplyMeta {
    let author = input.author.trim();
    ApplyMeta {
        creator_id: if author.is_empty() { "dashboard".into() } else { author.chars().take(128).collect() },
        message: input.message.filter(|m| !m.trim().is_empty()),
        expected_active_version: input.expected_active_version,
    }
}

/// The refusals a dashboard user can act on become outcomes; the rest stay errors.
fn outcome(result: Result<app::api::ApplyResponse, ServiceError>) -> Result<ApplyOutcome, String> {
    match result {
        Ok(r) => Ok(ApplyOutcome::Applied { version: r.version, changed: r.changed, warnings: r.warnings }),
        Err(ServiceError::Store(StoreError::Conflict { expected, actual })) => {
            Ok(ApplyOutcome::Conflict { expected, active: actual })
        }
        Err(ServiceError::Invalid(report)) => Ok(ApplyOutcome::Invalid { problems: report.problems }),
        Err(e) => Err(message(e)),
    }
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

    fn apply(&self, yaml: String, input: ApplyInput) -> BoxFuture<'_, Result<ApplyOutcome, String>> {
        Box::pin(async move {
            let config = match parse(&yaml, Format::Yaml) {
                Ok(c) => c,
                Err(problems) => return Ok(ApplyOutcome::Invalid { problems }),
            };
            outcome(self.config.apply(&config, &meta(input)).await)
        })
    }

    fn rollback(&self, version: i64, input: ApplyInput) -> BoxFuture<'_, Result<ApplyOutcome, String>> {
        Box::pin(async move { outcome(self.config.rollback(version, &meta(input)).await) })
    }

    fn preview(&self, yaml: String, window: String) -> BoxFuture<'_, Result<PreviewReport, String>> {
        Box::pin(async move {
            let draft = parse(&yaml, Format::Yaml).map_err(|problems| problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("; "))?;
            let now = crate::runtime::now_us();
            let span = crate::preview::window::resolve(Some(&serde_json::Value::String(window)), now)?;
            crate::preview::run(&crate::preview::Sources::of(self), &draft, span, now)
                .await
                .map_err(|e| crate::http::error::ApiError::from(e).message)
        })
    }
}
