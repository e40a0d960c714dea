//! The Berth server: CLI, HTTP API, dashboard serving and the versioned config store.
//!
//! Layers, top to bottom: `cli` (the binary's commands) → `http` (axum router, one error
//! mapping) and `ui` (Leptos SSR) → `service` (the only entry to the data) → `store` → `db`.

pub mod cli;
pub mod client;
pub mod db;
pub mod http;
pub mod serve;
pub mod service;
pub mod state;
pub mod store;
pub mod ui;
