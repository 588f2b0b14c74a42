//! A task's state as clients report it and the servers read it.

/// Not started yet, or waiting to restart.
pub const PENDING: &str = "pending";
/// Running.
pub const RUNNING: &str = "running";
/// Will not run again.
pub const DEAD: &str = "dead";
