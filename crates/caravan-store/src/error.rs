//! The one error type of the store.

use crate::types::{LeaseId, Revision};

/// What can go wrong talking to a store.
#[derive(Clone, Debug, thiserror::Error)]
pub enum StoreError {
    /// The revision asked for has been compacted away; re-list and watch from
    /// the current revision.
    #[error("revision {requested} is compacted (oldest available is {compact_revision})")]
    Compacted {
        /// The revision that was asked for.
        requested: Revision,
        /// The revision of the last compaction; 0 when the store did not
        /// say (etcd names it for watches only).
        compact_revision: Revision,
    },
    /// The revision asked for is newer than the store's.
    #[error("revision {requested} is in the future (current is {current})")]
    FutureRevision {
        /// The revision that was asked for.
        requested: Revision,
        /// The store's current revision (0 if it could not be learned).
        current: Revision,
    },
    /// The lease does not exist (never granted, revoked or expired).
    #[error("lease {0:x} not found")]
    LeaseNotFound(LeaseId),
    /// The request is malformed or over a limit (too many ops, too large).
    #[error("invalid request: {0}")]
    InvalidArgument(String),
    /// The store could not be reached or did not answer in time.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// A watch or stream ended because the store closed it.
    #[error("closed: {0}")]
    Closed(String),
    /// The store is full: etcd reached its backend quota and raised its
    /// NOSPACE alarm, so it refuses every write that adds data (reads and
    /// deletes still work) until an operator frees space and disarms it.
    #[error(
        "store full: {0}; etcd refuses writes until an operator compacts its history, \
         defragments it and disarms the NOSPACE alarm \
         (etcdctl compact <revision>; etcdctl defrag; etcdctl alarm disarm)"
    )]
    NoSpace(String),
    /// Anything else the store reported.
    #[error("store error: {0}")]
    Internal(String),
}

impl StoreError {
    /// Whether retrying the same request later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_) | StoreError::Closed(_))
    }

    /// Whether the store refused the write because it is full (see
    /// [`StoreError::NoSpace`]).
    pub fn is_no_space(&self) -> bool {
        matches!(self, StoreError::NoSpace(_))
    }
}

/// Result of a store call.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
