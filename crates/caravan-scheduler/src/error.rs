//! Errors of the scheduler crate.

use thiserror::Error;

/// A placement rule that cannot be scheduled as written; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{field}: {message}")]
pub struct ValidationError {
    /// Path of the offending field in jobspec's style, e.g.
    /// `group "web": task "app": constraint[1]: value`.
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

/// Every placement-rule problem of one job, in the order they were found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationErrors(pub Vec<ValidationError>);

impl std::fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // One line, so an eval's status description can carry it.
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ValidationErrors {}

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
