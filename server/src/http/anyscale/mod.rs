//! The Anyscale scheduler API under `/api/v2`, so the unmodified `anyscale` SDK and CLI
//! (0.26.112: `anyscale.scheduler.*`, `anyscale scheduler config …`) work against Berth.
//! The wire contract is in docs/anyscale.md.
//!
//! Every handler here translates: it reads the Anyscale request, calls the same service the
//! `/api/v1` handler calls (roles are checked there), and writes the Anyscale answer. Nothing
//! is decided here that `/api/v1` decides differently.
//!
//! The envelopes: one object is `{"result": …}`; a list is `{"results": […], "metadata":
//! {"total"?, "next_paging_token"}}`, `metadata` always present (the SDK's pager reads it
//! without a check). Errors keep Berth's one shape, `{"error": {code, message, details}}`:
//! the SDK raises `ValueError(message)` for a 4xx carrying it, and the CLI prints it and
//! exits 1. The credentials (`cli_token` cookie) are read in `super::auth`.

mod config;
mod events;
mod preview;
pub mod query;
mod views;

use app::auth::Role;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;

use crate::services::auth::Caller;
use crate::state::AppState;

/// The one organization a Berth server is, as the Anyscale API names it.
pub const ORGANIZATION_ID: &str = "org_berth";

/// The routes nested under `/api/v2`.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/userinfo/", get(userinfo))
        .route("/cli_usage/", post(cli_usage))
        .nest("/scheduler", scheduler_routes())
}

/// The 13 scheduler operations, nested under `/api/v2/scheduler`.
fn scheduler_routes() -> Router<AppState> {
    Router::new()
        .route("/config", get(config::get_active).post(config::apply))
        .route("/config/versions", get(config::list_versions))
        .route("/config/versions/{version}", get(config::get_version))
        .route("/config/rollback", post(config::rollback))
        .route("/config/validate", post(config::validate))
        .route("/config/preview", post(preview::preview))
        .route("/overview", get(views::overview))
        .route("/queues", get(views::queues))
        .route("/queues/{queue_id}", get(views::queue))
        .route("/queues/{queue_id}/workloads", get(views::workloads))
        .route("/events", get(events::events))
        .route("/top-consumers", get(views::top_consumers))
}

/// `{"result": value}`.
pub struct One<T>(pub T);

impl<T: Serialize> IntoResponse for One<T> {
    fn into_response(self) -> Response {
        Json(serde_json::json!({ "result": self.0 })).into_response()
    }
}

/// `{"results": […], "metadata": {"total"?, "next_paging_token"}}`.
pub struct Page<T> {
    pub results: Vec<T>,
    /// Items over all pages, when known without counting.
    pub total: Option<u64>,
    /// What fetches the next page; `None` on the last one.
    pub next: Option<String>,
}

#[derive(Serialize)]
struct Metadata<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    total: Option<u64>,
    next_paging_token: Option<&'a str>,
}

impl<T: Serialize> IntoResponse for Page<T> {
    fn into_response(self) -> Response {
        let metadata = Metadata { total: self.total, next_paging_token: self.next.as_deref() };
        Json(serde_json::json!({ "results": self.results, "metadata": metadata })).into_response()
    }
}

/// `UserInfo`: the fields the client requires, built from the caller.
#[derive(Debug, Serialize)]
struct UserInfo {
    id: String,
    email: String,
    name: String,
    username: String,
    verified: bool,
    organization_permission_level: &'static str,
    organization_ids: [&'static str; 1],
    organizations: [(); 0],
    ld_hash: &'static str,
    ld_hash_fields: [(); 0],
    pylon_hash: &'static str,
}

/// An address for a user: the user id when it is one, else `user@berth.local` (Berth keeps
/// no e-mail addresses, and the field is required).
pub fn email_of(user: &str) -> String {
    match user.contains('@') {
        true => user.to_string(),
        false => format!("{user}@berth.local"),
    }
}

/// `GET /api/v2/userinfo/`: who the token is. The SDK calls it once per process before
/// anything else; an unknown token never gets here (401 in `super::auth`).
async fn userinfo(caller: Caller) -> One<UserInfo> {
    One(UserInfo {
        id: caller.user.clone(),
        email: email_of(&caller.user),
        name: caller.user.clone(),
        username: caller.user.clone(),
        verified: true,
        organization_permission_level: if caller.role.allows(Role::Admin) { "owner" } else { "collaborator" },
        organization_ids: [ORGANIZATION_ID],
        organizations: [],
        ld_hash: "",
        ld_hash_fields: [],
        pylon_hash: "",
    })
}

/// `POST /api/v2/cli_usage/`: the CLI's usage report after each command. Nothing is kept.
async fn cli_usage() -> StatusCode {
    StatusCode::NO_CONTENT
}
