//! Nomad's defaults for a task's `artifact`, `template` and `identity` blocks, filled by
//! the parsers and again at canonicalization (for jobs built over gRPC).
//!
//! Only what is plainly unset is filled: empty strings and lists and a zero change-script
//! timeout. A zero splay or owner id can be meant, so the parsers, which know whether the
//! field was written, fill those ([`TEMPLATE_SPLAY_NS`], [`OWNER_UNSET`]).

use caravan_proto::{Artifact, Task, Template, WorkloadIdentity};

/// A template's splay when it is left out: up to 5s before a change is applied.
pub const TEMPLATE_SPLAY_NS: i64 = 5_000_000_000;
/// A template file's owner (uid or gid) left out: the client leaves the owner as it is.
pub const OWNER_UNSET: i32 = -1;
/// A change script's timeout when it is left out.
pub const CHANGE_SCRIPT_TIMEOUT_NS: i64 = 5_000_000_000;
/// The name of a task's own identity.
pub const DEFAULT_IDENTITY_NAME: &str = "default";
/// The audience of a task's own identity, the only one it may have.
pub const DEFAULT_IDENTITY_AUDIENCE: &str = "nomadproject.io";

const CHANGE_MODE_RESTART: &str = "restart";
const CHANGE_MODE_SIGNAL: &str = "signal";
const DEFAULT_SIGNAL: &str = "SIGHUP";
const DEFAULT_PERMS: &str = "0644";
const LEFT_DELIMITER: &str = "{{";
const RIGHT_DELIMITER: &str = "}}";
const ARTIFACT_MODE_ANY: &str = "any";
const ARTIFACT_MODE_FILE: &str = "file";
const ARTIFACT_DESTINATION: &str = "local/";

/// Fills the defaults of every artifact, template and identity of a task.
pub(crate) fn fill(task: &mut Task) {
    task.artifacts.iter_mut().for_each(artifact);
    task.templates.iter_mut().for_each(template);
    task.identities.iter_mut().for_each(identity);
}

/// An artifact's mode (`any`) and destination: `local/`, or `local/<file name>` for a
/// single file.
pub(crate) fn artifact(a: &mut Artifact) {
    if a.mode.is_empty() {
        a.mode = ARTIFACT_MODE_ANY.to_string();
    }
    if a.destination.is_empty() {
        a.destination = if a.mode == ARTIFACT_MODE_FILE {
            let source = a.source.split(['?', '#']).next().unwrap_or_default();
            let name = source.rsplit('/').next().unwrap_or_default();
            format!("local/{name}")
        } else {
            ARTIFACT_DESTINATION.to_string()
        };
    }
}

/// A template's change mode, signal (upper case; `SIGHUP` for the signal mode), perms,
/// delimiters and change-script timeout.
pub(crate) fn template(t: &mut Template) {
    if t.change_mode.is_empty() {
        t.change_mode = CHANGE_MODE_RESTART.to_string();
    }
    if t.change_signal.is_empty() {
        if t.change_mode == CHANGE_MODE_SIGNAL {
            t.change_signal = DEFAULT_SIGNAL.to_string();
        }
    } else {
        t.change_signal = t.change_signal.to_uppercase();
    }
    if t.perms.is_empty() {
        t.perms = DEFAULT_PERMS.to_string();
    }
    if t.left_delimiter.is_empty() {
        t.left_delimiter = LEFT_DELIMITER.to_string();
    }
    if t.right_delimiter.is_empty() {
        t.right_delimiter = RIGHT_DELIMITER.to_string();
    }
    if let Some(s) = t.change_script.as_mut()
        && s.timeout_ns == 0
    {
        s.timeout_ns = CHANGE_SCRIPT_TIMEOUT_NS;
    }
}

/// An identity's name (`default`), the default identity's audience and an upper-case
/// change signal.
pub(crate) fn identity(id: &mut WorkloadIdentity) {
    if id.name.is_empty() {
        id.name = DEFAULT_IDENTITY_NAME.to_string();
    }
    if id.name == DEFAULT_IDENTITY_NAME && id.audience.is_empty() {
        id.audience = vec![DEFAULT_IDENTITY_AUDIENCE.to_string()];
    }
    id.change_signal = id.change_signal.to_uppercase();
}

/// Whether a name is the task's own identity's (`default`, or left out).
pub(crate) fn is_default_identity_name(name: &str) -> bool {
    name.is_empty() || name == DEFAULT_IDENTITY_NAME
}

/// The identity every task has without asking: the default one, given to the task
/// neither in its env nor in a file, with nothing else set.
pub(crate) fn is_implicit_identity(id: &WorkloadIdentity) -> bool {
    is_default_identity_name(&id.name)
        && !id.env
        && !id.file
        && id.ttl_ns == 0
        && id.change_mode.is_empty()
        && id.change_signal.is_empty()
        && (id.audience.is_empty() || id.audience == [DEFAULT_IDENTITY_AUDIENCE])
}
