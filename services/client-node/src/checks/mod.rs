//! A job's services on the client: what an allocation registers of them
//! ([`registration`]), where a check reaches its service ([`address`]), one
//! probe of a check ([`probe`], with [`grpc`] and [`script`]), what results
//! in a row add up to ([`status`]: the check's status and its
//! `check_restart` count), the schedule ([`runner`]), and one allocation's
//! registrations and running checks together ([`alloc_services`]).

pub mod address;
pub mod alloc_services;
pub mod grpc;
pub mod probe;
pub mod registration;
pub mod runner;
pub mod script;
pub mod status;

pub use probe::{Observation, Probe};
pub use status::{Outcome, RestartWatch, Status, Tracker};
