//! Pauses between attempts at something that failed (reaching the store,
//! a watch, a peer): doubling from a first pause to a cap, with optional
//! jitter so that many callers that failed together do not retry together.

use std::time::Duration;

/// Exponential pauses between attempts.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
    jitter: f64,
}

impl Backoff {
    /// Pauses starting at `first` and doubling up to `max`, without jitter.
    pub fn new(first: Duration, max: Duration) -> Self {
        Backoff {
            first,
            max: max.max(first),
            next: first,
            jitter: 0.0,
        }
    }

    /// Lengthens each pause by a random part of it, up to `fraction`
    /// (clamped to 0..=1): 0.2 makes a 1 s pause last 1 to 1.2 s.
    #[must_use]
    pub fn with_jitter(mut self, fraction: f64) -> Self {
        self.jitter = fraction.clamp(0.0, 1.0);
        self
    }

    /// The next pause; the one after it is twice as long, up to the cap.
    pub fn next_delay(&mut self) -> Duration {
        let pause = self.next;
        self.next = (self.next * 2).min(self.max);
        if self.jitter > 0.0 {
            pause + pause.mul_f64(rand::random::<f64>() * self.jitter)
        } else {
            pause
        }
    }

    /// Sleeps for the next pause.
    pub async fn wait(&mut self) {
        tokio::time::sleep(self.next_delay()).await;
    }

    /// Back to the first pause, after a success.
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn millis(d: Duration) -> u64 {
        u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
    }

    #[test]
    fn pauses_double_up_to_the_cap_and_reset() {
        let mut b = Backoff::new(Duration::from_millis(250), Duration::from_secs(5));
        let pauses: Vec<u64> = (0..7).map(|_| millis(b.next_delay())).collect();
        assert_eq!(pauses, [250, 500, 1_000, 2_000, 4_000, 5_000, 5_000]);
        b.reset();
        assert_eq!(millis(b.next_delay()), 250);
    }

    #[test]
    fn jitter_only_lengthens_and_stays_within_its_fraction() {
        let mut b =
            Backoff::new(Duration::from_millis(100), Duration::from_secs(1)).with_jitter(0.2);
        let pauses: Vec<Duration> = (0..6).map(|_| b.next_delay()).collect();
        assert!(pauses[0] >= Duration::from_millis(100) && pauses[0] <= Duration::from_millis(120));
        assert!(pauses[5] >= Duration::from_secs(1) && pauses[5] <= Duration::from_millis(1_200));
    }

    #[test]
    fn a_cap_below_the_first_pause_is_the_first_pause() {
        let mut b = Backoff::new(Duration::from_millis(300), Duration::from_millis(100));
        assert_eq!(millis(b.next_delay()), 300);
        assert_eq!(millis(b.next_delay()), 300);
    }
}
