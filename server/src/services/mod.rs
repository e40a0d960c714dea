//! The services: the one entry the REST handlers, the dashboard's server functions and
//! (over HTTP) the CLI go through. Each checks who asks, validates what is asked, and
//! leaves the data to `store` and live jobs to the admission loop.

pub mod auth;
pub mod config;
pub mod jobs;
pub mod packages;
pub mod preview;
pub mod request;
pub mod views;
