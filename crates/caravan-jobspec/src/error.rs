//! Errors of the crate: size, syntax, and field errors that name the offending path.

use std::fmt;

/// One problem with one field of a job, named Nomad-style (`group "web": task "app": driver`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Where the problem is, e.g. `group "web": count`.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

impl FieldError {
    /// Builds a field error from a path and a message.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Every field error found in one job, in the order they were found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldErrors(pub Vec<FieldError>);

impl FieldErrors {
    /// True when no error was collected.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Number of errors collected.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The errors, in order.
    pub fn iter(&self) -> std::slice::Iter<'_, FieldError> {
        self.0.iter()
    }

    /// The errors as display strings, as Nomad's `ValidationErrors` lists them.
    pub fn messages(&self) -> Vec<String> {
        self.0.iter().map(ToString::to_string).collect()
    }

    /// `Ok(())` when empty, the errors otherwise.
    pub fn into_result(self) -> Result<(), FieldErrors> {
        if self.0.is_empty() { Ok(()) } else { Err(self) }
    }
}

impl fmt::Display for FieldErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Nomad's multierror layout, which operators already know from its CLI.
        let n = self.0.len();
        write!(f, "{n} error{} occurred:", if n == 1 { "" } else { "s" })?;
        for e in &self.0 {
            write!(f, "\n\t* {e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for FieldErrors {}

impl<'a> IntoIterator for &'a FieldErrors {
    type Item = &'a FieldError;
    type IntoIter = std::slice::Iter<'a, FieldError>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// Why a job body could not be turned into a job.
#[derive(Debug, thiserror::Error)]
pub enum JobspecError {
    /// The body is larger than the configured limit; it was not parsed.
    #[error("job body of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// Size of the body in bytes.
        size: usize,
        /// The configured limit in bytes.
        limit: usize,
    },
    /// The HCL text does not parse.
    #[error("HCL syntax error at line {line}, column {column}: {message}")]
    HclSyntax {
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What the parser expected.
        message: String,
    },
    /// The JSON text does not parse.
    #[error("JSON syntax error at line {line}, column {column}: {message}")]
    JsonSyntax {
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What the parser expected.
        message: String,
    },
    /// The body parses but fields are missing, mistyped, unknown or invalid.
    #[error("{0}")]
    Invalid(FieldErrors),
    /// Two versions of different jobs cannot be diffed.
    #[error("can not diff jobs with different IDs: {old:?} and {new:?}")]
    DiffIdMismatch {
        /// ID of the old job.
        old: String,
        /// ID of the new job.
        new: String,
    },
}

impl JobspecError {
    /// The field errors, when the error is about fields.
    pub fn field_errors(&self) -> Option<&FieldErrors> {
        match self {
            JobspecError::Invalid(errs) => Some(errs),
            _ => None,
        }
    }
}

impl From<FieldErrors> for JobspecError {
    fn from(errs: FieldErrors) -> Self {
        JobspecError::Invalid(errs)
    }
}

/// Joins a Nomad-style path (`group "web"`) and a field or child (`count`, `task "app"`).
pub(crate) fn join_path(base: &str, field: &str) -> String {
    if base.is_empty() {
        field.to_string()
    } else {
        format!("{base}: {field}")
    }
}
