//! Job versions: when a registration is a new version, and which old
//! versions a new one pushes out of the six kept. The rules live in
//! `caravan-state`, shared with the deployment-watcher's auto-revert.

pub use caravan_state::spec_changed;
