//! What can go wrong in a command, as one line (or a short block) for the
//! operator and an exit code; never a panic or a backtrace.

use tonic::Code;

/// A failed command.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Wrong use of the command line.
    #[error("{0}")]
    Usage(String),
    /// The job file could not be read.
    #[error("Error reading job file {path:?}: {message}")]
    ReadFile {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// The job file does not parse or validate.
    #[error("Error in job file {path:?}: {message}")]
    JobFile {
        /// The file.
        path: String,
        /// What is wrong, naming the field.
        message: String,
    },
    /// The api-gateway could not be reached at all.
    #[error(
        "Error connecting to the api-gateway at {address}: {message} (is `caravan dev` running? set -address or NOMAD_ADDR for Nomad's HTTP API, -grpc-address or CARAVAN_ADDR for Caravan's gRPC API)"
    )]
    Unreachable {
        /// The address tried.
        address: String,
        /// The transport's complaint.
        message: String,
    },
    /// The api-gateway answered with an error.
    #[error("{context}: {message}")]
    Api {
        /// What was being done, e.g. `Error submitting job`.
        context: String,
        /// The gRPC code.
        code: Code,
        /// The server's message, as it was sent.
        message: String,
    },
    /// Nothing matched an id or prefix.
    #[error("{0}")]
    NotFound(String),
    /// A prefix matched several objects; the message lists them.
    #[error("{0}")]
    Ambiguous(String),
    /// Anything else, already phrased for the operator.
    #[error("{0}")]
    Other(String),
}

impl CliError {
    /// Builds the error of a failed generated-client call made to do `context`.
    pub fn api(context: &str, address: &str, status: tonic::Status) -> CliError {
        CliError::sdk(
            context,
            caravan_client::Error::from_status(&status, address),
        )
    }

    /// Builds the error of a failed SDK call made to do `context`.
    pub fn sdk(context: &str, err: caravan_client::Error) -> CliError {
        use caravan_client::Error;
        match err {
            Error::Unreachable { address, reason } => CliError::Unreachable {
                address,
                message: reason,
            },
            Error::InvalidAddress { .. } | Error::InvalidToken | Error::Config(_) => {
                CliError::Usage(err.to_string())
            }
            other => CliError::Api {
                context: context.to_string(),
                code: other.code().unwrap_or(Code::Unknown),
                message: other.to_string(),
            },
        }
    }

    /// Whether the server said the object does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, CliError::Api { code, .. } if *code == Code::NotFound)
            || matches!(self, CliError::NotFound(_))
    }

    /// The process exit code: 1 for every failure, as Nomad's CLI.
    pub fn exit_code(&self) -> u8 {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_arguments_keep_the_servers_message() {
        let e = CliError::api(
            "Error submitting job",
            "http://127.0.0.1:4647",
            tonic::Status::invalid_argument("task_groups[0].count: must not be negative"),
        );
        assert_eq!(
            e.to_string(),
            "Error submitting job: task_groups[0].count: must not be negative"
        );
        assert_eq!(e.exit_code(), 1);
        assert!(!e.is_not_found());
    }

    #[test]
    fn transport_failures_name_the_address() {
        let mut refused = tonic::Status::unavailable("tcp connect error");
        refused.set_source(std::sync::Arc::new(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        )));
        let e = CliError::api("Error querying jobs", "http://127.0.0.1:1", refused);
        let text = e.to_string();
        assert!(text.starts_with("Error connecting to the api-gateway at http://127.0.0.1:1"));
        assert!(text.contains("CARAVAN_ADDR"));
        // A gateway that answered UNAVAILABLE was reached.
        let e = CliError::api("x", "a", tonic::Status::unavailable("store: down"));
        assert_eq!(e.to_string(), "x: store: down");
        let e = CliError::api("x", "a", tonic::Status::not_found("job not found: web"));
        assert!(e.is_not_found());
    }
}
