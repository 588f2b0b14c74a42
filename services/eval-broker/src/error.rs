//! The broker's one error type and its one mapping to gRPC statuses.

use caravan_runtime::names::EVAL_BROKER;
use caravan_runtime::status;
use caravan_state::StateError;
use caravan_store::{LeadershipError, StoreError};
use tonic::Status;

use crate::queues::QueueError;

/// What can go wrong in the broker.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// This replica does not lead; `leader` is the one that does, if known.
    #[error("not the leader")]
    NotLeader {
        /// The leader's advertised address.
        leader: Option<String>,
    },
    /// A request field is malformed.
    #[error("{field}: {problem}")]
    InvalidArgument {
        /// The field, e.g. `eval.priority`.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A delivery-bound call did not match an outstanding delivery.
    #[error(transparent)]
    Delivery(#[from] QueueError),
    /// The token is live but belongs to another eval than the one written.
    #[error("token belongs to the delivery of eval {delivered}, not of eval {named}")]
    WrongEval {
        /// The eval the token was handed out with.
        delivered: String,
        /// The eval the request names.
        named: String,
    },
    /// The eval does not exist in the store.
    #[error("eval {0} does not exist")]
    EvalNotFound(String),
    /// An eval with this id exists already, with other contents.
    #[error("eval {0} already exists")]
    EvalExists(String),
    /// The job a request names does not exist.
    #[error("job not found: {0}")]
    JobNotFound(String),
    /// The request contradicts the state of what it names (forcing a job
    /// that is not periodic, or is stopped).
    #[error("{0}")]
    FailedPrecondition(String),
    /// A periodic child for this launch time exists already.
    #[error("periodic job already launched at this time: {0}")]
    AlreadyLaunched(String),
    /// The eval kept changing under the write.
    #[error("eval {0} changed concurrently; retry")]
    Conflict(String),
    /// Leadership was lost while serving the request; nothing was written.
    #[error("leadership lost")]
    Deposed,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The watch cache failed.
    #[error(transparent)]
    State(#[from] StateError),
}

impl From<LeadershipError> for BrokerError {
    fn from(err: LeadershipError) -> Self {
        match err {
            LeadershipError::Store(e) => BrokerError::Store(e),
            LeadershipError::Deposed { .. } | LeadershipError::Lost(_) => BrokerError::Deposed,
        }
    }
}

impl BrokerError {
    /// Whether this replica lost leadership.
    pub fn is_deposed(&self) -> bool {
        matches!(self, BrokerError::Deposed)
    }
}

impl From<BrokerError> for Status {
    fn from(err: BrokerError) -> Self {
        match &err {
            BrokerError::NotLeader { leader } => status::not_leader(EVAL_BROKER, leader.as_deref()),
            BrokerError::Deposed => status::not_leader(EVAL_BROKER, None),
            BrokerError::InvalidArgument { field, problem } => {
                status::invalid_field(field, problem)
            }
            BrokerError::Delivery(QueueError::TokenMismatch { .. })
            | BrokerError::WrongEval { .. } => Status::permission_denied(err.to_string()),
            BrokerError::Delivery(_) => Status::failed_precondition(err.to_string()),
            BrokerError::EvalNotFound(_) => Status::not_found(err.to_string()),
            BrokerError::EvalExists(_) | BrokerError::AlreadyLaunched(_) => {
                Status::already_exists(err.to_string())
            }
            BrokerError::JobNotFound(_) => Status::not_found(err.to_string()),
            BrokerError::FailedPrecondition(_) => Status::failed_precondition(err.to_string()),
            BrokerError::Conflict(_) => Status::aborted(err.to_string()),
            BrokerError::Store(e) => status::from_store(e),
            BrokerError::State(StateError::Store(e)) => status::from_store(e),
            BrokerError::State(e) => Status::unavailable(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use tonic::Code;

    use super::*;

    #[test]
    fn errors_map_to_codes() {
        let code = |e: BrokerError| Status::from(e).code();
        assert_eq!(
            code(BrokerError::NotLeader { leader: None }),
            Code::Unavailable
        );
        assert_eq!(
            code(QueueError::UnknownToken.into()),
            Code::FailedPrecondition
        );
        assert_eq!(
            code(
                QueueError::TokenMismatch {
                    eval_id: "e".into()
                }
                .into()
            ),
            Code::PermissionDenied
        );
        assert_eq!(
            code(BrokerError::WrongEval {
                delivered: "a".into(),
                named: "b".into()
            }),
            Code::PermissionDenied
        );
        assert_eq!(code(BrokerError::Deposed), Code::Unavailable);
        let invalid = Status::from(BrokerError::InvalidArgument {
            field: "eval.id".into(),
            problem: "must be a UUID".into(),
        });
        assert_eq!(invalid.code(), Code::InvalidArgument);
        assert_eq!(invalid.message(), "eval.id: must be a UUID");
        let hinted = Status::from(BrokerError::NotLeader {
            leader: Some("10.0.0.1:4650".into()),
        });
        assert_eq!(
            status::leader_hint(&hinted).as_deref(),
            Some("10.0.0.1:4650")
        );
    }
}
