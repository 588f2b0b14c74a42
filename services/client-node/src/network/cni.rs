//! Runs a CNI network configuration list by executing its plugins, as the CNI
//! 1.0 spec has a runtime do: each plugin of the list in turn for ADD (each
//! given the previous one's result as `prevResult`), in reverse for DEL, the
//! network config on stdin and the call in `CNI_*` variables.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Map, Value, json};

/// A plugin call failed.
#[derive(Debug, thiserror::Error)]
pub enum CniError {
    /// The plugin binary could not be run.
    #[error("cannot run CNI plugin {plugin}: {source}")]
    Spawn {
        /// The plugin's type.
        plugin: String,
        /// Why.
        source: std::io::Error,
    },
    /// The plugin ran and reported an error.
    #[error("CNI plugin {plugin} failed on {command}: {message}")]
    Plugin {
        /// The plugin's type.
        plugin: String,
        /// ADD or DEL.
        command: &'static str,
        /// Its `msg` and `details`, or its output.
        message: String,
    },
    /// The config list is malformed.
    #[error("CNI config list: {0}")]
    Config(String),
}

/// Where a network is attached: the container and its namespace.
#[derive(Debug, Clone)]
pub struct Attachment {
    /// `CNI_CONTAINERID`: unique per attachment (the alloc's id).
    pub container_id: String,
    /// `CNI_NETNS`: the namespace's path.
    pub netns: PathBuf,
    /// `CNI_IFNAME`: the interface made inside it.
    pub ifname: String,
}

/// Executes config lists with the plugins found in one directory.
#[derive(Debug, Clone)]
pub struct CniRunner {
    plugin_dir: PathBuf,
}

/// How long one plugin call may take.
const PLUGIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The PATH plugins run with: the firewall and portmap plugins call iptables.
const PLUGIN_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

impl CniRunner {
    /// A runner of the plugins in `plugin_dir` (`CNI_PATH`).
    pub fn new(plugin_dir: impl Into<PathBuf>) -> Self {
        CniRunner {
            plugin_dir: plugin_dir.into(),
        }
    }

    /// The plugin directory.
    pub fn plugin_dir(&self) -> &Path {
        &self.plugin_dir
    }

    /// Adds the attachment to every network of `list`; returns the last
    /// plugin's result. `runtime` is the runtime config (e.g.
    /// `portMappings`) handed to plugins whose `capabilities` ask for it.
    /// On failure the plugins already run are undone (DEL), as the spec asks.
    pub fn add(&self, list: &Value, at: &Attachment, runtime: &Value) -> Result<Value, CniError> {
        let plugins = plugins_of(list)?;
        let mut prev: Option<Value> = None;
        for plugin in plugins {
            let conf = self.plugin_conf(list, plugin, runtime, prev.as_ref())?;
            match self.exec("ADD", &conf, at) {
                Ok(out) => prev = Some(out),
                Err(e) => {
                    let _ = self.del(list, at, runtime, prev.as_ref());
                    return Err(e);
                }
            }
        }
        Ok(prev.unwrap_or_else(|| json!({})))
    }

