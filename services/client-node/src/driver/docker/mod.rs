//! `docker`: a task is a container of the Docker daemon, driven over its
//! API socket with bollard (see docs/drivers.md for the options it honours).
//! The container is named `<task>-<alloc id>` and labelled with its alloc,
//! job, group, task and node; the handle persists the container's id, so a
//! restarted client finds the same container again. A run's container is
//! removed once the client has recorded its end; containers of allocs the
//! node no longer runs are removed by the node's sweep.

mod config;
mod container;
mod daemon;
mod group_net;
mod handle;
mod image;
mod infra;
mod logs;
mod stats;
mod task_config;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bollard::query_parameters::{
    CreateContainerOptions, ListContainersOptions, ListNetworksOptions, RemoveContainerOptions,
    RenameContainerOptions,
};
use caravan_model::now_unix_ns;

pub use config::DockerConfig;
pub use container::labels;
use container::{NodeLabels, container_name, create_body};
use daemon::{Daemon, message, not_found, status_of};
use handle::{DockerHandle, DockerState, short};
use image::ImageGc;
use logs::LogTarget;
use task_config::DockerTask;

use super::{
    Capabilities, Driver, DriverContext, DriverError, Fingerprint, FsIsolation, HandleState,
    Health, TaskHandle, TaskSpec,
};

/// The driver's name.
const NAME: &str = "docker";
/// The description of a daemon that does not answer (Nomad's words).
const UNREACHABLE: &str = "Failed to connect to docker daemon";
/// How long a fingerprint may wait for the daemon.
const FINGERPRINT_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs tasks as Docker containers.
#[derive(Debug)]
pub struct DockerDriver {
    config: DockerConfig,
    daemon: Arc<Daemon>,
    node: NodeLabels,
    /// The daemon answered once: when it stops answering, the driver is
    /// unhealthy rather than undetected.
    detected: AtomicBool,
    images: Arc<ImageGc>,
}

impl DockerDriver {
    /// A driver for the daemon `ctx` configures.
    pub fn new(ctx: &DriverContext) -> Self {
        let config = ctx.plugins.docker.clone();
        // A bad endpoint is refused when the configuration is checked.
        let socket = config
            .socket()
            .unwrap_or_else(|_| "/var/run/docker.sock".into());
        DockerDriver {
            config,
            daemon: Arc::new(Daemon::new(socket)),
            node: NodeLabels {
                id: ctx.node_id.clone(),
                name: ctx.node_name.clone(),
            },
            detected: AtomicBool::new(false),
            images: Arc::default(),
        }
    }

    async fn docker(&self) -> Result<bollard::Docker, DriverError> {
        self.daemon.client().await.map_err(|e| {
            DriverError::recoverable(format!("the docker daemon does not answer: {e}"))
        })
    }

    /// Where the task's output goes, unless it keeps none.
    fn log_target(spec: &TaskSpec) -> Option<LogTarget> {
        let dirs = spec.dirs.as_ref()?;
        if spec.logs.disabled {
            return None;
        }
        let dir = dirs.stdout.parent()?.to_path_buf();
        let root = dirs.exit_record.parent()?;
        Some(LogTarget {
            dir,
            task: spec.task.clone(),
            limits: spec.logs,
            cursor: root.join(format!(".{}.docker-logs", spec.task)),
        })
    }

    /// The fingerprint of a daemon that answers.
    async fn fingerprint_of(&self, docker: &bollard::Docker) -> Result<Fingerprint, String> {
        let version = docker.version().await.map_err(|e| e.to_string())?;
        let mut attrs = BTreeMap::new();
        attrs.insert(
            "driver.docker.version".to_string(),
            version.version.unwrap_or_default(),
        );
        if self.config.volumes.enabled {
            attrs.insert(
                "driver.docker.volumes.enabled".to_string(),
                "true".to_string(),
            );
        }
        if let Ok(info) = docker.info().await {
            let mut runtimes: Vec<String> = info
                .runtimes
                .map(|r| r.into_keys().collect())
                .unwrap_or_default();
            runtimes.sort();
            attrs.insert("driver.docker.runtimes".to_string(), runtimes.join(","));
            if let Some(os) = info.os_type {
                attrs.insert("driver.docker.os_type".to_string(), os);
            }
        }
        let bridge = HashMap::from([("name".to_string(), vec!["bridge".to_string()])]);
        if let Ok(nets) = docker
            .list_networks(Some(ListNetworksOptions {
                filters: Some(bridge),
            }))
            .await
            && let Some(gateway) = nets
                .iter()
                .find(|n| n.name.as_deref() == Some("bridge"))
                .and_then(|n| n.ipam.as_ref())
                .and_then(|i| i.config.as_ref())
                .and_then(|c| c.first())
                .and_then(|c| c.gateway.clone())
        {
            attrs.insert("driver.docker.bridge_ip".to_string(), gateway);
        }
        Ok(Fingerprint::healthy(attrs))
    }

