//! The client node's one error type and its mapping to gRPC statuses.

use std::path::PathBuf;

use tonic::Status;

/// Everything that can go wrong inside the client node.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A request or configuration value is malformed; names the field.
    #[error("{field}: {problem}")]
    InvalidArgument {
        /// The offending field, e.g. `stream` or `data_dir`.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The named thing (alloc, task, log file) does not exist on this node.
    #[error("{0} not found")]
    NotFound(String),
    /// A file system operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done, e.g. `create`.
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The persisted state of an alloc or the node cannot be decoded.
    #[error("corrupt state file {path}: {problem}")]
    CorruptState {
        /// The file.
        path: PathBuf,
        /// Why it does not decode.
        problem: String,
    },
    /// No api-gateway answered.
    #[error("api-gateway: {0}")]
    Gateway(#[from] Status),
    /// The gRPC server could not be started.
    #[error("grpc server: {0}")]
    Transport(#[from] tonic::transport::Error),
}

impl ClientError {
    /// A field-naming invalid argument.
    pub fn invalid(field: impl Into<String>, problem: impl Into<String>) -> Self {
        ClientError::InvalidArgument {
            field: field.into(),
            problem: problem.into(),
        }
    }

    /// A file system failure on `path`.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ClientError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

impl From<ClientError> for Status {
    fn from(err: ClientError) -> Self {
        match err {
            ClientError::InvalidArgument { .. } => Status::invalid_argument(err.to_string()),
            ClientError::NotFound(_) => Status::not_found(err.to_string()),
            ClientError::Gateway(status) => status,
            ClientError::Io { .. }
            | ClientError::CorruptState { .. }
            | ClientError::Transport(_) => Status::internal(err.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_keep_the_field_name() {
        let s = Status::from(ClientError::invalid("stream", "must be stdout or stderr"));
        assert_eq!(s.code(), tonic::Code::InvalidArgument);
        assert!(s.message().contains("stream"), "{}", s.message());
        let s = Status::from(ClientError::NotFound("alloc x".into()));
        assert_eq!(s.code(), tonic::Code::NotFound);
    }
}
