//! The crate's one error type: a template that does not parse or does not render.

/// Why a template could not be parsed or rendered; the message names the function, field or key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// The text is not a valid template, or calls a function Caravan does not have.
    #[error("{0}")]
    Parse(String),
    /// Executing the template failed (a function's error, a missing key under `error_on_missing_key`, ...).
    #[error("{0}")]
    Render(String),
}
