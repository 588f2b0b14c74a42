//! Health checks of a job's services, run by the client: one probe of an
//! `http` or `tcp` check ([`probe`]) and what the results in a row add up to
//! ([`status`]): the check's status and its `check_restart` count.

pub mod probe;
pub mod status;

pub use probe::{Observation, Probe};
pub use status::{Outcome, RestartWatch, Status, Tracker};
