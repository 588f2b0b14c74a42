//! The `exec` driver's config, as Nomad's exec driver reads it. Caravan's
//! clients have no `exec` driver (a job asking for one waits for a node
//! that has it), but its config is still checked at submit time.

use super::schema::{Schema, Ty, opt, req};

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