    /// Removes the attachment from every network of `list`, last plugin
    /// first; `prev` is the result ADD returned, if known. Every plugin is
    /// called even when one fails; the first failure is returned.
    pub fn del(
        &self,
        list: &Value,
        at: &Attachment,
        runtime: &Value,
        prev: Option<&Value>,
    ) -> Result<(), CniError> {
        let plugins = plugins_of(list)?;
        let mut first = None;
        for plugin in plugins.iter().rev() {
            let res = self
                .plugin_conf(list, plugin, runtime, prev)
                .and_then(|conf| self.exec("DEL", &conf, at).map(drop));
            if let Err(e) = res {
                tracing::warn!(error = %e, "CNI DEL");
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// One plugin's network config: its own block with the list's name and
    /// version, the previous result and the runtime config it is capable of.
    fn plugin_conf(
        &self,
        list: &Value,
        plugin: &Value,
        runtime: &Value,
        prev: Option<&Value>,
    ) -> Result<Value, CniError> {
        let mut conf: Map<String, Value> = plugin
            .as_object()
            .cloned()
            .ok_or_else(|| CniError::Config("a plugin is not an object".into()))?;
        for key in ["name", "cniVersion"] {
            if let Some(v) = list.get(key) {
                conf.insert(key.into(), v.clone());
            }
        }
        if let Some(prev) = prev {
            conf.insert("prevResult".into(), prev.clone());
        }
        let wanted: Map<String, Value> = conf
            .get("capabilities")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter(|(_, on)| on.as_bool() == Some(true))
            .filter_map(|(cap, _)| runtime.get(cap).map(|v| (cap.clone(), v.clone())))
            .collect();
        if !wanted.is_empty() {
            conf.insert("runtimeConfig".into(), Value::Object(wanted));
        }
        Ok(Value::Object(conf))
    }

    fn exec(
        &self,
        command: &'static str,
        conf: &Value,
        at: &Attachment,
    ) -> Result<Value, CniError> {
        let plugin = conf
            .get("type")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty() && !t.contains('/'))
            .ok_or_else(|| CniError::Config("a plugin has no type".into()))?
            .to_string();
        let spawn_err = |source| CniError::Spawn {
            plugin: plugin.clone(),
            source,
        };
        let mut child = Command::new(self.plugin_dir.join(&plugin))
            .env_clear()
            .env("PATH", PLUGIN_PATH)
            .env("CNI_COMMAND", command)
            .env("CNI_CONTAINERID", &at.container_id)
            .env("CNI_NETNS", &at.netns)
            .env("CNI_IFNAME", &at.ifname)
            .env("CNI_PATH", &self.plugin_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(spawn_err)?;
        let input = serde_json::to_vec(conf).map_err(|e| CniError::Config(e.to_string()))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(&input).map_err(spawn_err)?;
        }
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        // A hung plugin must not hold every alloc's networking up for good.
        let out = match rx.recv_timeout(PLUGIN_TIMEOUT) {
            Ok(out) => out.map_err(spawn_err)?,
            Err(_) => {
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
                return Err(CniError::Plugin {
                    plugin,
                    command,
                    message: format!("no answer within {}s", PLUGIN_TIMEOUT.as_secs()),
                });
            }
        };
        if !out.status.success() {
            let message = match serde_json::from_slice::<Value>(&out.stdout) {
                Ok(err) => {
                    let msg = err.get("msg").and_then(Value::as_str).unwrap_or_default();
                    match err.get("details").and_then(Value::as_str) {
                        Some(d) if !d.is_empty() => format!("{msg}: {d}"),
                        _ => msg.to_string(),
                    }
                }
                Err(_) => format!(
                    "{} {}",
                    String::from_utf8_lossy(&out.stdout).trim(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            };
            return Err(CniError::Plugin {
                plugin,
                command,
                message,
            });
        }
        if out.stdout.iter().all(u8::is_ascii_whitespace) {
            return Ok(json!({}));
        }
        serde_json::from_slice(&out.stdout).map_err(|e| CniError::Plugin {
            plugin,
            command,
            message: format!("unreadable result: {e}"),
        })
    }
}

fn plugins_of(list: &Value) -> Result<&Vec<Value>, CniError> {
    list.get("plugins")
        .and_then(Value::as_array)
        .filter(|p| !p.is_empty())
        .ok_or_else(|| CniError::Config("no plugins".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_gets_the_list_name_prev_result_and_only_its_runtime_config() {
        let runner = CniRunner::new("/nowhere");
        let list = json!({"cniVersion": "1.0.0", "name": "n", "plugins": [
            {"type": "portmap", "capabilities": {"portMappings": true}},
            {"type": "loopback"},
        ]});
        let runtime = json!({"portMappings": [{"hostPort": 1, "containerPort": 2}], "other": 1});
        let prev = json!({"ips": []});
        let conf = runner
            .plugin_conf(&list, &list["plugins"][0], &runtime, Some(&prev))
            .expect("conf");
        assert_eq!(conf["name"], "n");
        assert_eq!(conf["cniVersion"], "1.0.0");
        assert_eq!(conf["prevResult"], prev);
        assert_eq!(
            conf["runtimeConfig"],
            json!({"portMappings": runtime["portMappings"]})
        );
        let plain = runner
            .plugin_conf(&list, &list["plugins"][1], &runtime, None)
            .expect("conf");
        assert!(plain.get("runtimeConfig").is_none());
        assert!(plain.get("prevResult").is_none());
    }

    #[test]
    fn a_missing_plugin_is_named() {
        let runner = CniRunner::new("/nowhere");
        let list = json!({"cniVersion": "1.0.0", "name": "n", "plugins": [{"type": "bridge"}]});
        let at = Attachment {
            container_id: "c".into(),
            netns: "/nowhere/ns".into(),
            ifname: "eth0".into(),
        };
        let err = runner.add(&list, &at, &json!({})).expect_err("no plugin");
        assert!(err.to_string().contains("bridge"), "{err}");
    }
}
