//! What a driver reports about itself: whether it works on this node, the
//! attributes it adds to the node (Nomad's driver fingerprint), and what it
//! can do (Nomad's driver capabilities).

use std::collections::BTreeMap;

use caravan_proto::DriverInfo;

/// The description of a driver that works (Nomad's `DriverHealthy`).
pub const HEALTHY: &str = "Healthy";

/// A driver's health on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Not found on this node (never was).
    Undetected,
    /// Found, but not working now (a daemon that went away).
    Unhealthy,
    /// Working.
    Healthy,
}

/// One fingerprint of a driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    /// Node attributes the driver adds (`driver.docker.version`, …).
    pub attributes: BTreeMap<String, String>,
    /// Its health.
    pub health: Health,
    /// Why, in words (`Healthy`, `Failed to connect to docker daemon`).
    pub description: String,
}

impl Fingerprint {
    /// A working driver with `attributes`.
    pub fn healthy(attributes: BTreeMap<String, String>) -> Self {
        Fingerprint {
            attributes,
            health: Health::Healthy,
            description: HEALTHY.to_string(),
        }
    }

    /// A driver that does not work, for `why`.
    pub fn failed(health: Health, why: impl Into<String>) -> Self {
        Fingerprint {
            attributes: BTreeMap::new(),
            health,
            description: why.into(),
        }
    }

    /// Whether the driver was found on this node.
    pub fn detected(&self) -> bool {
        self.health != Health::Undetected
    }

    /// The driver as the node registers it.
    pub fn info(&self) -> DriverInfo {
        DriverInfo {
            detected: self.detected(),
            healthy: self.health == Health::Healthy,
            health_description: self.description.clone(),
            attributes: self.attributes.clone().into_iter().collect(),
        }
    }
}

/// How a driver isolates a task's file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsIsolation {
    /// None: the task sees the host's file system, and its dirs at their
    /// host paths.
    None,
    /// An image: the task sees its alloc dir at `/alloc`, its local dir at
    /// `/local` and its secrets at `/secrets`.
    Image,
    /// A chroot of its task dir: the task sees its dirs at the same paths
    /// as in an image.
    Chroot,
}

/// What a driver can do (Nomad's `Capabilities`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Its tasks can be sent signals.
    pub send_signals: bool,
    /// Commands can be run in its tasks' context.
    pub exec: bool,
    /// How it isolates a task's file system.
    pub fs_isolation: FsIsolation,
    /// Its tasks get a network namespace of their own.
    pub network_isolation: bool,
    /// It mounts host volumes into its tasks (Nomad's `MountConfigs`).
    pub mounts: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_becomes_the_nodes_driver_info() {
        let mut attrs = BTreeMap::new();
        attrs.insert("driver.docker.version".to_string(), "20.10".to_string());
        let ok = Fingerprint::healthy(attrs).info();
        assert!(ok.detected && ok.healthy);
        assert_eq!(ok.health_description, HEALTHY);
        assert_eq!(ok.attributes["driver.docker.version"], "20.10");
        let down = Fingerprint::failed(Health::Unhealthy, "gone").info();
        assert!(down.detected && !down.healthy);
        let none = Fingerprint::failed(Health::Undetected, "absent").info();
        assert!(!none.detected && !none.healthy);
    }
}
