//! Errors to gRPC statuses: leader hints for followers, field-naming invalid
//! arguments, and the store's errors.

use caravan_store::StoreError;
use tonic::metadata::MetadataValue;
use tonic::{Code, Status};

/// Metadata key carrying the current leader's address on an UNAVAILABLE reply.
pub const LEADER_HINT: &str = "x-caravan-leader";

/// Metadata key marking an UNAVAILABLE reply as a refusal by a replica that
/// does not lead (whether or not it knows who does): the request was not
/// acted on, and the caller may go to the leader.
pub const NOT_LEADER: &str = "x-caravan-not-leader";

/// The reply of a follower to a leader-only call: UNAVAILABLE marked
/// [`NOT_LEADER`], naming the leader in [`LEADER_HINT`] when one is known so
/// the caller can go there.
pub fn not_leader(service: &str, leader: Option<&str>) -> Status {
    let mut status = match leader {
        Some(addr) => {
            Status::unavailable(format!("{service}: not the leader; the leader is {addr}"))
        }
        None => Status::unavailable(format!("{service}: no leader elected")),
    };
    status
        .metadata_mut()
        .insert(NOT_LEADER, MetadataValue::from_static("1"));
    if let Some(addr) = leader
        && let Ok(value) = addr.parse()
    {
        status.metadata_mut().insert(LEADER_HINT, value);
    }
    status
}

/// Whether a reply is a refusal by a replica that does not lead (see
/// [`not_leader`]), told by its code and metadata alone.
pub fn is_not_leader(status: &Status) -> bool {
    status.code() == Code::Unavailable
        && (status.metadata().get(NOT_LEADER).is_some()
            || status.metadata().get(LEADER_HINT).is_some())
}

/// The leader address a `not_leader` reply carries, if any.
pub fn leader_hint(status: &Status) -> Option<String> {
    if status.code() != Code::Unavailable {
        return None;
    }
    status
        .metadata()
        .get(LEADER_HINT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Metadata key marking an UNAVAILABLE reply whose request was certainly not
/// acted on (refused before any write), so the caller may simply retry.
pub const NOT_APPLIED: &str = "x-caravan-not-applied";

/// UNAVAILABLE for a request that was refused before anything was written.
pub fn unavailable_not_applied(message: impl Into<String>) -> Status {
    let mut status = Status::unavailable(message);
    status
        .metadata_mut()
        .insert(NOT_APPLIED, MetadataValue::from_static("1"));
    status
}

/// Whether an UNAVAILABLE reply says its request was not acted on.
pub fn not_applied(status: &Status) -> bool {
    status.code() == Code::Unavailable && status.metadata().get(NOT_APPLIED).is_some()
}

/// INVALID_ARGUMENT naming the offending field, e.g.
/// `invalid_field("job.task_groups[0].count", "must not be negative")`.
pub fn invalid_field(field: &str, problem: &str) -> Status {
    Status::invalid_argument(format!("{field}: {problem}"))
}

/// The status a store failure is reported with.
pub fn from_store(err: &StoreError) -> Status {
    match err {
        StoreError::InvalidArgument(m) => Status::invalid_argument(m.clone()),
        StoreError::Unavailable(m) | StoreError::Closed(m) => {
            Status::unavailable(format!("store: {m}"))
        }
        StoreError::Compacted { .. } | StoreError::FutureRevision { .. } => {
            Status::out_of_range(err.to_string())
        }
        StoreError::LeaseNotFound(_) => Status::not_found(err.to_string()),
        // Not UNAVAILABLE: a full store stays full until an operator acts,
        // and retrying callers would only add to the load.
        StoreError::NoSpace(_) => Status::resource_exhausted(err.to_string()),
        StoreError::Internal(_) => Status::internal(err.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::PLAN_APPLIER;

    #[test]
    fn not_applied_round_trips_and_is_not_assumed() {
        assert!(not_applied(&unavailable_not_applied("broker unreachable")));
        assert!(!not_applied(&Status::unavailable("outcome unknown")));
        assert!(!not_applied(&not_leader(PLAN_APPLIER, None)));
    }

    #[test]
    fn leader_hint_round_trips() {
        let status = not_leader(PLAN_APPLIER, Some("10.0.0.7:4650"));
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(leader_hint(&status).as_deref(), Some("10.0.0.7:4650"));
        assert!(status.message().contains("10.0.0.7:4650"));
        assert_eq!(leader_hint(&not_leader(PLAN_APPLIER, None)), None);
        assert_eq!(leader_hint(&Status::internal("x")), None);
    }

    #[test]
    fn not_leader_is_told_by_code_and_metadata_not_by_message() {
        assert!(is_not_leader(&not_leader(
            PLAN_APPLIER,
            Some("10.0.0.7:4650")
        )));
        assert!(is_not_leader(&not_leader(PLAN_APPLIER, None)));
        // The words alone do not make a refusal: only the marker does.
        assert!(!is_not_leader(&Status::unavailable(
            "plan-applier: not the leader; no leader elected"
        )));
        assert!(!is_not_leader(&unavailable_not_applied(
            "broker unreachable"
        )));
        // Nor does the marker on another code.
        let mut other = Status::internal("x");
        other
            .metadata_mut()
            .insert(NOT_LEADER, MetadataValue::from_static("1"));
        assert!(!is_not_leader(&other));
    }

    #[test]
    fn store_errors_map_to_codes() {
        assert_eq!(
            from_store(&StoreError::Unavailable("down".into())).code(),
            Code::Unavailable
        );
        assert_eq!(
            from_store(&StoreError::InvalidArgument("too many ops".into())).code(),
            Code::InvalidArgument
        );
        let compacted = StoreError::Compacted {
            requested: 1,
            compact_revision: 5,
        };
        assert_eq!(from_store(&compacted).code(), Code::OutOfRange);
        let full = from_store(&StoreError::NoSpace(
            "etcdserver: mvcc: database space exceeded".into(),
        ));
        assert_eq!(full.code(), Code::ResourceExhausted);
        assert!(
            full.message().contains("alarm disarm"),
            "{}",
            full.message()
        );
    }

    #[test]
    fn invalid_field_names_the_field() {
        let s = invalid_field("job.task_groups[0].count", "must not be negative");
        assert_eq!(s.code(), Code::InvalidArgument);
        assert_eq!(
            s.message(),
            "job.task_groups[0].count: must not be negative"
        );
    }
}
