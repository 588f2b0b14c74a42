//! The watcher's one error type and its one mapping to gRPC statuses.

use caravan_runtime::names::DEPLOYMENT_WATCHER;
use caravan_runtime::status;
use caravan_state::StateError;
use caravan_store::{LeadershipError, StoreError};
use tonic::Status;

/// What can go wrong in the watcher.
#[derive(Debug, thiserror::Error)]
pub enum WatcherError {
    /// This replica does not lead; `leader` is the one that does, if known.
    #[error("not the leader")]
    NotLeader {
        /// The leader's advertised address.
        leader: Option<String>,
    },
    /// A request field is malformed.
    #[error("{field}: {problem}")]
    InvalidArgument {
        /// The field, e.g. `deployment_id`.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The deployment (or an allocation) does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The deployment is in no state for the request (terminal, nothing to
    /// promote, unhealthy canaries).
    #[error("{0}")]
    FailedPrecondition(String),
    /// The deployment kept changing under the write.
    #[error("deployment {0} changed concurrently; retry")]
    Conflict(String),
    /// Leadership was lost while serving the request; nothing was written.
    #[error("leadership lost")]
    Deposed,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The watch cache (or decoding a stored value) failed.
    #[error(transparent)]
    State(#[from] StateError),
}

impl From<LeadershipError> for WatcherError {
    fn from(err: LeadershipError) -> Self {
        match err {
            LeadershipError::Store(e) => WatcherError::Store(e),
            LeadershipError::Deposed { .. } | LeadershipError::Lost(_) => WatcherError::Deposed,
        }
    }
}

impl WatcherError {
    /// Whether this replica lost leadership.
    pub fn is_deposed(&self) -> bool {
        matches!(self, WatcherError::Deposed)
    }

    /// An invalid `field`.
    pub fn field(field: impl Into<String>, problem: impl Into<String>) -> Self {
        WatcherError::InvalidArgument {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

impl From<WatcherError> for Status {
    fn from(err: WatcherError) -> Self {
        match &err {
            WatcherError::NotLeader { leader } => {
                status::not_leader(DEPLOYMENT_WATCHER, leader.as_deref())
            }
            WatcherError::Deposed => status::not_leader(DEPLOYMENT_WATCHER, None),
            WatcherError::InvalidArgument { field, problem } => {
                status::invalid_field(field, problem)
            }
            WatcherError::NotFound(_) => Status::not_found(err.to_string()),
            WatcherError::FailedPrecondition(_) => Status::failed_precondition(err.to_string()),
            WatcherError::Conflict(_) => Status::aborted(err.to_string()),
            WatcherError::Store(e) => status::from_store(e),
            WatcherError::State(StateError::Store(e)) => status::from_store(e),
            WatcherError::State(e) => Status::internal(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use tonic::Code;

    use super::*;

    #[test]
    fn errors_map_to_codes() {
        let code = |e: WatcherError| Status::from(e).code();
        assert_eq!(
            code(WatcherError::NotLeader { leader: None }),
            Code::Unavailable
        );
        assert_eq!(code(WatcherError::Deposed), Code::Unavailable);
        assert_eq!(code(WatcherError::NotFound("x".into())), Code::NotFound);
        assert_eq!(
            code(WatcherError::FailedPrecondition("x".into())),
            Code::FailedPrecondition
        );
        assert_eq!(code(WatcherError::Conflict("d".into())), Code::Aborted);
        let invalid = Status::from(WatcherError::field(
            "deployment_id",
            "missing deployment ID",
        ));
        assert_eq!(invalid.code(), Code::InvalidArgument);
        assert_eq!(invalid.message(), "deployment_id: missing deployment ID");
        let hinted = Status::from(WatcherError::NotLeader {
            leader: Some("10.0.0.1:4653".into()),
        });
        assert_eq!(
            status::leader_hint(&hinted).as_deref(),
            Some("10.0.0.1:4653")
        );
    }
}
