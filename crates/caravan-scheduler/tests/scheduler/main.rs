//! The scheduler's tests, in one binary: the scheduler is pure, so its cases
//! share a process, and one link instead of nine keeps the build small.

mod common;
mod completion;
mod disconnect;
mod evals;
mod feasibility;
mod generic;
mod harness;
mod host_networks;
mod host_volumes;
mod preemption;
mod properties;
mod ranking;
mod resources;
mod system;
