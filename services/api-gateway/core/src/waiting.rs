//! How many blocking queries of this gateway wait for a change: what its
//! `caravan_gateway_blocking_queries` gauge shows. A leaf: the gateway's
//! context holds one, and the queries count themselves in it.

use std::sync::atomic::{AtomicI64, Ordering};

/// The blocking queries of one gateway waiting for a change: what its
/// `caravan_gateway_blocking_queries` gauge shows.
#[derive(Debug, Default)]
pub struct Waiting(AtomicI64);

impl Waiting {
    /// Counts a query as waiting until the guard drops. Taken once the
    /// query is sure to see any later change: a write made while it is
    /// counted wakes it.
    pub fn enter(&self) -> WaitingGuard<'_> {
        self.0.fetch_add(1, Ordering::Relaxed);
        WaitingGuard(self)
    }

    /// How many wait now.
    pub fn count(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// One waiting query, counted while it lives.
#[derive(Debug)]
pub struct WaitingGuard<'a>(&'a Waiting);

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::Relaxed);
    }
}
