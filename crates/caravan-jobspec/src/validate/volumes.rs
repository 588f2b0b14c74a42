//! A group's volume requests and its tasks' mounts, with Nomad's validation texts
//! (`nomad/structs/volumes.go`, `Task.Validate`).

use super::Errors;
use caravan_proto::{JobType, TaskGroup};

/// The volume type Caravan mounts: a host volume its client configures.
pub const HOST: &str = "host";

/// Checks the group's volumes and every task's mounts of them.
pub(super) fn check(tg: &TaskGroup, base: &str, job_type: JobType, e: &mut Errors) {
    let canaries = tg.update.as_ref().map_or(0, |u| u.canary);
    for (name, v) in &tg.volumes {
        let path = crate::error::join_path(base, &format!("volume {name:?}"));
        if v.r#type == "csi" {
            e.on(
                &path,
                "type",
                "csi volumes are not supported by Caravan: it has no CSI plugins",
            );
        } else if v.r#type != HOST {
            e.on(
                &path,
                "type",
                format!("volume has unrecognized type {}", v.r#type),
            );
        }
        if v.source.is_empty() {
            e.on(&path, "source", "volume has an empty source");
        }
        if v.per_alloc {
            if matches!(job_type, JobType::System | JobType::Sysbatch) {
                e.on(
                    &path,
                    "per_alloc",
                    "volume cannot be per_alloc for system or sysbatch jobs",
                );
            }
            if canaries > 0 {
                e.on(
                    &path,
                    "per_alloc",
                    "volume cannot be per_alloc when canaries are in use",
                );
            }
        }
    }
    for (ti, t) in tg.tasks.iter().enumerate() {
        let tbase = super::task_base(base, t, ti);
        // raw_exec runs the task on the host, where nothing can be mounted for it;
        // Nomad fails such a task on the client, Caravan refuses it up front.
        if t.driver == "raw_exec" && !t.volume_mounts.is_empty() {
            e.on(
                &tbase,
                "volume_mount",
                format!(
                    "task driver {:?} for {:?} does not support host volumes",
                    t.driver, t.name
                ),
            );
        }
        for (i, m) in t.volume_mounts.iter().enumerate() {
            let path = crate::error::join_path(&tbase, &format!("volume_mount[{i}]"));
            if m.volume.is_empty() {
                e.on(&path, "volume", "volume mount references an empty volume");
            } else if !tg.volumes.contains_key(&m.volume) {
                e.on(
                    &path,
                    "volume",
                    format!(
                        "Volume Mount ({i}) references undefined volume {}",
                        m.volume
                    ),
                );
            }
            if m.destination.is_empty() {
                e.on(
                    &path,
                    "destination",
                    "volume mount has an empty destination: the path inside the task to mount it at",
                );
            }
        }
    }
}
