//! Issue 49's fault bench, short round: faults other than process kills
//! injected on this machine among processes and stores the tests start
//! themselves (partitions, a full store, a frozen disk, clock jumps), each
//! checked for the chaos run's invariants (no lost evaluation, no
//! over-committed node, no duplicate live name) plus the promise specific to
//! its fault. `CARAVAN_FAULT_ROUNDS` repeats each fault for the long run by
//! hand (default 1). Build the binaries first (`cargo build --workspace
//! --bins`; `scripts/test` does it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod disk;
mod full_store;
mod partitions;

/// How many rounds of each fault to inject: 1 in CI, more by hand.
pub fn rounds() -> usize {
    std::env::var("CARAVAN_FAULT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n: &usize| *n > 0)
        .unwrap_or(1)
}

mod clock;
