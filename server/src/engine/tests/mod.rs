//! Engine tests: table-driven cases with fixture builders comparing whole plans, property
//! tests for the invariants, and the simulator.

// Table rows are tuples of literals by design.
#![allow(clippy::type_complexity)]

mod cohort;
pub(crate) mod compile;
mod fixtures;
mod kueue;
mod props;
mod route;
mod schedule;
mod preempt;
mod quick;
mod in_flight;
mod sim;
