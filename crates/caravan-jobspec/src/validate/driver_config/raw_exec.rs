//! The `raw_exec` driver's config: Nomad's options, those Caravan does not
//! honour refused with the reason.

use super::schema::{Schema, Ty, no, opt, req};

/// The raw_exec driver's schema.
pub const SCHEMA: Schema = Schema {
    driver: "raw_exec",
    fields: &[
        req("command", Ty::Str),
        opt("args", Ty::StrList),
        opt("work_dir", Ty::Str),
        no(
            "cgroup_v1_override",
            "tasks are not placed in cgroups of their own",
        ),
        no(
            "cgroup_v2_override",
            "tasks are not placed in cgroups of their own",
        ),
        no("oom_score_adj", "the OOM score of tasks is not set"),
        no(
            "denied_envvars",
            "a task never sees the client's environment, only its own",
        ),
    ],
};
