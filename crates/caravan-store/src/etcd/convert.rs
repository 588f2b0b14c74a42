//! Translation between the store's types and etcd-client's, and of etcd's
//! errors into [`StoreError`].

use etcd_client as ec;
use tonic::Code;

use crate::error::StoreError;
use crate::types::{
    Compare, CompareOp, CompareTarget, Event, EventKind, KeyValue, LeaseId, Op, OpResult, Range,
    RangeResult, Revision, Txn,
};

/// What a failed call was about, so its error can name the lease or revision.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Context {
    /// The lease the call used, if any.
    pub lease: LeaseId,
    /// The revision the call asked for, if any.
    pub revision: Revision,
}

impl Context {
    pub fn lease(lease: LeaseId) -> Self {
        Context {
            lease,
            ..Context::default()
        }
    }

    pub fn revision(revision: Revision) -> Self {
        Context {
            revision,
            ..Context::default()
        }
    }
}

/// Maps an etcd-client error. etcd reports most conditions only in the
/// message of a gRPC status, so the message is what tells them apart.
pub(super) fn error(err: ec::Error, ctx: Context) -> StoreError {
    match err {
        ec::Error::GRpcStatus(status) => status_error(&status, ctx),
        ec::Error::TransportError(err) => StoreError::Unavailable(error_chain(&err)),
        ec::Error::IoError(err) => StoreError::Unavailable(err.to_string()),
        ec::Error::LeaseKeepAliveError(msg) if msg.contains("not found") => {
            StoreError::LeaseNotFound(ctx.lease)
        }
        ec::Error::LeaseKeepAliveError(msg) | ec::Error::WatchError(msg) => StoreError::Closed(msg),
        ec::Error::InvalidArgs(msg) => StoreError::InvalidArgument(msg),
        ec::Error::InvalidUri(err) => StoreError::InvalidArgument(err.to_string()),
        ec::Error::EndpointError(msg) => StoreError::Unavailable(msg),
        other => StoreError::Internal(other.to_string()),
    }
}

/// Whether a failed request never reached etcd, so sending it again cannot
/// apply it twice: the connection could not be made, or the member refused
/// it for want of a leader before looking at it.
pub(super) fn unsent(err: &ec::Error) -> bool {
    let status = match err {
        ec::Error::GRpcStatus(status) => status,
        ec::Error::TransportError(_) => return true,
        _ => return false,
    };
    if status.code() != Code::Unavailable {
        return false;
    }
    if status.message().contains("etcdserver: no leader") {
        return true;
    }
    let mut source = std::error::Error::source(status);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused
                    | std::io::ErrorKind::AddrNotAvailable
                    | std::io::ErrorKind::NotConnected
            )
        {
            return true;
        }
        source = err.source();
    }
    // hyper's connector names its failure; the cause may not be attached.
    status.message().contains("tcp connect error")
}

fn status_error(status: &tonic::Status, ctx: Context) -> StoreError {
    let msg = status.message();
    if msg.contains("requested lease not found") {
        return StoreError::LeaseNotFound(ctx.lease);
    }
    if msg.contains("required revision has been compacted") {
        // etcd does not say where it compacted to.
        return StoreError::Compacted {
            requested: ctx.revision,
            compact_revision: 0,
        };
    }
    if msg.contains("required revision is a future revision") {
        return StoreError::FutureRevision {
            requested: ctx.revision,
            current: 0,
        };
    }
    // etcd's NOSPACE refusal: RESOURCE_EXHAUSTED "etcdserver: mvcc:
    // database space exceeded" (the same code also means "too many
    // requests", which is not this).
    if msg.contains("database space exceeded") {
        return StoreError::NoSpace(msg.to_string());
    }
    if msg.contains("too many operations")
        || msg.contains("request is too large")
        || msg.contains("larger than max")
        || msg.contains("too large lease TTL")
    {
        return StoreError::InvalidArgument(msg.to_string());
    }
    match status.code() {
        Code::InvalidArgument | Code::OutOfRange => StoreError::InvalidArgument(msg.to_string()),
        Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled => {
            StoreError::Unavailable(with_causes(status))
        }
        // tonic reports a connection that broke mid-request (a member killed
        // or frozen) as Unknown "transport error" or an h2 error.
        Code::Unknown if msg.contains("transport error") || msg.contains("h2 protocol error") => {
            StoreError::Unavailable(with_causes(status))
        }
        Code::NotFound if ctx.lease != 0 => StoreError::LeaseNotFound(ctx.lease),
        _ => StoreError::Internal(format!("{:?}: {msg}", status.code())),
    }
}

/// A status's message followed by its causes: why a connection failed (a
/// refused TLS handshake, an unknown CA) is only in the causes.
fn with_causes(status: &tonic::Status) -> String {
    append_causes(
        status.message().to_string(),
        std::error::Error::source(status),
    )
}

/// An error with its causes, `outer: inner: innermost`: tonic's and
/// rustls's own messages say only "transport error" at the top, and why a
/// handshake failed (unknown CA, no client certificate) is further down.
pub(super) fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    append_causes(err.to_string(), err.source())
}

