//! Host volumes: a group that mounts volumes may only run on a node whose client
//! configures a host volume of each source, writable unless the group asks for it
//! read-only (Nomad's `HostVolumeChecker` for static host volumes).

use caravan_proto::{Node, TaskGroup};

/// Nomad's filter reason (`FilterConstraintHostVolumes`).
pub const MISSING_HOST_VOLUMES: &str = "missing compatible host volumes";

/// One host volume a group asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostVolumeAsk {
    /// The host volume's name on the node (before any per-alloc suffix).
    pub source: String,
    /// Whether the group mounts it read-only only.
    pub read_only: bool,
}

/// The group's host volume requests: those every allocation shares, and those each
/// allocation asks for with its index appended (`per_alloc`).
pub fn asks(tg: &TaskGroup) -> (Vec<HostVolumeAsk>, Vec<HostVolumeAsk>) {
    let mut shared = Vec::new();
    let mut per_alloc = Vec::new();
    for v in tg.volumes.values().filter(|v| v.r#type == "host") {
        let ask = HostVolumeAsk {
            source: v.source.clone(),
            read_only: v.read_only,
        };
        if v.per_alloc {
            per_alloc.push(ask);
        } else {
            shared.push(ask);
        }
    }
    (shared, per_alloc)
}

/// Whether the node has a host volume named `source` the ask may mount: a read-only
/// one only when the group asks for it read-only.
pub fn node_has(node: &Node, source: &str, read_only: bool) -> bool {
    node.host_volumes
        .get(source)
        .is_some_and(|v| read_only || !v.read_only)
}

#[cfg(test)]
mod tests {
    use super::*;
    use caravan_proto::{ClientHostVolume, VolumeRequest};

    fn node(volumes: &[(&str, bool)]) -> Node {
        let mut n = Node::default();
        for (name, read_only) in volumes {
            n.host_volumes.insert(
                (*name).to_string(),
                ClientHostVolume {
                    name: (*name).to_string(),
                    path: format!("/srv/{name}"),
                    read_only: *read_only,
                },
            );
        }
        n
    }

    #[test]
    fn a_read_only_volume_serves_only_read_only_asks() {
        let n = node(&[("data", false), ("certs", true)]);
        assert!(node_has(&n, "data", false));
        assert!(node_has(&n, "data", true));
        assert!(node_has(&n, "certs", true));
        assert!(!node_has(&n, "certs", false));
        assert!(!node_has(&n, "other", true));
    }

    #[test]
    fn per_alloc_asks_are_apart_and_suffixed() {
        let mut tg = TaskGroup::default();
        for (name, per_alloc) in [("a", false), ("b", true)] {
            tg.volumes.insert(
                name.to_string(),
                VolumeRequest {
                    r#type: "host".into(),
                    source: format!("src-{name}"),
                    read_only: false,
                    per_alloc,
                },
            );
        }
        let (shared, per_alloc) = asks(&tg);
        assert_eq!(shared[0].source, "src-a");
        assert_eq!(per_alloc[0].source, "src-b");
        assert_eq!(caravan_model::per_alloc_source("src-b", 3), "src-b[3]");
    }
}
