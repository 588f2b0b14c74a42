//! Caravan's client-node service: fingerprints the machine, registers with
//! the api-gateway and heartbeats, runs the node's allocations with task
//! drivers, reports their status in batches, and serves task logs.

pub mod alloc_dir;
pub mod config;
pub mod driver;
pub mod error;
pub mod fingerprint;
pub mod restart;
pub mod state_dir;
pub mod task_env;
