//! The runtime: jobs go in, the admission loop decides with the engine, backends run them.

pub mod backend;
pub mod local;
