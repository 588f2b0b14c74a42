//! Caravan's typed watch cache of cluster state: the key layout and codec
//! every service writes with, persistent tables with indexes and per-node
//! usage, O(1) snapshots, and the informer that keeps them in step with the
//! store.

mod alloc_status;
mod change;
mod codec;
mod diff;
mod error;
mod fan_out;
mod index;
mod informer;
mod keyspace;
mod known_strings;
mod list_page;
pub mod metrics;
mod packed_ids;
mod packed_names;
mod point_read;
mod registration;
mod relative_times;
mod snapshot;
pub mod status_batch;
mod tables;
mod usage;

pub use alloc_status::{
    carry_client_part, client_part, decode_status, encode_status, fold, fold_listed, fold_with,
    follow_status, lay_status, overlay, status_guard,
};
pub use change::Change;
pub use codec::{AllocDetail, StateObject, decode, decode_alloc, encode};
pub use diff::ObjectChange;
pub use error::{Result, StateError};
pub use fan_out::node_change_jobs;
pub use index::{Id, JobMap};
pub use informer::{Informer, InformerConfig, InformerStats};
pub use keyspace::{Keyspace, Kind, StateKey, encode_segment};
pub use point_read::{
    StoredAlloc, read_alloc, read_alloc_values, read_alloc_values_of_jobs, read_allocs,
};
pub use registration::{
    KEPT_VERSIONS, RegisterTxn, as_spec, register_txn, spec_changed, versions_to_delete,
};
pub use snapshot::{OnNode, Snapshot};
pub use tables::Tables;
pub use usage::{NodeUsage, UsedPort};
