//! The one error type of the client: a failed call, classified by the gRPC
//! status the api-gateway answered with (its code and metadata, never its
//! wording), or a gateway that could not be reached at all.

use tonic::{Code, Status};

use crate::retry::{leader_hint, was_not_sent};

/// What a call can fail with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The job, evaluation, allocation, deployment or node does not exist.
    #[error("{message}")]
    NotFound {
        /// The gateway's message.
        message: String,
    },
    /// The token lacks the capability (or is unknown), or the cluster
    /// refuses the operation.
    #[error("{message}")]
    PermissionDenied {
        /// The gateway's message.
        message: String,
    },
    /// The request was refused as malformed; nothing was written.
    #[error("{message}")]
    InvalidArgument {
        /// The first field the gateway named (`job.task_groups[0].count`,
        /// `group "web": count`), if it named one.
        field: Option<String>,
        /// The gateway's message.
        message: String,
    },
    /// The request lost to the current state: a check-index mismatch or a
    /// precondition (FAILED_PRECONDITION, ABORTED, ALREADY_EXISTS).
    #[error("{message}")]
    Conflict {
        /// The gRPC code.
        code: Code,
        /// The gateway's message.
        message: String,
    },
    /// The gateway, or a peer behind it (store, eval-broker, client node),
    /// could not serve the call, after the retries the call allows.
    #[error("{message}")]
    Unavailable {
        /// The gateway's message.
        message: String,
        /// The leader a refusing replica named, when the refusal carried one.
        leader: Option<String>,
    },
    /// No gateway could be connected to; the request was never sent.
    #[error("cannot connect to the api-gateway at {address}: {reason}")]
    Unreachable {
        /// The last address tried.
        address: String,
        /// The transport's innermost complaint (`Connection refused`).
        reason: String,
    },
    /// An address given to the builder is not a usable URI.
    #[error("invalid address {address:?}: {reason}")]
    InvalidAddress {
        /// The address as given.
        address: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The token given to the builder is not a printable ASCII secret.
    #[error("invalid token: not a printable ASCII secret")]
    InvalidToken,
    /// The client cannot be built as asked (no address, no runtime).
    #[error("{0}")]
    Config(String),
    /// Any other status (INTERNAL, DEADLINE_EXCEEDED, ...).
    #[error("{message}")]
    Other {
        /// The gRPC code.
        code: Code,
        /// The gateway's message.
        message: String,
    },
}

/// The result of a call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The error of a failed call to the gateway at `address`.
    pub fn from_status(status: &Status, address: &str) -> Error {
        let message = status.message().to_string();
        match status.code() {
            Code::NotFound => Error::NotFound { message },
            Code::PermissionDenied | Code::Unauthenticated => Error::PermissionDenied { message },
            Code::InvalidArgument | Code::OutOfRange => Error::InvalidArgument {
                field: field_name(&message),
                message,
            },
            code @ (Code::FailedPrecondition | Code::Aborted | Code::AlreadyExists) => {
                Error::Conflict { code, message }
            }
            Code::Unavailable if was_not_sent(status) => Error::Unreachable {
                address: address.to_string(),
                reason: innermost_cause(status),
            },
            Code::Unavailable => Error::Unavailable {
                message,
                leader: leader_hint(status),
            },
            code => Error::Other { code, message },
        }
    }

    /// The gRPC code of the answer, if the gateway answered.
    pub fn code(&self) -> Option<Code> {
        match self {
            Error::NotFound { .. } => Some(Code::NotFound),
            Error::PermissionDenied { .. } => Some(Code::PermissionDenied),
            Error::InvalidArgument { .. } => Some(Code::InvalidArgument),
            Error::Conflict { code, .. } => Some(*code),
            Error::Unavailable { .. } => Some(Code::Unavailable),
            Error::Other { code, .. } => Some(*code),
            Error::Unreachable { .. }
            | Error::InvalidAddress { .. }
            | Error::InvalidToken
            | Error::Config(_) => None,
        }
    }

    /// Whether the object asked for does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }

    /// A `NotFound` of a reply that came back without its object.
    pub(crate) fn missing(what: &str, id: &str) -> Error {
        Error::NotFound {
            message: format!("{what} not found: {id}"),
        }
    }
}

/// The field a gateway error names: the leading `path: ` of its first line
/// (or of its first `* ` bullet, Nomad's multi-error layout), where a path
/// joins segments such as `job.task_groups[0].count` and `group "web"` with
/// `": "`.
fn field_name(message: &str) -> Option<String> {
    let line = message
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("* "))
        .or_else(|| message.lines().next())?;
    let parts: Vec<&str> = line.split(": ").collect();
    let taken: Vec<&str> = parts[..parts.len().saturating_sub(1)]
        .iter()
        .copied()
        .take_while(|p| is_path_segment(p))
        .collect();
    (!taken.is_empty()).then(|| taken.join(": "))
}

/// `ident`, `a.b[0].c`, or `ident "label"`.
fn is_path_segment(part: &str) -> bool {
    let (head, label) = match part.split_once(' ') {
        Some((head, label)) => (head, Some(label)),
        None => (part, None),
    };
    let head_ok = head
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && head
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']'));
    let label_ok = label.is_none_or(|l| {
        l.len() >= 2 && l.starts_with('"') && l.ends_with('"') && !l[1..l.len() - 1].contains('"')
    });
    head_ok && label_ok
}

/// The innermost cause of a transport failure (`Connection refused (os error 111)`).
fn innermost_cause(status: &Status) -> String {
    let mut reason = status.message().to_string();
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(s) = source {
        reason = s.to_string();
        source = s.source();
    }
    reason
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_variants() {
        let e = Error::from_status(&Status::not_found("job not found: web"), "a");
        assert!(e.is_not_found());
        assert_eq!(e.to_string(), "job not found: web");
        let e = Error::from_status(&Status::permission_denied("Permission denied"), "a");
        assert!(matches!(e, Error::PermissionDenied { .. }));
        let e = Error::from_status(&Status::failed_precondition("index mismatch"), "a");
        assert!(matches!(e, Error::Conflict { .. }));
        assert_eq!(e.code(), Some(Code::FailedPrecondition));
        let e = Error::from_status(&Status::aborted("lost to concurrent writers"), "a");
        assert_eq!(e.code(), Some(Code::Aborted));
        let e = Error::from_status(&Status::internal("boom"), "a");
        assert_eq!(e.code(), Some(Code::Internal));
        let e = Error::from_status(&Status::unavailable("store: down"), "a");
        assert!(
            matches!(e, Error::Unavailable { leader: None, .. }),
            "{e:?}"
        );
    }

    #[test]
    fn invalid_arguments_name_their_field() {
        let field = |m: &str| match Error::from_status(&Status::invalid_argument(m), "a") {
            Error::InvalidArgument { field, .. } => field,
            other => panic!("not InvalidArgument: {other:?}"),
        };
        assert_eq!(
            field("job.task_groups[0].count: must not be negative").as_deref(),
            Some("job.task_groups[0].count")
        );
        assert_eq!(
            field("1 error occurred:\n\t* group \"web\": count: must be >= 0\n").as_deref(),
            Some("group \"web\": count")
        );
        assert_eq!(field("missing job ID"), None);
        assert_eq!(field("the job is bad: see docs"), None);
    }
}
