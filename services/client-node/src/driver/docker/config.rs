//! The docker driver's client configuration, `[plugin.docker]` (Nomad's
//! `plugin "docker" { config { … } }`).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The default `infra_image`: built locally by `scripts/test-images`
/// (busybox-static's `sleep`, sleeping forever).
pub const DEFAULT_INFRA_IMAGE: &str = "caravan/pause:1";

/// The docker driver's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DockerConfig {
    /// The daemon's API socket, `unix:///var/run/docker.sock` by default.
    pub endpoint: String,
    /// Bind mounts of host paths.
    pub volumes: VolumesConfig,
    /// What is removed once tasks no longer need it.
    pub gc: GcConfig,
    /// How often the daemon is asked whether it is there, in milliseconds
    /// (Nomad's 30 s).
    pub fingerprint_interval_ms: u64,
    /// The image of the container holding a `bridge`/`none` group's network
    /// namespace; it must be present on the node (it is never pulled).
    pub infra_image: String,
}

/// `volumes { enabled = … }`: whether tasks may mount host paths (`volumes`
/// and `mount` blocks with an absolute source). Paths relative to the task
/// dir are always allowed, as Nomad allows them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct VolumesConfig {
    /// Host paths may be mounted.
    pub enabled: bool,
}

/// `gc { … }`: removal of containers and images tasks no longer use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GcConfig {
    /// Remove a task's container once its run has ended.
    pub container: bool,
    /// Remove an image this driver pulled once no task uses it.
    pub image: bool,
    /// How long an unused image is kept first, in milliseconds (Nomad's 3 m).
    pub image_delay_ms: u64,
}

impl Default for GcConfig {
    fn default() -> Self {
        GcConfig {
            container: true,
            image: true,
            image_delay_ms: 180_000,
        }
    }
}

impl Default for DockerConfig {
    fn default() -> Self {
        DockerConfig {
            endpoint: "unix:///var/run/docker.sock".into(),
            volumes: VolumesConfig::default(),
            gc: GcConfig::default(),
            fingerprint_interval_ms: 30_000,
            infra_image: DEFAULT_INFRA_IMAGE.into(),
        }
    }
}

impl DockerConfig {
    /// Checks the settings, naming the first bad key (under `plugin.docker`).
    pub fn validate(&self) -> Result<(), (String, String)> {
        self.socket()?;
        if self.fingerprint_interval_ms == 0 {
            return Err(("fingerprint_interval_ms".into(), "must be positive".into()));
        }
        if self.infra_image.trim().is_empty() {
            return Err(("infra_image".into(), "must name an image".into()));
        }
        Ok(())
    }

    /// The path of the daemon's unix socket.
    pub fn socket(&self) -> Result<PathBuf, (String, String)> {
        match self.endpoint.strip_prefix("unix://") {
            Some(path) if path.starts_with('/') => Ok(PathBuf::from(path)),
            _ => Err((
                "endpoint".into(),
                format!(
                    "{:?}: only a unix socket (unix:///path) is supported",
                    self.endpoint
                ),
            )),
        }
    }

    /// The fingerprint period.
    pub fn fingerprint_interval(&self) -> Duration {
        Duration::from_millis(self.fingerprint_interval_ms.max(1))
    }

    /// How long an unused pulled image is kept.
    pub fn image_delay(&self) -> Duration {
        Duration::from_millis(self.gc.image_delay_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_nomads_and_bad_endpoints_are_named() {
        let c = DockerConfig::default();
        assert_eq!(c.socket().unwrap(), PathBuf::from("/var/run/docker.sock"));
        assert!(!c.volumes.enabled);
        assert!(c.gc.container && c.gc.image);
        assert_eq!(c.image_delay(), Duration::from_secs(180));
        let tcp = DockerConfig {
            endpoint: "tcp://127.0.0.1:2375".into(),
            ..Default::default()
        };
        assert_eq!(tcp.validate().unwrap_err().0, "endpoint");
        assert_eq!(c.infra_image, DEFAULT_INFRA_IMAGE);
        let no_infra = DockerConfig {
            infra_image: " ".into(),
            ..Default::default()
        };
        assert_eq!(no_infra.validate().unwrap_err().0, "infra_image");
    }
}
