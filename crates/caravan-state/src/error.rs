//! The one error type of the state crate.

use caravan_store::{Revision, StoreError};

/// What can go wrong reading, decoding or watching Caravan's state.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// A key under the prefix does not follow the state layout.
    #[error("bad key {key:?}: {reason}")]
    Key {
        /// The key, lossily printed.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A value is not the protobuf message its key promises.
    #[error("cannot decode {key:?}: {source}")]
    Decode {
        /// The key whose value failed to decode.
        key: String,
        /// The protobuf error.
        source: prost::DecodeError,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The cache did not reach a revision in time.
    #[error("timed out waiting for revision {wanted} (cache is at {reached})")]
    Timeout {
        /// The revision waited for.
        wanted: Revision,
        /// The revision the cache had applied when the wait gave up.
        reached: Revision,
    },
    /// The watch cache has stopped.
    #[error("the watch cache has stopped")]
    Closed,
}

impl StateError {
    pub(crate) fn key(key: &[u8], reason: impl Into<String>) -> Self {
        StateError::Key {
            key: String::from_utf8_lossy(key).into_owned(),
            reason: reason.into(),
        }
    }
}

/// Result of a state call.
pub type Result<T, E = StateError> = std::result::Result<T, E>;
