//! When this node last reached the servers (a registration or heartbeat a
//! gateway answered), so that groups with `disconnect.stop_on_client_after`
//! stop their tasks once it has been cut off for that long, as their
//! servers will have replaced them by then.

use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// The node's last contact with the servers; starts at the client's start,
/// which gives a node that never reaches them the same grace.
#[derive(Debug)]
pub struct ServerContact {
    last_ok: Mutex<Instant>,
}

impl Default for ServerContact {
    fn default() -> Self {
        ServerContact {
            last_ok: Mutex::new(Instant::now()),
        }
    }
}

impl ServerContact {
    /// A gateway answered just now.
    pub fn ok(&self) {
        *self.last_ok.lock() = Instant::now();
    }

    /// When the servers last answered.
    pub fn last_ok(&self) -> Instant {
        *self.last_ok.lock()
    }

    /// Whether the servers have not answered for at least `limit`.
    pub fn lost_for(&self, limit: Duration) -> bool {
        self.last_ok().elapsed() >= limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn contact_is_lost_only_after_the_limit_without_an_answer() {
        let c = ServerContact::default();
        let limit = Duration::from_secs(30);
        assert!(!c.lost_for(limit));
        tokio::time::advance(Duration::from_secs(29)).await;
        assert!(!c.lost_for(limit));
        c.ok();
        tokio::time::advance(Duration::from_secs(29)).await;
        assert!(!c.lost_for(limit), "the answer reset the clock");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(c.lost_for(limit));
    }
}
