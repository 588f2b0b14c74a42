//! The node-facing API's logic: node identity, registration and
//! heartbeats, the allocation stream, and batched client status updates.

pub mod feed;
pub mod identity;
pub mod registration;
pub mod status_writes;
pub mod updates;
pub mod watch;
