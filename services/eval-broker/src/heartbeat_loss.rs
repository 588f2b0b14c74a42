//! Telling a node failure from a server-side one. When many nodes lose their
//! heartbeat at once, the likelier cause is the servers (starved of CPU,
//! cut off from the nodes) rather than the nodes: marking them all down
//! would replace their allocations and pile more work on servers already
//! behind. Such nodes get a grace to heartbeat again before they are marked
//! down, as Kubernetes stops evicting from a zone that lost most of its
//! nodes at once.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// How far back heartbeat losses count together.
const WINDOW: Duration = Duration::from_secs(10);

/// The heartbeat losses of the last [`WINDOW`].
#[derive(Debug, Default)]
pub struct LossWindow {
    losses: VecDeque<Instant>,
}

impl LossWindow {
    /// Notes `count` nodes that lost their heartbeat at `now`.
    pub fn note(&mut self, count: usize, now: Instant) {
        self.losses.extend(std::iter::repeat_n(now, count));
        while self
            .losses
            .front()
            .is_some_and(|at| now.duration_since(*at) > WINDOW)
        {
            self.losses.pop_front();
        }
    }

    /// Whether the losses of the window are at least `min_nodes` and
    /// `percent` of the `up` nodes (those lost included): a mass loss.
    /// `min_nodes` 0 never is.
    pub fn is_mass(&self, up: usize, min_nodes: usize, percent: u32) -> bool {
        let lost = self.losses.len();
        min_nodes > 0
            && lost >= min_nodes
            && lost.saturating_mul(100) >= up.saturating_mul(percent as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_nodes_at_once_are_a_mass_loss_and_few_or_old_ones_are_not() {
        let t0 = Instant::now();
        let mut w = LossWindow::default();
        w.note(9, t0);
        assert!(!w.is_mass(20, 10, 30), "fewer than the minimum");
        w.note(1, t0 + Duration::from_secs(5));
        assert!(w.is_mass(20, 10, 30), "10 of 20 within the window");
        assert!(!w.is_mass(100, 10, 30), "10 of 100 is a few nodes failing");
        assert!(!w.is_mass(20, 0, 30), "0 turns it off");
        w.note(0, t0 + Duration::from_secs(12));
        assert!(!w.is_mass(20, 2, 1), "the first 9 left the window: {w:?}");
        assert!(w.is_mass(2, 1, 30), "the later one is still in it");
    }
}