    /// The container of the task's run, found by its name.
    async fn find(&self, spec: &TaskSpec) -> Option<DockerState> {
        let docker = self.daemon.client().await.ok()?;
        let name = container_name(&spec.task, &spec.alloc_id);
        let found = docker.inspect_container(&name, None).await.ok()?;
        let ours = found
            .config
            .as_ref()
            .and_then(|c| c.labels.as_ref())
            .and_then(|l| l.get(labels::ALLOC_ID))
            == Some(&spec.alloc_id);
        if !ours {
            return None;
        }
        Some(DockerState {
            container_id: found.id?,
            image: found.config.and_then(|c| c.image).unwrap_or_default(),
            started_at_unix_ns: now_unix_ns(),
        })
    }

    /// Creates the container, removing a stale one of the same name first.
    async fn create(
        &self,
        docker: &bollard::Docker,
        name: &str,
        body: bollard::models::ContainerCreateBody,
    ) -> Result<String, DriverError> {
        let options = || CreateContainerOptions {
            name: Some(name.to_string()),
            ..Default::default()
        };
        match docker.create_container(Some(options()), body.clone()).await {
            Ok(c) => return Ok(c.id),
            Err(e) if status_of(&e) == Some(409) => {
                tracing::info!(container = %name, "removing a stale container of the same name");
                remove(docker, name).await;
            }
            Err(e) => {
                return Err(DriverError::recoverable(format!(
                    "Failed to create container: {}",
                    message(&e)
                )));
            }
        }
        docker
            .create_container(Some(options()), body)
            .await
            .map(|c| c.id)
            .map_err(|e| {
                DriverError::recoverable(format!("Failed to create container: {}", message(&e)))
            })
    }
}

/// Whether the daemon `config` names answers (`caravan dev` enables the
/// driver only then).
pub async fn daemon_answers(config: &DockerConfig) -> bool {
    let Ok(socket) = config.socket() else {
        return false;
    };
    tokio::time::timeout(FINGERPRINT_TIMEOUT, Daemon::new(socket).client())
        .await
        .is_ok_and(|c| c.is_ok())
}

/// Removes a container (and its anonymous volumes), running or not; one
/// that is gone already is fine.
async fn remove(docker: &bollard::Docker, id: &str) {
    let options = RemoveContainerOptions {
        force: true,
        v: true,
        ..Default::default()
    };
    match docker.remove_container(id, Some(options)).await {
        Ok(()) => {}
        Err(e) if not_found(&e) => {}
        Err(e) => tracing::warn!(container = %id, error = %message(&e), "cannot remove container"),
    }
}

