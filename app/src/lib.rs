//! Berth's shared crate: used by the server (feature `ssr`) and by the browser (`hydrate`).
//!
//! `config`, `api`, `auth`, `jobs`, `preview` and `request` are pure and wasm-safe; `ui` is the Leptos dashboard.

pub mod api;
pub mod auth;
pub mod config;
pub mod jobs;
pub mod preview;
pub mod request;
pub mod ui;
