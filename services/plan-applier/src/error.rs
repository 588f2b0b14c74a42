//! The plan-applier's errors and their one mapping to gRPC statuses.

use caravan_runtime::names::PLAN_APPLIER;
use caravan_runtime::status;
use caravan_state::StateError;
use caravan_store::{LeadershipError, StoreError};
use tonic::Status;

/// Why a plan was not applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplierError {
    /// This replica does not lead; the plan was not accepted.
    #[error("plan-applier: not the leader")]
    NotLeader {
        /// The leader's address, when known.
        leader: Option<String>,
    },
    /// The plan is malformed; nothing was written.
    #[error("{field}: {problem}")]
    Invalid {
        /// The offending field, e.g. `plan.node_allocation["n1"].allocs[0].id`.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The eval broker does not know the plan's delivery token: the eval was
    /// handed to another worker or the broker failed over.
    #[error("eval {eval_id}: delivery token refused by the eval broker: {reason}")]
    TokenRefused {
        /// The plan's evaluation.
        eval_id: String,
        /// What the broker answered.
        reason: String,
    },
    /// The eval broker could not be asked about the token; nothing was written.
    #[error("eval broker unavailable for the token check: {0}")]
    BrokerUnavailable(String),
    /// Leadership ended before the plan was committed; nothing was written.
    #[error("plan-applier: leadership lost; the plan was not committed")]
    NotCommitted,
    /// The commit may or may not have happened; the worker must refresh to
    /// the store's current revision and plan again.
    #[error("plan-applier: commit outcome unknown: {0}")]
    OutcomeUnknown(String),
    /// The applier is shutting down; nothing was written.
    #[error("plan-applier: shutting down; the plan was not committed")]
    ShuttingDown,
    /// The store failed before anything was written.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// The watch cache failed.
    #[error("state: {0}")]
    State(#[from] StateError),
}

impl ApplierError {
    /// An invalid field.
    pub(crate) fn invalid(field: impl Into<String>, problem: impl Into<String>) -> Self {
        ApplierError::Invalid {
            field: field.into(),
            problem: problem.into(),
        }
    }

    /// The error a failed fenced write means.
    pub(crate) fn from_leadership(err: LeadershipError) -> Self {
        match err {
            LeadershipError::Deposed { .. } | LeadershipError::Lost(_) => {
                ApplierError::NotCommitted
            }
            // A full store refuses the write before applying any of it.
            LeadershipError::Store(e) if e.is_no_space() => ApplierError::Store(e),
            LeadershipError::Store(e) => ApplierError::OutcomeUnknown(e.to_string()),
        }
    }

    /// The gRPC status this error is answered with.
    pub fn to_status(&self) -> Status {
        match self {
            ApplierError::NotLeader { leader } => {
                status::not_leader(PLAN_APPLIER, leader.as_deref())
            }
            ApplierError::Invalid { field, problem } => status::invalid_field(field, problem),
            ApplierError::TokenRefused { .. } => Status::failed_precondition(self.to_string()),
            // Refused before verification or given up before the commit:
            // the worker may resubmit without counting a plan attempt.
            ApplierError::BrokerUnavailable(_) | ApplierError::NotCommitted => {
                status::unavailable_not_applied(self.to_string())
            }
            ApplierError::OutcomeUnknown(_) | ApplierError::ShuttingDown => {
                Status::unavailable(self.to_string())
            }
            ApplierError::Store(e) => status::from_store(e),
            ApplierError::State(e) => Status::unavailable(format!("state: {e}")),
        }
    }
}

impl From<ApplierError> for Status {
    fn from(err: ApplierError) -> Self {
        err.to_status()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_refusals_that_wrote_nothing_are_marked_not_applied() {
        let marked = |e: ApplierError| status::not_applied(&e.to_status());
        assert!(marked(ApplierError::BrokerUnavailable("down".into())));
        assert!(marked(ApplierError::NotCommitted));
        assert!(!marked(ApplierError::OutcomeUnknown("timeout".into())));
        assert!(!marked(ApplierError::ShuttingDown));
    }

    #[test]
    fn a_full_store_is_a_refusal_not_an_unknown_outcome() {
        let full = StoreError::NoSpace("etcdserver: mvcc: database space exceeded".into());
        let err = ApplierError::from_leadership(LeadershipError::Store(full));
        assert!(matches!(err, ApplierError::Store(_)), "{err:?}");
        let status = err.to_status();
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert!(
            status.message().contains("alarm disarm"),
            "{}",
            status.message()
        );
    }
}
