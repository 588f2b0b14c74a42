//! Waiting a bounded time for room in a semaphore, as the status backlog
//! and registration turns both do.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

/// `n` permits of `semaphore`, waiting in line up to `wait` for them;
/// `None` when the wait is over (or is zero) without them. Permits free now
/// are taken without arming a timer, as nearly every caller finds them.
pub(crate) async fn within(
    semaphore: &Arc<Semaphore>,
    n: u32,
    wait: Duration,
) -> Option<OwnedSemaphorePermit> {
    match Arc::clone(semaphore).try_acquire_many_owned(n) {
        Ok(permit) => Some(permit),
        Err(TryAcquireError::NoPermits) if !wait.is_zero() => {
            tokio::time::timeout(wait, Arc::clone(semaphore).acquire_many_owned(n))
                .await
                .ok()
                .and_then(Result::ok)
        }
        Err(_) => None,
    }
}
