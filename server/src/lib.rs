//! The Berth server: CLI, HTTP API, dashboard serving, the versioned config store and the
//! admission engine.
//!
//! Layers, top to bottom: `cli` (the binary's commands) → `http` (axum router, one error
//! mapping) and `ui` (Leptos SSR) → `service` (the only entry to the data) → `store` → `db`.
//! `engine` is pure: a snapshot in, a plan out; `preview` replays recorded workload through
//! it under a draft config.

pub mod auth;
pub mod cli;
pub mod cli_auth;
pub mod cli_jobs;
pub mod cli_preview;
pub mod client;
pub mod db;
pub mod engine;
pub mod http;
pub mod preview;
pub mod serve;
pub mod runtime;
pub mod service;
pub mod state;
pub mod store;
pub mod ui;
