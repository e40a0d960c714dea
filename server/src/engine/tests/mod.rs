//! Engine tests: table-driven cases with fixture builders comparing whole plans, property
//! tests for the invariants, and the simulator.

mod fixtures;
mod props;
mod route;
mod schedule;
mod preempt;
mod sim;
