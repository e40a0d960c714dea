//! Berth's shared crate: used by the server (feature `ssr`) and by the browser (`hydrate`).
//!
//! `config` and `api` are pure and wasm-safe; `ui` is the Leptos dashboard.

pub mod api;
pub mod config;
pub mod jobs;
pub mod ui;