#[async_trait::async_trait]
impl Driver for DockerDriver {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            send_signals: true,
            exec: true,
            fs_isolation: FsIsolation::Image,
            network_isolation: true,
            mounts: true,
        }
    }

    async fn fingerprint(&self) -> Fingerprint {
        let taken = tokio::time::timeout(FINGERPRINT_TIMEOUT, async {
            let docker = self.daemon.client().await?;
            self.fingerprint_of(&docker).await
        })
        .await
        .unwrap_or_else(|_| Err("timed out".to_string()));
        match taken {
            Ok(fp) => {
                self.detected.store(true, Ordering::SeqCst);
                fp
            }
            Err(why) => {
                tracing::debug!(error = %why, "docker daemon does not answer");
                let health = if self.detected.load(Ordering::SeqCst) {
                    Health::Unhealthy
                } else {
                    Health::Undetected
                };
                Fingerprint::failed(health, UNREACHABLE)
            }
        }
    }

    fn fingerprint_period(&self) -> Option<Duration> {
        Some(self.config.fingerprint_interval())
    }

    fn wants_env(&self) -> bool {
        true
    }

    async fn start(&self, spec: TaskSpec) -> Result<Arc<dyn TaskHandle>, DriverError> {
        let Some(env) = spec.env.as_ref() else {
            return Err(DriverError::fatal("docker needs the task's environment"));
        };
        let task = DockerTask::parse(&spec.config, env)?;
        let mut body = create_body(&task, &spec, &self.node, self.config.volumes.enabled)?;
        let docker = self.docker().await?;
        let infra_hostname = if group_net::joins_group(&task, &spec) {
            Some(group_net::infra_hostname(&docker, &spec.alloc_id).await?)
        } else {
            None
        };
        let etc = group_net::etc_mounts(&task, &spec, infra_hostname.as_deref())?;
        if let Some(host) = body.host_config.as_mut() {
            host.mounts.get_or_insert_with(Vec::new).extend(etc);
        }
        let (image_id, pulled) =
            image::ensure(&docker, &task.image, task.force_pull, task.pull_timeout).await?;
        let name = container_name(&spec.task, &spec.alloc_id);
        let id = self.create(&docker, &name, body).await?;
        if let Err(e) = docker.start_container(&id, None).await {
            remove(&docker, &id).await;
            return Err(DriverError::recoverable(format!(
                "Failed to start container {}: {}",
                short(&id),
                message(&e)
            )));
        }
        if pulled {
            self.images.acquire(&image_id);
        }
        tracing::debug!(alloc = %spec.alloc_id, task = %spec.task, container = %short(&id), image = %task.image, "started container");
        let state = DockerState {
            container_id: id,
            image: task.image,
            started_at_unix_ns: now_unix_ns(),
        };
        Ok(Arc::new(
            DockerHandle::open(Arc::clone(&self.daemon), state, Self::log_target(&spec)).await,
        ))
    }

    async fn recover(&self, spec: &TaskSpec, state: &HandleState) -> Option<Arc<dyn TaskHandle>> {
        let state = DockerState::decode(state)?;
        // The container is looked up while the daemon may still be coming
        // up with the client: a daemon that does not answer is waited for
        // a little, a container it says is gone is lost.
        for _ in 0..20 {
            if let Ok(docker) = self.daemon.client().await {
                match docker.inspect_container(&state.container_id, None).await {
                    Ok(_) => {
                        return Some(Arc::new(
                            DockerHandle::open(
                                Arc::clone(&self.daemon),
                                state,
                                Self::log_target(spec),
                            )
                            .await,
                        ));
                    }
                    Err(e) if not_found(&e) => return None,
                    Err(_) => {}
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        // Unknown, not gone: keep watching until the daemon answers (its
        // address unknown: it cannot be asked now).
        Some(Arc::new(DockerHandle::watch(
            Arc::clone(&self.daemon),
            state,
            Self::log_target(spec),
        )))
    }

    async fn adopt(&self, spec: &TaskSpec) -> Option<Arc<dyn TaskHandle>> {
        let state = self.find(spec).await?;
        tracing::info!(alloc = %spec.alloc_id, task = %spec.task, container = %short(&state.container_id), "adopting a container the client had not recorded");
        Some(Arc::new(
            DockerHandle::open(Arc::clone(&self.daemon), state, Self::log_target(spec)).await,
        ))
    }

    async fn release(&self, spec: &TaskSpec) {
        let Ok(docker) = self.daemon.client().await else {
            return;
        };
        let name = container_name(&spec.task, &spec.alloc_id);
        let found = docker.inspect_container(&name, None).await.ok();
        let image_id = found.as_ref().and_then(|c| c.image.clone());
        if self.config.gc.container {
            remove(&docker, &name).await;
        } else if let Some(id) = found.and_then(|c| c.id) {
            // Kept, under another name: the task's next run is a new container.
            let options = RenameContainerOptions {
                name: format!("{name}-{}", short(&id)),
            };
            if let Err(e) = docker.rename_container(&name, options).await {
                tracing::warn!(container = %name, error = %message(&e), "cannot set an ended container aside");
            }
        }
        if let Some(image) = image_id.filter(|_| self.config.gc.image) {
            self.images
                .release(docker, &image, self.config.image_delay());
        }
    }

    async fn start_infra(
        &self,
        alloc_id: &str,
        hostname: Option<&str>,
    ) -> Result<u32, DriverError> {
        let docker = self.docker().await?;
        let image = &self.config.infra_image;
        infra::require_image(&docker, image).await?;
        let name = infra::infra_name(alloc_id);
        let body = infra::infra_body(image, alloc_id, &self.node, hostname);
        let id = self.create(&docker, &name, body).await?;
        let started = match docker.start_container(&id, None).await {
            Ok(()) => infra::pid_of(&docker, &id).await,
            Err(e) => Err(DriverError::recoverable(format!(
                "Failed to start the infra container {name}: {}",
                message(&e)
            ))),
        };
        if started.is_err() {
            remove(&docker, &id).await;
        }
        started
    }

    async fn remove_infra(&self, alloc_id: &str) {
        if let Ok(docker) = self.daemon.client().await {
            remove(&docker, &infra::infra_name(alloc_id)).await;
        }
    }

    async fn remove_orphans(&self, live: &(dyn for<'a> Fn(&'a str) -> bool + Send + Sync)) {
        if self.node.id.is_empty() {
            return;
        }
        let Ok(docker) = self.daemon.client().await else {
            return;
        };
        let filters = HashMap::from([(
            "label".to_string(),
            vec![format!("{}={}", labels::NODE_ID, self.node.id)],
        )]);
        let options = ListContainersOptions {
            all: true,
            filters: Some(filters),
            ..Default::default()
        };
        let containers = match docker.list_containers(Some(options)).await {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(error = %message(&e), "cannot list containers");
                return;
            }
        };
        for c in containers {
            let alloc: Option<String> = c
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::ALLOC_ID).cloned());
            let (Some(id), Some(alloc)) = (c.id.as_deref(), alloc) else {
                continue;
            };
            if !live(&alloc) {
                tracing::info!(container = %short(id), alloc = %alloc, "removing the container of an alloc this node no longer runs");
                remove(&docker, id).await;
            }
        }
    }
}

#[cfg(test)]
mod tests;
