//! Health checks of a job's services, run by the client: where a check
//! reaches its service ([`address`]), one probe of an `http` or `tcp` check
//! ([`probe`]), what results in a row add up to ([`status`]: the check's
//! status and its `check_restart` count), and the schedule ([`runner`]).

pub mod address;
pub mod probe;
pub mod runner;
pub mod status;

pub use probe::{Observation, Probe};
pub use status::{Outcome, RestartWatch, Status, Tracker};
