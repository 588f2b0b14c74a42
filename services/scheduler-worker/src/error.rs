//! The scheduler worker's errors.

use caravan_state::StateError;
use caravan_store::StoreError;

/// What can go wrong processing an evaluation.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The eval broker refused or failed a call.
    #[error("eval broker: {0}")]
    Broker(tonic::Status),
    /// The plan applier refused or failed a plan.
    #[error("plan applier: {0}")]
    Applier(tonic::Status),
    /// No leader of a service could be reached in time.
    #[error("{0}: no leader reachable")]
    NoLeader(&'static str),
    /// The watch cache did not reach a revision, or stopped.
    #[error("state: {0}")]
    State(#[from] StateError),
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// The replica is shutting down.
    #[error("shutting down")]
    ShuttingDown,
}
