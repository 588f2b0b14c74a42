//! The connection to the Docker daemon: a bollard client on the unix socket,
//! its API version negotiated down to the daemon's once it first answers,
//! and the readings of bollard's errors the driver acts on.

use std::path::PathBuf;
use std::time::Duration;

use bollard::Docker;
use bollard::errors::Error;
use parking_lot::Mutex;

/// How long a request may wait for the daemon's answer to begin (a stream
/// — logs, a wait — then runs as long as it runs).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The daemon at one socket.
#[derive(Debug)]
pub struct Daemon {
    socket: PathBuf,
    client: Mutex<Option<Docker>>,
}

impl Daemon {
    /// The daemon listening on `socket`.
    pub fn new(socket: PathBuf) -> Self {
        Daemon {
            socket,
            client: Mutex::new(None),
        }
    }

    /// A client speaking the daemon's API version; `Err` when the daemon
    /// does not answer.
    pub async fn client(&self) -> Result<Docker, String> {
        if let Some(c) = self.client.lock().clone() {
            return Ok(c);
        }
        let path = self.socket.to_string_lossy();
        let docker = Docker::connect_with_unix(&path, 120, bollard::API_DEFAULT_VERSION)
            .map_err(|e| e.to_string())?
            .with_timeout(REQUEST_TIMEOUT);
        let docker = tokio::time::timeout(Duration::from_secs(10), docker.negotiate_version())
            .await
            .map_err(|_| format!("{path}: the daemon did not answer"))?
            .map_err(|e| e.to_string())?;
        *self.client.lock() = Some(docker.clone());
        Ok(docker)
    }
}

/// The HTTP status of a daemon's error answer, if it was one.
pub fn status_of(e: &Error) -> Option<u16> {
    match e {
        Error::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

/// The daemon says there is no such thing (container, image, exec).
pub fn not_found(e: &Error) -> bool {
    status_of(e) == Some(404)
}

/// The daemon answered: a request refused, not a connection lost.
pub fn answered(e: &Error) -> bool {
    status_of(e).is_some() || matches!(e, Error::DockerContainerWaitError { .. })
}

/// What the daemon said, without bollard's wrapping.
pub fn message(e: &Error) -> String {
    match e {
        Error::DockerResponseServerError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}
