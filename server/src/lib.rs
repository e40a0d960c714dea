//! The Berth server: CLI, HTTP API, dashboard serving, the services, the stores, the
//! admission loop and the backends it dispatches to.
//!
//! Layers, top to bottom:
//! - `cli` (the binary's commands; over HTTP) and `http` (the axum router, the dashboard's
//!   server functions, one error mapping);
//! - `services`: config, jobs, views, auth and preview, the one entry every caller goes
//!   through;
//! - `admission`: the loop that owns the live jobs, decides with `engine` and runs the
//!   decisions on `backends`;
//! - `store`: the database pool and all SQL;
//! - `replicas`: on PostgreSQL, the leader lease and the notices between replicas, which
//!   decide whether this process runs the admission loop.
//!
//! `engine` is pure: a snapshot in, a plan out; `clock` is the one source of time; `zipfile`
//! reads the packages Ray's clients upload;
//! `metrics` holds the Prometheus series every layer records into; `slices` asks the kernel
//! to let the server's threads preempt the jobs they run.

pub mod admission;
pub mod backends;
pub mod cli;
pub mod clock;
pub mod engine;
pub mod http;
pub mod metrics;
pub mod replicas;
pub mod serve;
pub mod services;
pub mod slices;
pub mod state;
pub mod store;
pub mod zipfile;
