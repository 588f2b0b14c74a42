//! The container holding a `bridge`/`none` group's network namespace: made
//! from the configured `infra_image` (never pulled) with no network of its
//! own, so CNI attaches its namespace, and the group's docker tasks join it
//! with `network_mode = "container:<name>"`.

use std::collections::HashMap;

use bollard::models::{ContainerCreateBody, HostConfig};

use super::container::{NodeLabels, labels};
use super::daemon::{message, not_found};
use crate::driver::DriverError;

/// The holder's container name for `alloc_id`.
pub fn infra_name(alloc_id: &str) -> String {
    format!("nomad_init_{alloc_id}")
}

/// The holder's create request: the image's own entrypoint, no network but
/// loopback, the group network's hostname if it names one, labels naming
/// the alloc and node (so the orphan sweep finds it).
pub fn infra_body(
    image: &str,
    alloc_id: &str,
    node: &NodeLabels,
    hostname: Option<&str>,
) -> ContainerCreateBody {
    let labels = HashMap::from([
        (labels::ALLOC_ID.to_string(), alloc_id.to_string()),
        (labels::NODE_ID.to_string(), node.id.clone()),
        (labels::NODE_NAME.to_string(), node.name.clone()),
    ]);
    ContainerCreateBody {
        image: Some(image.to_string()),
        // The namespace's hostname, which the tasks joining it share.
        hostname: hostname.map(str::to_string),
        labels: Some(labels),
        host_config: Some(HostConfig {
            network_mode: Some("none".into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Checks `image` is on the node: the holder's image is never pulled.
pub async fn require_image(docker: &bollard::Docker, image: &str) -> Result<(), DriverError> {
    match docker.inspect_image(image).await {
        Ok(_) => Ok(()),
        Err(e) if not_found(&e) => Err(DriverError::fatal(format!(
            "infra_image {image:?} is not on this node (it is never pulled): build it (scripts/test-images) or set plugin.docker.infra_image"
        ))),
        Err(e) => Err(DriverError::recoverable(format!(
            "Failed to inspect infra_image {image:?}: {}",
            message(&e)
        ))),
    }
}

/// The pid of the running container `id`.
pub async fn pid_of(docker: &bollard::Docker, id: &str) -> Result<u32, DriverError> {
    let found = docker.inspect_container(id, None).await.map_err(|e| {
        DriverError::recoverable(format!("Failed to inspect {id}: {}", message(&e)))
    })?;
    found
        .state
        .and_then(|s| s.pid)
        .and_then(|p| u32::try_from(p).ok())
        .filter(|p| *p > 0)
        .ok_or_else(|| DriverError::recoverable(format!("the infra container {id} is not running")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_has_no_network_and_names_its_alloc() {
        let node = NodeLabels {
            id: "n1".into(),
            name: "node".into(),
        };
        let body = infra_body("caravan/pause:1", "a1", &node, Some("web-1"));
        assert_eq!(body.hostname.as_deref(), Some("web-1"));
        assert_eq!(body.image.as_deref(), Some("caravan/pause:1"));
        assert_eq!(
            body.host_config.and_then(|h| h.network_mode).as_deref(),
            Some("none")
        );
        let l = body.labels.expect("labels");
        assert_eq!(l[labels::ALLOC_ID], "a1");
        assert_eq!(l[labels::NODE_ID], "n1");
        assert_eq!(infra_name("a1"), "nomad_init_a1");
    }
}