fn append_causes(
    mut text: String,
    mut source: Option<&(dyn std::error::Error + 'static)>,
) -> String {
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// A key from etcd.
pub(super) fn key_value(kv: &ec::KeyValue, keys_only: bool) -> KeyValue {
    KeyValue {
        key: kv.key().to_vec(),
        value: if keys_only {
            Vec::new()
        } else {
            kv.value().to_vec()
        },
        create_revision: kv.create_revision(),
        mod_revision: kv.mod_revision(),
        version: kv.version(),
        lease: kv.lease(),
    }
}

/// A watch event from etcd.
pub(super) fn event(ev: &ec::Event) -> Option<Event> {
    let kind = match ev.event_type() {
        ec::EventType::Put => EventKind::Put,
        ec::EventType::Delete => EventKind::Delete,
    };
    ev.kv().map(|kv| Event {
        kind,
        kv: key_value(kv, false),
    })
}

/// The read options of a range.
pub(super) fn get_options(range: &Range) -> ec::GetOptions {
    let mut options = ec::GetOptions::new()
        .with_limit(range.limit)
        .with_revision(range.revision);
    if !range.end.is_empty() {
        options = options.with_range(range.end.clone());
    }
    if range.keys_only {
        options = options.with_keys_only();
    }
    options
}

/// The delete options of a range.
pub(super) fn delete_options(range: &Range) -> ec::DeleteOptions {
    let options = ec::DeleteOptions::new();
    if range.end.is_empty() {
        options
    } else {
        options.with_range(range.end.clone())
    }
}

/// The answer to a range read.
pub(super) fn range_result(resp: &ec::GetResponse, keys_only: bool) -> RangeResult {
    RangeResult {
        kvs: resp
            .kvs()
            .iter()
            .map(|kv| key_value(kv, keys_only))
            .collect(),
        revision: resp.header().map_or(0, |h| h.revision()),
        more: resp.more(),
        count: resp.count(),
    }
}

fn compare_op(op: CompareOp) -> ec::CompareOp {
    match op {
        CompareOp::Equal => ec::CompareOp::Equal,
        CompareOp::NotEqual => ec::CompareOp::NotEqual,
        CompareOp::Less => ec::CompareOp::Less,
        CompareOp::Greater => ec::CompareOp::Greater,
    }
}

fn compare(c: &Compare) -> ec::Compare {
    let key = c.key.clone();
    let op = compare_op(c.op);
    match &c.target {
        CompareTarget::Value(value) => ec::Compare::value(key, op, value.clone()),
        CompareTarget::ModRevision(rev) => ec::Compare::mod_revision(key, op, *rev),
        CompareTarget::CreateRevision(rev) => ec::Compare::create_revision(key, op, *rev),
        CompareTarget::Version(version) => ec::Compare::version(key, op, *version),
    }
}

fn txn_op(op: &Op) -> ec::TxnOp {
    match op {
        Op::Put { key, value, lease } => {
            let options = (*lease != 0).then(|| ec::PutOptions::new().with_lease(*lease));
            ec::TxnOp::put(key.clone(), value.clone(), options)
        }
        Op::Delete(range) => ec::TxnOp::delete(range.start.clone(), Some(delete_options(range))),
        Op::Get(range) => ec::TxnOp::get(range.start.clone(), Some(get_options(range))),
    }
}

/// A transaction for etcd.
pub(super) fn txn(txn: &Txn) -> ec::Txn {
    // etcd-client's builder insists on when → and_then → or_else, once each.
    ec::Txn::new()
        .when(txn.compares.iter().map(compare).collect::<Vec<_>>())
        .and_then(txn.success.iter().map(txn_op).collect::<Vec<_>>())
        .or_else(txn.failure.iter().map(txn_op).collect::<Vec<_>>())
}

/// The answers to the ops of the branch that ran; a Get answer carries the
/// transaction's revision, as the embedded store's does.
pub(super) fn op_results(
    resp: &ec::TxnResponse,
    ops: &[Op],
    revision: Revision,
) -> Result<Vec<OpResult>, StoreError> {
    resp.op_responses()
        .iter()
        .zip(ops)
        .map(|(answer, op)| match answer {
            ec::TxnOpResponse::Put(_) => Ok(OpResult::Put),
            ec::TxnOpResponse::Delete(del) => Ok(OpResult::Delete(del.deleted())),
            ec::TxnOpResponse::Get(get) => {
                let keys_only = matches!(op, Op::Get(range) if range.keys_only);
                let mut range = range_result(get, keys_only);
                range.revision = revision;
                Ok(OpResult::Get(range))
            }
            ec::TxnOpResponse::Txn(_) => Err(StoreError::Internal(
                "etcd answered a nested transaction that was never sent".into(),
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_connection_is_unavailable() {
        for msg in [
            "transport error",
            "h2 protocol error: stream no longer needed",
        ] {
            let err = status_error(&tonic::Status::unknown(msg), Context::default());
            assert!(matches!(err, StoreError::Unavailable(_)), "{msg}: {err:?}");
        }
        let other = status_error(
            &tonic::Status::unknown("something else"),
            Context::default(),
        );
        assert!(matches!(other, StoreError::Internal(_)), "{other:?}");
    }

    #[test]
    fn a_full_store_is_no_space_and_says_what_the_operator_does() {
        let full = tonic::Status::resource_exhausted("etcdserver: mvcc: database space exceeded");
        let err = status_error(&full, Context::default());
        assert!(err.is_no_space(), "{err:?}");
        let text = err.to_string();
        for word in ["store full", "compact", "defrag", "alarm disarm"] {
            assert!(text.contains(word), "{word} missing from {text}");
        }
        // The same code for a rate limit is not a full store.
        let busy = tonic::Status::resource_exhausted("etcdserver: too many requests");
        assert!(!status_error(&busy, Context::default()).is_no_space());
    }
}
