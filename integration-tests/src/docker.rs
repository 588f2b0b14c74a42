//! The Docker daemon in end-to-end tests: containers found by the labels the
//! docker driver puts on them (and removed after each test), `docker
//! inspect` and `docker kill` through the CLI as an operator would type
//! them, and a stand-in for the daemon's socket that a test can take away
//! and bring back, so a daemon that goes down is simulated without stopping
//! this machine's.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinSet;

/// The daemon's socket.
pub const DOCKER_SOCKET: &str = "/var/run/docker.sock";

/// The label of a container's alloc.
pub const ALLOC_LABEL: &str = "com.hashicorp.nomad.alloc_id";
/// The label of a container's node.
pub const NODE_LABEL: &str = "com.hashicorp.nomad.node_id";

/// Runs `docker ARGS…`; its stdout.
pub fn docker(args: &[&str]) -> anyhow::Result<String> {
    let out = std::process::Command::new("docker").args(args).output()?;
    if !out.status.success() {
        anyhow::bail!(
            "docker {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The ids of the containers (running or not) carrying `label=value`.
pub fn containers_labelled(label: &str, value: &str) -> anyhow::Result<Vec<String>> {
    let filter = format!("label={label}={value}");
    Ok(docker(&["ps", "-aq", "--no-trunc", "--filter", &filter])?
        .split_whitespace()
        .map(String::from)
        .collect())
}

/// The containers of an alloc.
pub fn containers_of_alloc(alloc_id: &str) -> anyhow::Result<Vec<String>> {
    containers_labelled(ALLOC_LABEL, alloc_id)
}

/// `docker inspect` of one container; `Null` when there is none.
pub fn inspect(id: &str) -> Value {
    docker(&["inspect", id])
        .ok()
        .and_then(|out| serde_json::from_str::<Value>(&out).ok())
        .and_then(|all| all.get(0).cloned())
        .unwrap_or(Value::Null)
}

/// Removes every container of the nodes named, however a test ends.
#[derive(Debug, Default)]
pub struct ContainerSweeper {
    nodes: Mutex<Vec<String>>,
}

impl ContainerSweeper {
    /// Sweeps the containers of `node_id` too.
    pub fn node(&self, node_id: &str) {
        self.nodes.lock().push(node_id.to_string());
    }
}

impl Drop for ContainerSweeper {
    fn drop(&mut self) {
        for node in self.nodes.lock().iter() {
            for id in containers_labelled(NODE_LABEL, node).unwrap_or_default() {
                let _ = docker(&["rm", "-f", &id]);
            }
        }
    }
}

/// A unix socket that forwards every connection to the daemon's, until it is
/// taken down: connections open then are cut and the socket file removed,
/// as when the daemon stops; [`SocketProxy::up`] brings it back.
#[derive(Debug)]
pub struct SocketProxy {
    path: PathBuf,
    serving: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl SocketProxy {
    /// A proxy at `path`, up.
    pub fn start(path: &Path) -> anyhow::Result<Arc<SocketProxy>> {
        let proxy = Arc::new(SocketProxy {
            path: path.to_path_buf(),
            serving: Mutex::new(None),
        });
        proxy.up()?;
        Ok(proxy)
    }

    /// The `unix://` endpoint clients use.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.path.display())
    }

    /// Listens again.
    pub fn up(&self) -> anyhow::Result<()> {
        let _ = std::fs::remove_file(&self.path);
        let listener = UnixListener::bind(&self.path)?;
        let serve = tokio::spawn(async move {
            // Aborting this task drops the connections it holds.
            let mut conns = JoinSet::new();
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    return;
                };
                conns.spawn(async move {
                    if let Ok(mut daemon) = UnixStream::connect(DOCKER_SOCKET).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut daemon).await;
                    }
                });
                while conns.try_join_next().is_some() {}
            }
        });
        *self.serving.lock() = Some(serve);
        Ok(())
    }

    /// Stops listening, cuts every connection and removes the socket file.
    pub fn down(&self) {
        if let Some(s) = self.serving.lock().take() {
            s.abort();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for SocketProxy {
    fn drop(&mut self) {
        self.down();
    }
}
