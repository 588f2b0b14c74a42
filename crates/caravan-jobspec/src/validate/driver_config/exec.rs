//! The `exec` driver's config, as Nomad's exec driver reads it: the
//! namespace modes must be `private` or `host`, and every capability named
//! in `cap_add`/`cap_drop` must be one Linux has (whether the client allows
//! an added one is the client's to say, when the task starts).

use prost_types::Struct;

use super::super::Errors;
use super::schema::{Schema, Ty, as_string, as_strings, opt, req};

/// The exec driver's schema.
pub const SCHEMA: Schema = Schema {
    driver: "exec",
    fields: &[
        req("command", Ty::Str),
        opt("args", Ty::StrList),
        opt("pid_mode", Ty::Str),
        opt("ipc_mode", Ty::Str),
        opt("cap_add", Ty::StrList),
        opt("cap_drop", Ty::StrList),
        opt("work_dir", Ty::Str),
    ],
};

/// Linux's capabilities, without their `CAP_` prefix, in the order of their
/// numbers (a capability's index is its bit).
pub const LINUX_CAPABILITIES: [&str; 41] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
];

/// The checks the schema's types can't say.
pub fn check_more(config: &Struct, path: &str, e: &mut Errors) {
    for key in ["pid_mode", "ipc_mode"] {
        if let Some(mode) = config.fields.get(key).and_then(as_string)
            && !matches!(mode.trim(), "" | "private" | "host")
        {
            e.at(
                path,
                key,
                format!("must be \"private\" or \"host\", not {mode:?}"),
            );
        }
    }
    for key in ["cap_add", "cap_drop"] {
        let Some(list) = config.fields.get(key) else {
            continue;
        };
        for (i, name) in as_strings(list).iter().enumerate() {
            let upper = name.trim().to_ascii_uppercase();
            let bare = upper.strip_prefix("CAP_").unwrap_or(&upper);
            if bare != "ALL" && !LINUX_CAPABILITIES.contains(&bare) {
                e.at(
                    path,
                    &format!("{key}[{i}]"),
                    format!("unknown capability {name:?}"),
                );
            }
        }
    }
}
