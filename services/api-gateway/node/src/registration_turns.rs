//! Turns at registering: at most `max_registrations_in_flight` node
//! registrations are worked on at once. A registration beyond waits for a
//! turn, first come first served, up to `registration_wait_ms`, and is then
//! refused UNAVAILABLE, which nodes retry after a jittered backoff.
//!
//! Without turns, thousands of nodes registering at once (a restart of the
//! cluster, a burst of new nodes) all start at once on a machine that can
//! finish a few hundred a second: each takes longer than the node waits
//! (10 s), the node sends it again, and what a try had done when its node
//! gave up on it (a lease granted, often the node written) was done for
//! nothing. A node the servers held ready that never heard so sent no
//! heartbeat, and went down with whatever had been placed on it. With
//! turns, what is admitted finishes in time and what is refused costs a
//! decode and an answer.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use caravan_gateway_core::error::{GatewayError, Result};

/// The gateway's turns at registering; cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct RegistrationTurns {
    /// `None`: no limit.
    slots: Option<Arc<Semaphore>>,
    max: usize,
    wait: Duration,
}

/// A registration's turn, given back when dropped (the registration ended,
/// or its caller stopped waiting for it).
#[derive(Debug)]
pub(crate) struct Turn {
    _permit: Option<OwnedSemaphorePermit>,
}

impl RegistrationTurns {
    /// At most `max` registrations at once (0: no limit), each waiting up
    /// to `wait` for its turn.
    pub(crate) fn new(max: usize, wait: Duration) -> Self {
        let max = max.min(Semaphore::MAX_PERMITS);
        RegistrationTurns {
            slots: (max > 0).then(|| Arc::new(Semaphore::new(max))),
            max,
            wait,
        }
    }

    /// Waits for a turn; UNAVAILABLE once the wait is over without one.
    pub(crate) async fn take(&self) -> Result<Turn> {
        let Some(slots) = &self.slots else {
            return Ok(Turn { _permit: None });
        };
        match crate::permits::within(slots, 1, self.wait).await {
            Some(permit) => Ok(Turn {
                _permit: Some(permit),
            }),
            None => Err(GatewayError::Unavailable(format!(
                "{} node registrations are in progress (max_registrations_in_flight); \
                 register again shortly",
                self.max
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_registration_beyond_the_limit_waits_its_turn_then_is_refused() {
        let turns = RegistrationTurns::new(2, Duration::from_millis(500));
        let first = turns.take().await.unwrap();
        let _second = turns.take().await.unwrap();

        // Full: the third waits its 500 ms, then hears why it is refused.
        let started = tokio::time::Instant::now();
        let err = turns.take().await.unwrap_err();
        assert_eq!(started.elapsed(), Duration::from_millis(500));
        assert!(matches!(err, GatewayError::Unavailable(_)), "{err:?}");
        assert!(
            err.to_string().contains("max_registrations_in_flight"),
            "{err}"
        );

        // A turn given back during the wait goes to the one waiting.
        let waiting = tokio::spawn({
            let turns = turns.clone();
            async move { turns.take().await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(first);
        waiting.await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn no_limit_and_no_wait_are_what_they_say() {
        let unlimited = RegistrationTurns::new(0, Duration::ZERO);
        let held: Vec<Turn> = futures_all(&unlimited, 1000).await;
        assert_eq!(held.len(), 1000);

        let impatient = RegistrationTurns::new(1, Duration::ZERO);
        let _one = impatient.take().await.unwrap();
        let started = tokio::time::Instant::now();
        assert!(impatient.take().await.is_err());
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    async fn futures_all(turns: &RegistrationTurns, n: usize) -> Vec<Turn> {
        let mut held = Vec::with_capacity(n);
        for _ in 0..n {
            held.push(turns.take().await.unwrap());
        }
        held
    }
}
