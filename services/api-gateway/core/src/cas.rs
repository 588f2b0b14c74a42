//! Compare-and-swap writes: an attempt reads what it changes, builds a
//! transaction compared on the revisions it read and commits it; an attempt
//! that lost its compare to a concurrent writer is made again from a fresh
//! read, up to the gateway's write attempts, and then the write gives up
//! with a conflict for the caller to try again.

use std::fmt::Display;

use caravan_store::{Revision, Txn};

use crate::error::{GatewayError, Result};
use crate::gateway::Gateway;

/// Runs `attempt` until it finishes, at most [`Gateway::attempts`] times;
/// `conflict` is the error once every attempt lost its race.
///
/// An attempt is given its number (from 0) and answers `Ok(Some(_))` when
/// it is done (written, or nothing to write), `Ok(None)` when its compare
/// failed and it should be made again, and an error to stop at once (a
/// failed validation, a missing object, a store failure). Its future owns
/// what it uses (copies of the caller's references), so the write stays
/// `Send` for the request handlers.
pub async fn retry<T, F>(
    gw: &Gateway,
    conflict: impl FnOnce() -> GatewayError,
    attempt: impl FnMut(u32) -> F,
) -> Result<T>
where
    F: Future<Output = Result<Option<T>>>,
{
    retry_times(gw.attempts(), conflict, attempt).await
}

/// [`retry`] with `attempts` tries instead of the gateway's.
pub async fn retry_times<T, F>(
    attempts: u32,
    conflict: impl FnOnce() -> GatewayError,
    mut attempt: impl FnMut(u32) -> F,
) -> Result<T>
where
    F: Future<Output = Result<Option<T>>>,
{
    for n in 0..attempts {
        if let Some(done) = attempt(n).await? {
            return Ok(done);
        }
    }
    Err(conflict())
}

/// Commits `txn` to the store: the revision it was written at, once the
/// cache shows it (so the writer's next read through this gateway sees its
/// write), or `None` when its compare failed.
pub async fn commit(gw: &Gateway, txn: Txn) -> Result<Option<Revision>> {
    let result = gw.store.txn(txn).await?;
    if !result.succeeded {
        return Ok(None);
    }
    gw.settle(result.revision).await;
    Ok(Some(result.revision))
}

/// The conflict a write answers when `what` changed under every attempt.
pub fn kept_changing(what: impl Display) -> GatewayError {
    GatewayError::Conflict(format!("{what} kept changing concurrently; try again"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use caravan_state::{Informer, Keyspace};
    use caravan_store::{Compare, CompareOp, MemStore, Op, Store};
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::config::GatewayConfig;

    const KEY: &[u8] = b"/t/counter";

    /// A gateway over an in-memory store, trying writes `attempts` times.
    async fn gateway(attempts: u32) -> Gateway {
        let store: Arc<dyn Store> = Arc::new(MemStore::new());
        let cache = Informer::start(store.clone(), Keyspace::new("/t"), crate::cache_config())
            .await
            .unwrap();
        let config = GatewayConfig {
            write_attempts: attempts,
            ..GatewayConfig::default()
        };
        Gateway::new(
            store,
            Arc::new(cache),
            config,
            CancellationToken::new(),
            None,
        )
    }

    /// The counter's value and mod revision.
    async fn read(gw: &Gateway) -> (u64, Revision) {
        let kv = gw.store.get(KEY).await.unwrap().unwrap();
        let value = std::str::from_utf8(&kv.value).unwrap().parse().unwrap();
        (value, kv.mod_revision)
    }

    async fn put(gw: &Gateway, value: u64) -> Revision {
        gw.store
            .put(KEY, value.to_string().as_bytes(), 0)
            .await
            .unwrap()
    }

    /// Adds one to the counter, compared on the revision read; attempts
    /// numbered below `meddled` lose their race to a concurrent writer
    /// that sets `100 + attempt` between their read and their commit. Also
    /// answers how many attempts were made.
    async fn increment(gw: &Gateway, meddled: u32) -> (Result<Revision>, u32) {
        let tries = AtomicU32::new(0);
        let tries_ref = &tries;
        let outcome = retry(
            gw,
            || kept_changing("counter"),
            move |n| async move {
                tries_ref.fetch_add(1, Ordering::SeqCst);
                let (value, read_at) = read(gw).await;
                if n < meddled {
                    put(gw, 100 + u64::from(n)).await;
                }
                let txn = Txn::new()
                    .when(Compare::mod_revision(
                        KEY.to_vec(),
                        CompareOp::Equal,
                        read_at,
                    ))
                    .and_then(Op::put(KEY.to_vec(), (value + 1).to_string().into_bytes()));
                commit(gw, txn).await
            },
        )
        .await;
        (outcome, tries.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn a_lost_compare_is_tried_again_from_a_fresh_read() {
        let gw = gateway(3).await;
        put(&gw, 10).await;
        let (outcome, tries) = increment(&gw, 1).await;
        let revision = outcome.unwrap();
        assert_eq!(tries, 2, "one lost attempt, one that wrote");
        let (value, at) = read(&gw).await;
        assert_eq!(value, 101, "built on the concurrent write, not over it");
        assert_eq!(at, revision, "answers the revision of its write");
        assert!(
            gw.cache.revision() >= revision,
            "the cache shows the write when it answers"
        );
    }

    #[tokio::test]
    async fn a_write_that_always_loses_gives_up_after_the_attempts() {
        let gw = gateway(4).await;
        put(&gw, 0).await;
        let (outcome, tries) = increment(&gw, u32::MAX).await;
        assert_eq!(tries, 4, "every attempt made, no more");
        match outcome {
            Err(GatewayError::Conflict(message)) => {
                assert_eq!(message, "counter kept changing concurrently; try again");
            }
            other => panic!("expected a conflict, got {other:?}"),
        }
        assert_eq!(read(&gw).await.0, 103, "only the concurrent writes landed");
    }

    #[tokio::test]
    async fn an_error_stops_the_attempts_at_once() {
        let gw = gateway(5).await;
        let tries = AtomicU32::new(0);
        let tries_ref = &tries;
        let outcome: Result<()> = retry(
            &gw,
            || kept_changing("nothing"),
            move |_| async move {
                tries_ref.fetch_add(1, Ordering::SeqCst);
                Err(GatewayError::NotFound("gone".into()))
            },
        )
        .await;
        assert!(matches!(outcome, Err(GatewayError::NotFound(m)) if m == "gone"));
        assert_eq!(tries.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_write_attempted_zero_times_is_tried_once() {
        let gw = gateway(0).await;
        put(&gw, 1).await;
        let (outcome, tries) = increment(&gw, 0).await;
        outcome.unwrap();
        assert_eq!(tries, 1);
        assert_eq!(read(&gw).await.0, 2);
    }

    #[tokio::test]
    async fn the_attempts_are_numbered_from_zero() {
        let seen = std::sync::Mutex::new(Vec::new());
        let seen_ref = &seen;
        let outcome = retry_times(
            3,
            || kept_changing("numbers"),
            move |n| async move {
                seen_ref.lock().unwrap().push(n);
                Ok((n == 2).then_some(n))
            },
        )
        .await;
        assert_eq!(outcome.unwrap(), 2);
        assert_eq!(*seen.lock().unwrap(), [0, 1, 2]);
    }
}
