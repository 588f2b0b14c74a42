//! A group's `Volumes` and a task's `VolumeMounts`, both ways.
//!
//! Caravan mounts host volumes a client configures (`type = "host"`). What only Nomad's
//! dynamic host volumes or CSI volumes use (`access_mode`, `attachment_mode`, `sticky`,
//! `mount_options`, `type = "csi"`) is refused by name: such a job would otherwise be
//! placed on a node without the storage it asked for.

use super::fields::{take_bool, take_str};
use super::to_proto::{Conversion, is_meaningful as meaningful};
use crate::error::join_path as join;
use caravan_proto::{VolumeMount, VolumeRequest};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Nomad's CSI volumes, which Caravan refuses.
const VOLUME_TYPE_CSI: &str = "csi";

/// Mount propagation modes Nomad knows; Caravan's drivers mount privately.
const PROPAGATION_PRIVATE: &str = "private";
const PROPAGATION_MODES: &[&str] = &["private", "host-to-task", "bidirectional"];

/// A group's `Volumes` object (`{"name": {"Type": …}}`) as Caravan's requests.
pub(super) fn volumes_to_proto(
    value: Option<Value>,
    base: &str,
    conv: &mut Conversion,
) -> BTreeMap<String, VolumeRequest> {
    let mut out = BTreeMap::new();
    let map = match value {
        None | Some(Value::Null) => return out,
        Some(Value::Object(map)) => map,
        Some(other) => {
            conv.err(
                join(base, "Volumes"),
                format!("must be an object of volumes by name (got {other})"),
            );
            return out;
        }
    };
    for (name, v) in map {
        let path = join(base, &format!("volume {name:?}"));
        let Value::Object(mut fields) = v else {
            conv.err(path, "must be an object");
            continue;
        };
        // The label repeats the key; Nomad's API carries both.
        if let Some(Value::String(n)) = fields.remove("Name")
            && !n.is_empty()
            && n != name
        {
            conv.err(
                join(&path, "Name"),
                format!("names another volume ({n:?}) than its key"),
            );
        }
        let kind = take_str(&mut fields, "Type", &path, conv);
        if kind == VOLUME_TYPE_CSI {
            conv.err(
                join(&path, "type"),
                "csi volumes are not supported by Caravan: it has no CSI plugins",
            );
        }
        let source = take_str(&mut fields, "Source", &path, conv);
        let read_only = take_bool(&mut fields, "ReadOnly", &path, conv);
        let per_alloc = take_bool(&mut fields, "PerAlloc", &path, conv);
        for (json_name, hcl) in [
            ("Sticky", "sticky"),
            ("AccessMode", "access_mode"),
            ("AttachmentMode", "attachment_mode"),
        ] {
            if fields.remove(json_name).as_ref().is_some_and(meaningful) {
                conv.err(
                    join(&path, hcl),
                    "is for dynamic host volumes and CSI volumes, which are not supported by Caravan: \
                     only host volumes a client configures can be mounted",
                );
            }
        }
        if fields
            .remove("MountOptions")
            .as_ref()
            .is_some_and(meaningful)
        {
            // Nomad's validation text for a host volume.
            conv.err(
                join(&path, "mount_options"),
                "host volumes cannot have mount options",
            );
        }
        for (unknown, v) in fields {
            if meaningful(&v) {
                conv.err(join(&path, &unknown), "is not a field of a volume");
            }
        }
        out.insert(
            name,
            VolumeRequest {
                r#type: kind,
                source,
                read_only,
                per_alloc,
            },
        );
    }
    out
}

/// A task's `VolumeMounts` list as Caravan's mounts.
pub(super) fn mounts_to_proto(
    value: Option<Value>,
    base: &str,
    conv: &mut Conversion,
) -> Vec<VolumeMount> {
    let items = match value {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Array(items)) => items,
        Some(other) => {
            conv.err(
                join(base, "VolumeMounts"),
                format!("must be a list (got {other})"),
            );
            return Vec::new();
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let path = join(base, &format!("volume_mount[{i}]"));
        let Value::Object(mut fields) = item else {
            conv.err(path, "must be an object");
            continue;
        };
        let volume = take_str(&mut fields, "Volume", &path, conv);
        let destination = take_str(&mut fields, "Destination", &path, conv);
        let read_only = take_bool(&mut fields, "ReadOnly", &path, conv);
        let mut propagation_mode = take_str(&mut fields, "PropagationMode", &path, conv);
        if propagation_mode.is_empty() {
            propagation_mode = PROPAGATION_PRIVATE.to_string();
        }
        if !PROPAGATION_MODES.contains(&propagation_mode.as_str()) {
            // Nomad's validation text.
            conv.err(
                join(&path, "propagation_mode"),
                format!("volume mount has an invalid propagation mode: {propagation_mode:?}"),
            );
        } else if propagation_mode != PROPAGATION_PRIVATE {
            conv.err(
                join(&path, "propagation_mode"),
                format!(
                    "{propagation_mode:?} is not supported by Caravan: its drivers mount volumes privately"
                ),
            );
        }
        if fields
            .remove("SELinuxLabel")
            .as_ref()
            .is_some_and(meaningful)
        {
            conv.err(
                join(&path, "selinux_label"),
                "is not supported by Caravan: its drivers do not relabel volumes",
            );
        }
        for (unknown, v) in fields {
            if meaningful(&v) {
                conv.err(join(&path, &unknown), "is not a field of a volume mount");
            }
        }
        out.push(VolumeMount {
            volume,
            destination,
            read_only,
            propagation_mode,
        });
    }
    out
}

/// A group's volumes in Nomad's JSON (`null` when it has none, as Nomad renders it).
pub(super) fn volumes_to_api(volumes: &BTreeMap<String, VolumeRequest>) -> Option<Value> {
    if volumes.is_empty() {
        return None;
    }
    let map: Map<String, Value> = volumes
        .iter()
        .map(|(name, v)| {
            (
                name.clone(),
                json!({
                    "Name": name,
                    "Type": v.r#type,
                    "Source": v.source,
                    "ReadOnly": v.read_only,
                    "PerAlloc": v.per_alloc,
                    "Sticky": false,
                    "AccessMode": "",
                    "AttachmentMode": "",
                    "MountOptions": null,
                }),
            )
        })
        .collect();
    Some(Value::Object(map))
}

/// A task's volume mounts in Nomad's JSON.
pub(super) fn mounts_to_api(mounts: &[VolumeMount]) -> Option<Value> {
    if mounts.is_empty() {
        return None;
    }
    Some(Value::Array(
        mounts
            .iter()
            .map(|m| {
                json!({
                    "Volume": m.volume,
                    "Destination": m.destination,
                    "ReadOnly": m.read_only,
                    "PropagationMode": m.propagation_mode,
                    "SELinuxLabel": "",
                })
            })
            .collect(),
    ))
}
