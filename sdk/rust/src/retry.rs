//! Which failed calls may be sent again, and how long to wait between rounds.
//!
//! Every api-gateway replica serves every call (the gateways keep no state of
//! their own; leader-only work is forwarded by the gateway to the leader of
//! the service behind it). So a call that may be repeated moves on to the
//! next gateway address when one does not answer, and a call that must not
//! be repeated is sent again only when it certainly was not acted on:
//!
//! * it never left this process (no connection could be made), or
//! * the gateway answered UNAVAILABLE marked as a refusal by a replica that
//!   does not lead (`x-caravan-not-leader`, with the leader named in
//!   `x-caravan-leader` when known) or as not applied
//!   (`x-caravan-not-applied`). The gateway follows the hint itself on the
//!   next call, so sending the call again reaches the new leader.

use std::time::Duration;

use tonic::{Code, Status};

/// Metadata naming the current leader on an UNAVAILABLE refusal (the
/// services' `caravan_runtime::status::LEADER_HINT`).
pub const LEADER_HINT: &str = "x-caravan-leader";
/// Metadata marking an UNAVAILABLE reply as a refusal by a replica that does
/// not lead: nothing was done.
pub const NOT_LEADER: &str = "x-caravan-not-leader";
/// Metadata marking an UNAVAILABLE reply whose request was not acted on.
pub const NOT_APPLIED: &str = "x-caravan-not-applied";

/// Whether sending a call twice can change the outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idempotence {
    /// Reads, and writes whose repetition leaves the same state (setting a
    /// node's eligibility, pausing a deployment): retried on any UNAVAILABLE.
    Repeatable,
    /// Writes that create something each time (an evaluation, a job
    /// version, a dispatched child) or whose repetition would fail
    /// spuriously (a check-index register): retried only when the request
    /// certainly was not acted on.
    Once,
}

/// How many rounds over the gateway addresses a call may take, and the
/// pause between rounds (doubling from `initial_backoff` up to `max_backoff`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Rounds over every address; 1 tries each address once.
    pub rounds: u32,
    /// The pause before the second round.
    pub initial_backoff: Duration,
    /// The longest pause between rounds.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    /// Four rounds, 100 ms doubling to 2 s: a gateway restarting under a
    /// rolling update is ridden out, a dead cluster fails within seconds.
    fn default() -> Self {
        RetryPolicy {
            rounds: 4,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
        }
    }
}

impl RetryPolicy {
    /// Every call sent once, to each address at most once.
    pub fn none() -> Self {
        RetryPolicy {
            rounds: 1,
            ..RetryPolicy::default()
        }
    }

    /// The pause after failed round `round` (0-based).
    pub fn backoff(&self, round: u32) -> Duration {
        let factor = 2u32.saturating_pow(round.min(16));
        self.initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }
}

/// Whether a call of this `idempotence` that failed with `status` may be
/// sent again (to the next address).
pub fn may_retry(idempotence: Idempotence, status: &Status) -> bool {
    if status.code() != Code::Unavailable {
        return false;
    }
    idempotence == Idempotence::Repeatable || was_not_acted_on(status)
}

/// Whether an UNAVAILABLE reply certainly left the state untouched.
fn was_not_acted_on(status: &Status) -> bool {
    let meta = status.metadata();
    was_not_sent(status)
        || meta.get(NOT_LEADER).is_some()
        || meta.get(LEADER_HINT).is_some()
        || meta.get(NOT_APPLIED).is_some()
}

/// Whether the request never reached a gateway: no connection could be made
/// (refused, unresolvable, timed out while connecting). Told by the error
/// types among the status's causes (tonic's `ConnectError`, a refused
/// connection's I/O error), not by its wording.
pub fn was_not_sent(status: &Status) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(s) = source {
        if s.downcast_ref::<tonic::ConnectError>().is_some() {
            return true;
        }
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::AddrNotAvailable
            )
        {
            return true;
        }
        source = s.source();
    }
    false
}

/// The leader a refusal names, if any.
pub fn leader_hint(status: &Status) -> Option<String> {
    if status.code() != Code::Unavailable {
        return None;
    }
    let value = status.metadata().get(LEADER_HINT)?;
    value.to_str().ok().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use tonic::metadata::MetadataValue;

    use super::*;

    #[test]
    fn metadata_names_are_the_services_own() {
        use caravan_runtime::status;
        assert_eq!(LEADER_HINT, status::LEADER_HINT);
        assert_eq!(NOT_LEADER, status::NOT_LEADER);
        assert_eq!(NOT_APPLIED, status::NOT_APPLIED);
    }

    #[test]
    fn repeatable_calls_retry_only_unavailable() {
        let r = Idempotence::Repeatable;
        assert!(may_retry(r, &Status::unavailable("store: down")));
        assert!(!may_retry(r, &Status::not_found("job not found")));
        assert!(!may_retry(r, &Status::deadline_exceeded("slow")));
        assert!(!may_retry(r, &Status::internal("boom")));
    }

    #[test]
    fn once_calls_retry_only_what_was_not_acted_on() {
        let once = Idempotence::Once;
        // The outcome of a write the gateway failed on is unknown.
        assert!(!may_retry(once, &Status::unavailable("store: timeout")));
        // A refusal by a replica that does not lead did nothing.
        let refused = caravan_runtime::status::not_leader("eval-broker", Some("10.0.0.7:4650"));
        assert!(may_retry(once, &refused));
        assert_eq!(leader_hint(&refused).as_deref(), Some("10.0.0.7:4650"));
        assert!(may_retry(
            once,
            &caravan_runtime::status::not_leader("eval-broker", None)
        ));
        assert!(may_retry(
            once,
            &caravan_runtime::status::unavailable_not_applied("broker unreachable")
        ));
        // The marker counts only on UNAVAILABLE.
        let mut other = Status::internal("x");
        other
            .metadata_mut()
            .insert(NOT_APPLIED, MetadataValue::from_static("1"));
        assert!(!may_retry(once, &other));
    }

    #[test]
    fn a_refused_connection_was_not_sent() {
        let mut status = Status::unavailable("tcp connect error");
        assert!(!was_not_sent(&status));
        status.set_source(std::sync::Arc::new(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        )));
        assert!(was_not_sent(&status));
        assert!(may_retry(Idempotence::Once, &status));
        // A reset after the request went out is not a refusal.
        let mut reset = Status::unavailable("connection reset");
        reset.set_source(std::sync::Arc::new(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        )));
        assert!(!may_retry(Idempotence::Once, &reset));
        // Any failure to connect, a DNS failure say, is told by its type.
        let mut dns = Status::unavailable("dns error");
        dns.set_source(std::sync::Arc::new(tonic::ConnectError(
            "failed to lookup address information".into(),
        )));
        assert!(was_not_sent(&dns));
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let p = RetryPolicy::default();
        assert_eq!(p.backoff(0), Duration::from_millis(100));
        assert_eq!(p.backoff(1), Duration::from_millis(200));
        assert_eq!(p.backoff(10), Duration::from_secs(2));
        assert_eq!(p.backoff(u32::MAX), Duration::from_secs(2));
    }
}
