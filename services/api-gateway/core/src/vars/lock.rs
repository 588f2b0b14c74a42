//! Locks held in variables (Nomad's `?lock-acquire`, `?lock-renew`,
//! `?lock-release`): a lock has a holder id the gateway makes, a TTL the
//! holder renews within, and a delay that keeps others out once it has
//! lapsed. The lock lives in the stored variable with the time it lapses;
//! nothing runs when it does: a lapsed lock stops counting for its holder at
//! once and for everyone else after its delay, when any gateway next looks.
//!
//! While a lock keeps others out, only a write that presents its id may
//! change or delete the variable.

use caravan_proto::VariableLock;

use crate::error::{GatewayError, Result};

/// Nomad's default lock TTL.
pub const DEFAULT_TTL_NS: i64 = 15_000_000_000;
/// Nomad's default lock delay.
pub const DEFAULT_DELAY_NS: i64 = 15_000_000_000;
/// Nomad's bounds of a lock's TTL.
const MIN_TTL_NS: i64 = 10_000_000_000;
const MAX_TTL_NS: i64 = 24 * 3600 * 1_000_000_000;

/// What a write asks of a variable's lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockOp {
    /// A plain write or delete, by the lock's holder when `id` is its id.
    Write {
        /// The lock's id as the writer presents it.
        id: Option<String>,
    },
    /// Take the lock (TTL and delay in nanoseconds, 0 for the defaults).
    Acquire {
        /// The lock's TTL.
        ttl_ns: i64,
        /// How long the lock keeps others out after it lapses.
        delay_ns: i64,
    },
    /// Give it back.
    Release {
        /// The holder's lock id.
        id: String,
    },
    /// Extend it by its TTL.
    Renew {
        /// The holder's lock id.
        id: String,
    },
}

/// Whether `lock` still keeps everyone but its holder out at `now`: until
/// it lapses and for its delay after.
pub fn keeps_out(lock: Option<&VariableLock>, now: i64) -> bool {
    lock.is_some_and(|l| now < l.expires_unix_ns.saturating_add(l.lock_delay_ns))
}

/// Whether the holder of `id` still holds `lock` at `now` (it has not
/// lapsed).
pub fn held_by(lock: Option<&VariableLock>, id: &str, now: i64) -> bool {
    lock.is_some_and(|l| l.id == id && now < l.expires_unix_ns)
}

/// Whether a write presenting `id` is refused by `lock` at `now`: the lock
/// keeps others out and `id` is not its holder's.
pub fn refuses(lock: Option<&VariableLock>, id: Option<&str>, now: i64) -> bool {
    keeps_out(lock, now) && lock.is_some_and(|l| id != Some(l.id.as_str()))
}

/// The lock the variable shows at `now`: the stored one while it keeps
/// others out, else none.
pub fn shown(lock: Option<&VariableLock>, now: i64) -> Option<VariableLock> {
    lock.filter(|_| keeps_out(lock, now)).cloned()
}

/// A new lock for `acquire`, with Nomad's defaults and bounds.
pub fn new_lock(ttl_ns: i64, delay_ns: i64, now: i64) -> Result<VariableLock> {
    if ttl_ns < 0 || delay_ns < 0 {
        return Err(GatewayError::field(
            "Lock",
            "Lock delay and TTL must be positive",
        ));
    }
    let ttl_ns = if ttl_ns == 0 { DEFAULT_TTL_NS } else { ttl_ns };
    let delay_ns = if delay_ns == 0 {
        DEFAULT_DELAY_NS
    } else {
        delay_ns
    };
    if !(MIN_TTL_NS..=MAX_TTL_NS).contains(&ttl_ns) {
        return Err(GatewayError::field(
            "Lock.TTL",
            "Lock TTL must be between 10 seconds and 24 hours",
        ));
    }
    Ok(VariableLock {
        id: uuid::Uuid::new_v4().to_string(),
        ttl_ns,
        lock_delay_ns: delay_ns,
        expires_unix_ns: now.saturating_add(ttl_ns),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    fn lock() -> VariableLock {
        VariableLock {
            id: "holder".into(),
            ttl_ns: 15 * S,
            lock_delay_ns: 10 * S,
            expires_unix_ns: 100 * S,
        }
    }

    #[test]
    fn a_lapsed_lock_keeps_others_out_for_its_delay_and_its_holder_out_at_once() {
        let l = lock();
        assert!(held_by(Some(&l), "holder", 99 * S));
        assert!(!held_by(Some(&l), "holder", 100 * S));
        assert!(!held_by(Some(&l), "other", 99 * S));
        assert!(keeps_out(Some(&l), 109 * S));
        assert!(!keeps_out(Some(&l), 110 * S));
        assert!(refuses(Some(&l), None, 105 * S));
        assert!(refuses(Some(&l), Some("other"), 50 * S));
        assert!(!refuses(Some(&l), Some("holder"), 50 * S));
        assert!(!refuses(Some(&l), None, 110 * S));
        assert!(!refuses(None, None, 0));
        assert_eq!(shown(Some(&l), 109 * S), Some(l.clone()));
        assert_eq!(shown(Some(&l), 110 * S), None);
    }

    #[test]
    fn new_locks_take_nomads_defaults_and_bounds() {
        let l = new_lock(0, 0, 5).expect("defaults");
        assert_eq!(
            (l.ttl_ns, l.lock_delay_ns),
            (DEFAULT_TTL_NS, DEFAULT_DELAY_NS)
        );
        assert_eq!(l.expires_unix_ns, 5 + DEFAULT_TTL_NS);
        assert!(!l.id.is_empty());
        assert!(new_lock(S, 0, 0).is_err());
        assert!(new_lock(-S, 0, 0).is_err());
        assert!(new_lock(25 * 3600 * S, 0, 0).is_err());
        assert!(new_lock(20 * S, 3 * S, 0).is_ok());
    }
}
