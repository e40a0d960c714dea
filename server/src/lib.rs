//! The Berth server: CLI, HTTP API, dashboard serving, the versioned config store.

pub mod engine;
