//! Errors of the scheduler crate.

use thiserror::Error;

/// A job that cannot be scheduled as written; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{field}: {message}")]
pub struct ValidationError {
    /// Path of the offending field, e.g. `task_groups[0].constraints[1].r_target`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl ValidationError {
    /// Builds an error for `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// An error a [`crate::Planner`] reports (transport, refused token, …).
#[derive(Debug, Error)]
#[error("{0}")]
pub struct PlannerError(pub Box<dyn std::error::Error + Send + Sync>);

impl PlannerError {
    /// Wraps a message as a planner error.
    pub fn msg(message: impl Into<String>) -> Self {
        Self(message.into().into())
    }
}

/// Why processing an evaluation failed.
#[derive(Debug, Error)]
pub enum SchedulerError {
    /// The planner failed; the evaluation should be nacked and retried.
    #[error("planner: {0}")]
    Planner(#[from] PlannerError),
    /// The evaluation names a scheduler type this crate does not have.
    #[error("unknown scheduler type {0:?}")]
    UnknownType(String),
    /// A plan was partially committed but the planner gave no fresher state.
    #[error("plan partially committed without a state refresh")]
    MissingRefresh,
}
