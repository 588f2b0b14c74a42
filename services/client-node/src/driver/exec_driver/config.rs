//! The exec driver's client configuration, `[plugin.exec]` (Nomad's
//! `plugin "exec" { config { … } }`).

use serde::{Deserialize, Serialize};

use super::caps::{CapSet, DEFAULTS};

/// The exec driver's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExecConfig {
    /// The capabilities a task may have (`cap_add` beyond them fails the
    /// task); the default set unless set.
    pub allow_caps: Vec<String>,
    /// The PID namespace of a task that sets no `pid_mode`.
    pub default_pid_mode: String,
    /// The IPC namespace of a task that sets no `ipc_mode`.
    pub default_ipc_mode: String,
    /// Enter the task's root with chroot rather than pivot_root (for
    /// roots pivot_root refuses, such as an initramfs).
    pub no_pivot_root: bool,
}

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            allow_caps: DEFAULTS.iter().map(|c| c.to_ascii_lowercase()).collect(),
            default_pid_mode: "private".into(),
            default_ipc_mode: "private".into(),
            no_pivot_root: false,
        }
    }
}

impl ExecConfig {
    /// Checks the settings, naming the first bad key.
    pub fn validate(&self) -> Result<(), (String, String)> {
        self.allowed().map_err(|e| ("allow_caps".to_string(), e))?;
        for (key, mode) in [
            ("default_pid_mode", &self.default_pid_mode),
            ("default_ipc_mode", &self.default_ipc_mode),
        ] {
            private_mode(mode).map_err(|e| (key.to_string(), e))?;
        }
        Ok(())
    }

    /// The capabilities a task may have.
    pub fn allowed(&self) -> Result<CapSet, String> {
        CapSet::parse(&self.allow_caps)
    }
}

/// Whether a namespace `mode` is private: `private` (or unset) or `host`.
pub fn private_mode(mode: &str) -> Result<bool, String> {
    match mode.trim() {
        "" | "private" => Ok(true),
        "host" => Ok(false),
        other => Err(format!("must be \"private\" or \"host\", not {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_keys_are_named() {
        let c = ExecConfig::default();
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.allowed().unwrap(), CapSet::parse(&DEFAULTS).unwrap());
        let bad = ExecConfig {
            allow_caps: vec!["nope".into()],
            ..ExecConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().0, "allow_caps");
        let bad = ExecConfig {
            default_ipc_mode: "shareable".into(),
            ..ExecConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().0, "default_ipc_mode");
    }
}
