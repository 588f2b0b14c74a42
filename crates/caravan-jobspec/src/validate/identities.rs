//! A task's workload identities, with Nomad's validation and warning texts
//! (`WorkloadIdentity.Validate` and `Warnings`).

use super::Errors;
use crate::error::join_path as join;
use crate::task_defaults::{DEFAULT_IDENTITY_AUDIENCE, is_default_identity_name};
use caravan_proto::Task;
use regex::Regex;
use std::collections::BTreeSet;
use std::sync::LazyLock;

static VALID_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new("^[a-zA-Z0-9-_]{1,128}$").expect("static regex"));

fn path(tbase: &str, name: &str) -> String {
    join(tbase, &format!("identity {name:?}"))
}

/// Checks every identity of a task.
pub(super) fn check(t: &Task, tbase: &str, e: &mut Errors) {
    let mut seen = BTreeSet::new();
    for id in &t.identities {
        let path = path(tbase, &id.name);
        if !VALID_NAME.is_match(&id.name) {
            e.on(
                &path,
                "name",
                format!(
                    "invalid name {:?}. Must match regex {}",
                    id.name,
                    VALID_NAME.as_str()
                ),
            );
        } else if !seen.insert(id.name.as_str()) {
            e.on(
                &path,
                "name",
                format!("Duplicate identity name {:?}", id.name),
            );
        }
        for (i, aud) in id.audience.iter().enumerate() {
            if aud.is_empty() {
                e.on(
                    &path,
                    "aud",
                    format!("an empty string is an invalid audience ({})", i + 1),
                );
            }
        }
        let default = is_default_identity_name(&id.name);
        if default && id.audience.iter().any(|a| a != DEFAULT_IDENTITY_AUDIENCE) {
            e.on(
                &path,
                "aud",
                format!(
                    "the default identity's audience is always {DEFAULT_IDENTITY_AUDIENCE:?}; name the identity to give it another"
                ),
            );
        }
        match id.change_mode.as_str() {
            "" | "noop" | "restart" => {
                if !id.change_signal.is_empty() {
                    e.on(
                        &path,
                        "change_signal",
                        format!(
                            "can only use change_signal={:?} with change_mode=\"signal\"",
                            id.change_signal
                        ),
                    );
                }
            }
            "signal" => {
                if id.change_signal.is_empty() {
                    e.on(
                        &path,
                        "change_signal",
                        "change_signal must be specified when using change_mode=\"signal\"",
                    );
                }
            }
            other => e.on(
                &path,
                "change_mode",
                format!("invalid change_mode: {other}"),
            ),
        }
        if id.ttl_ns > 0 && default {
            e.on(&path, "ttl", "ttl for default identity not yet supported");
        }
        if id.ttl_ns < 0 {
            e.on(&path, "ttl", "ttl must be >= 0");
        }
    }
}

/// Nomad's warnings about a task's identities.
pub(super) fn warnings(t: &Task, tbase: &str) -> Vec<String> {
    let mut out = Vec::new();
    for id in &t.identities {
        let path = path(tbase, &id.name);
        match id.audience.len() {
            0 => out.push(format!("{path}: identities without an audience are insecure")),
            1 => {}
            _ => out.push(format!(
                "{path}: while multiple audiences is allowed, it is more secure to use 1 audience per identity"
            )),
        }
        if !is_default_identity_name(&id.name) && id.ttl_ns == 0 {
            out.push(format!(
                "{path}: identities without an expiration are insecure"
            ));
        }
        if id.env && id.change_mode != "restart" {
            out.push(format!(
                "{path}: using env=true without change_mode=\"restart\" may result in task not getting updated identity"
            ));
        }
    }
    out
}
