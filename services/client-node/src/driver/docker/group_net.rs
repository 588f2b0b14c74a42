//! What a group's network gives a docker task beyond its namespace: the
//! resolv.conf of the group's `dns` block, and, for a task that joins the
//! group's namespace, a hosts file naming the alloc under the namespace's
//! hostname (with the task's `extra_hosts`, which Docker refuses in a
//! namespace it does not own).

use bollard::models::Mount;

use super::container::bind;
use super::daemon::{message, not_found};
use super::infra::infra_name;
use super::task_config::DockerTask;
use crate::driver::{DriverError, TaskSpec};
use crate::network::etc_files;

/// Whether `task` joins the namespace of its alloc's infra container: it
/// is in a `bridge`/`none` group and wrote no `network_mode` of its own.
pub fn joins_group(task: &DockerTask, spec: &TaskSpec) -> bool {
    spec.netns.is_some() && !task.own_network_mode
}

/// Checks that the infra container of a joining task's alloc runs (the
/// task could not join its namespace otherwise) and returns its hostname.
/// One that is gone or stopped takes the group's namespace with it: the
/// task cannot run in the group's network again, and retrying cannot help.
pub async fn infra_hostname(
    docker: &bollard::Docker,
    alloc_id: &str,
) -> Result<String, DriverError> {
    let name = infra_name(alloc_id);
    let found = match docker.inspect_container(&name, None).await {
        Ok(c) => c,
        Err(e) if not_found(&e) => {
            return Err(DriverError::fatal(format!(
                "the alloc's infra container {name} is gone: it held the group's network namespace, \
                 which the task cannot join again (the allocation must be replaced)"
            )));
        }
        Err(e) => {
            return Err(DriverError::recoverable(format!(
                "Failed to inspect the infra container {name}: {}",
                message(&e)
            )));
        }
    };
    if !found
        .state
        .as_ref()
        .and_then(|s| s.running)
        .unwrap_or(false)
    {
        return Err(DriverError::fatal(format!(
            "the alloc's infra container {name} is not running: it held the group's network \
             namespace, which the task cannot join again (the allocation must be replaced)"
        )));
    }
    Ok(found.config.and_then(|c| c.hostname).unwrap_or_default())
}

/// The bind mounts of the group network's files for `task`, written into
/// its task dir: `/etc/resolv.conf` when the group has a `dns` block, and
/// `/etc/hosts` for a joining task when the group names a hostname or the
/// task has `extra_hosts`. `infra_hostname` is the infra container's (for
/// a joining task).
pub fn etc_mounts(
    task: &DockerTask,
    spec: &TaskSpec,
    infra_hostname: Option<&str>,
) -> Result<Vec<Mount>, DriverError> {
    let mut out = Vec::new();
    let task_dir = match &spec.dirs {
        Some(d) => &d.task_dir,
        None => return Ok(out),
    };
    let io = |what: &str, e: std::io::Error| {
        DriverError::recoverable(format!("failed to write the task's {what}: {e}"))
    };
    if let Some(dns) = &spec.group_net.dns {
        let path = etc_files::write_resolv_conf(task_dir, dns).map_err(|e| io("resolv.conf", e))?;
        out.push(bind(&path, "/etc/resolv.conf", true));
    }
    if joins_group(task, spec)
        && (spec.group_net.hostname.is_some() || !task.extra_hosts.is_empty())
    {
        let hostname = spec
            .group_net
            .hostname
            .as_deref()
            .or(infra_hostname)
            .filter(|h| !h.is_empty())
            .unwrap_or("localhost");
        let text = etc_files::hosts(&spec.group_net.ip, hostname, &task.extra_hosts)
            .map_err(|e| DriverError::fatal(format!("config.{e}")))?;
        let path = etc_files::write(task_dir, "hosts", &text).map_err(|e| io("hosts file", e))?;
        // Writable: a task may know better than the group's file.
        out.push(bind(&path, "/etc/hosts", false));
    }
    Ok(out)
}
