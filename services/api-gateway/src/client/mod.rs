//! The node-facing API's logic: registration and heartbeats, the
//! allocation stream, and batched client status updates.

pub mod feed;
pub mod registration;
pub mod status_writes;
pub mod updates;
pub mod watch;
