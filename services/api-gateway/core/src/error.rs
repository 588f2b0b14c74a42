//! The one error type of the gateway, with its single mapping to gRPC
//! statuses (the HTTP layer maps the same variants to Nomad's status codes).

use caravan_jobspec::{FieldErrors, JobspecError};
use caravan_state::StateError;
use caravan_store::StoreError;
use tonic::{Code, Status};

/// What a gateway operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// One field of the request is wrong; nothing was written.
    #[error("{field}: {message}")]
    InvalidField {
        /// The offending field, e.g. `job.task_groups[0].count`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// A job failed validation; every problem names its field.
    #[error("{0}")]
    InvalidJob(FieldErrors),
    /// A job body could not be parsed (syntax, size).
    #[error("{0}")]
    Jobspec(JobspecError),
    /// The object asked for does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The request contradicts the current state (check-index mismatch,
    /// eligibility while draining, a periodic job forced to evaluate).
    #[error("{0}")]
    FailedPrecondition(String),
    /// The cluster refuses the operation (scheduler configuration).
    #[error("{0}")]
    PermissionDenied(String),
    /// A compare-and-swap write kept losing to concurrent writers.
    #[error("{0}")]
    Conflict(String),
    /// A peer (client node, deployment-watcher) could not be reached.
    #[error("{0}")]
    Unavailable(String),
    /// A peer answered with an error, passed on as it came.
    #[error("{}", .0.message())]
    Upstream(Status),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The watch cache failed or a stored value did not decode.
    #[error(transparent)]
    State(#[from] StateError),
    /// Variables cannot be sealed or opened: no key, a wrong key, a damaged
    /// value.
    #[error("{0}")]
    Keyring(String),
}

/// Result of a gateway operation.
pub type Result<T, E = GatewayError> = std::result::Result<T, E>;

impl GatewayError {
    /// An error naming `field`.
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        GatewayError::InvalidField {
            field: field.into(),
            message: message.into(),
        }
    }

    /// Whether the caller's input is at fault (HTTP 400 rather than 5xx).
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            GatewayError::InvalidField { .. }
                | GatewayError::InvalidJob(_)
                | GatewayError::Jobspec(_)
                | GatewayError::FailedPrecondition(_)
        )
    }

    /// Whether the store refused a write because it is full (etcd's NOSPACE
    /// alarm), here or in a peer that passed the refusal on.
    pub fn is_store_full(&self) -> bool {
        match self {
            GatewayError::Store(err) | GatewayError::State(StateError::Store(err)) => {
                err.is_no_space()
            }
            GatewayError::Upstream(status) => {
                status.code() == Code::ResourceExhausted
                    && status.message().starts_with("store full")
            }
            _ => false,
        }
    }

    /// The gRPC code of this error.
    pub fn code(&self) -> Code {
        match self {
            GatewayError::InvalidField { .. }
            | GatewayError::InvalidJob(_)
            | GatewayError::Jobspec(_) => Code::InvalidArgument,
            GatewayError::NotFound(_) => Code::NotFound,
            GatewayError::FailedPrecondition(_) => Code::FailedPrecondition,
            GatewayError::PermissionDenied(_) => Code::PermissionDenied,
            GatewayError::Conflict(_) => Code::Aborted,
            GatewayError::Unavailable(_) => Code::Unavailable,
            GatewayError::Upstream(status) => status.code(),
            GatewayError::Store(err) => caravan_runtime::status::from_store(err).code(),
            GatewayError::State(StateError::Store(err)) => {
                caravan_runtime::status::from_store(err).code()
            }
            GatewayError::State(StateError::Timeout { .. } | StateError::Closed) => {
                Code::Unavailable
            }
            GatewayError::State(_) | GatewayError::Keyring(_) => Code::Internal,
        }
    }
}

impl From<JobspecError> for GatewayError {
    fn from(err: JobspecError) -> Self {
        match err {
            JobspecError::Invalid(errors) => GatewayError::InvalidJob(errors),
            other => GatewayError::Jobspec(other),
        }
    }
}

impl From<GatewayError> for Status {
    fn from(err: GatewayError) -> Status {
        match err {
            GatewayError::Upstream(status) => status,
            GatewayError::Store(ref store) => caravan_runtime::status::from_store(store),
            other => Status::new(other.code(), other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use caravan_jobspec::FieldError;

    use super::*;

    #[test]
    fn codes_follow_the_variant() {
        let s: Status = GatewayError::field("job.id", "missing job ID").into();
        assert_eq!(s.code(), Code::InvalidArgument);
        assert_eq!(s.message(), "job.id: missing job ID");
        let errs = FieldErrors(vec![FieldError::new("group \"g\": count", "must be >= 0")]);
        let s: Status = GatewayError::from(JobspecError::Invalid(errs)).into();
        assert_eq!(s.code(), Code::InvalidArgument);
        assert!(s.message().contains("count"), "{}", s.message());
        let s: Status = GatewayError::NotFound("job not found".into()).into();
        assert_eq!(s.code(), Code::NotFound);
        let s: Status = GatewayError::Store(StoreError::Unavailable("down".into())).into();
        assert_eq!(s.code(), Code::Unavailable);
        assert!(GatewayError::FailedPrecondition("x".into()).is_bad_input());
        assert!(!GatewayError::Conflict("x".into()).is_bad_input());
    }
}
