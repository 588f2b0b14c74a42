//! The node-facing API's logic: node identity, registration and
//! heartbeats (and where their leases are renewed), the allocation stream,
//! and batched client status updates.

pub mod feed;
pub mod heartbeats;
pub mod identity;
pub(crate) mod own_writes;
pub(crate) mod registered;
pub mod registration;
pub mod status_writes;
pub mod updates;
pub mod watch;
