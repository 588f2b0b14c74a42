//! Clock jumps: one service process's wall clock steps ±5 minutes, as an
//! NTP step moves it, while its monotonic clock, etcd and every other
//! process keep the real time ([`SteppedClock`]). Leases and heartbeat TTLs
//! are etcd's (timed by etcd), queue timers and restart windows are
//! monotonic, and the times stored in objects are wall-clock times: each
//! test walks one process through +5, −5, −5 and +5 minutes and checks that
//! no node is marked down, no deadline or delayed eval fires minutes early
//! or late, no periodic launch is made twice or lost, no eval is lost, no
//! leader loses its term, and the chaos run's invariants hold.
//!
//! Each phase opens with a probe job whose stored times show the step took
//! effect in the stepped process (and that evals are still processed), so a
//! test cannot pass on a clock that never moved.
mod broker;
mod harness;
mod nodes;
mod watcher;
