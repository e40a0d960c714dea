//! `GET /metrics` in the Prometheus text format, and the middleware that times every
//! request by its route template (`/api/v1/jobs/{id}`, never the path itself, so a label
//! has as many values as the router has routes).
//!
//! `/metrics` is served without credentials, like `/healthz`: its series carry queue,
//! flavor, resource and backend names and counts, never a job's name, command, user or
//! token, and a scraper with a token to rotate is one more secret to leak. Where even the
//! queue names are private, listen on a private address or put a proxy in front.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::metrics::Metrics;
use crate::state::AppState;

use super::error::ApiError;

/// Every series, gauges refreshed from the admission loop's state at this moment.
pub async fn scrape(State(state): State<AppState>) -> Response {
    match state.runtime.metrics_text().await {
        Ok(text) => ([(header::CONTENT_TYPE, Metrics::content_type())], text).into_response(),
        Err(e) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", format!("cannot read the metrics: {e}")).into_response(),
    }
}

/// Where the inner [`record_route`] leaves the matched route for the outer [`track`].
#[derive(Clone, Default)]
struct RouteSlot(Arc<OnceLock<String>>);

/// Runs after routing (a `route_layer`): notes which route template matched.
pub async fn record_route(req: Request, next: Next) -> Response {
    if let (Some(slot), Some(path)) = (req.extensions().get::<RouteSlot>(), req.extensions().get::<MatchedPath>()) {
        let _ = slot.0.set(path.as_str().to_string());
    }
    next.run(req).await
}

/// Runs outside everything else: times the request until its response head is ready and
/// counts it under its route, method and status. Requests answered before routing (refused
/// sign-in, unknown paths, the static files' fallback) are labelled `unrouted` or `/pkg/*`.
pub async fn track(State(metrics): State<Arc<Metrics>>, mut req: Request, next: Next) -> Response {
    let slot = RouteSlot::default();
    req.extensions_mut().insert(slot.clone());
    let method = method_label(req.method());
    let unrouted = if req.uri().path().starts_with("/pkg/") { "/pkg/*" } else { "unrouted" };
    let start = Instant::now();
    let response = next.run(req).await;
    let route = slot.0.get().map_or(unrouted, String::as_str);
    metrics.http.with_label_values(&[route, method, response.status().as_str()]).observe(start.elapsed().as_secs_f64());
    response
}

/// The method as a label; any other than the standard ones is `other` (a client picks it).
fn method_label(m: &Method) -> &'static str {
    match *m {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}
