//! The rules of Caravan's data model, each written once:
//! - when an allocation, an evaluation or a deployment is terminal (and the
//!   narrower questions beside it: live, waiting, followed);
//! - when a node takes placements;
//! - which jobs are templates, how job types behave, the valid priorities,
//!   and the status a job's allocations and evaluations give it;
//! - how allocations are named, Nomad's name of every status (both ways,
//!   and as the API shows an unset one), the evaluation triggers and task
//!   states;
//! - whether a new job version needs new allocations ([`tasks_updated`]);
//! - the ids of a node change's fanned-out evaluations ([`fan_out_eval_id`]);
//! - the ids Caravan makes for allocations and evaluations ([`ordered_uuid`]);
//! - the wall clock in Unix nanoseconds.
//!
//! The rules are extension traits on the messages `caravan-proto` generates
//! (`alloc.is_terminal()`, `eval.status().is_terminal()`), in a crate of
//! their own rather than beside the generated code, because:
//! - `caravan-proto` is exactly what `proto/` generates; a rule changed here
//!   does not recompile the generated code, nor the crates that only move
//!   messages;
//! - the rules carry their unit tests and the Nomad behaviour they follow,
//!   which belong with logic, not with the wire format;
//! - it depends on the messages alone (no gRPC), so every crate that decides
//!   something, `caravan-scheduler` and `caravan-jobspec` included, can use
//!   it and the dependency arrows still point down.
//!
//! Everything here is pure except [`now_unix_ns`], which reads the wall
//! clock, and [`fresh_id`], which reads it and draws random bits.
//! `caravan-scheduler` calls neither: it takes the time from its caller and
//! draws from its own seeded generator.

mod alloc;
mod clock;
mod deployment;
pub mod disconnect;
mod eval;
mod fan_out;
mod id;
mod job;
mod name;
mod names;
mod node;
pub mod task_state;
pub mod trigger;
mod update;

pub use alloc::{AllocClientStatusExt, AllocDesiredStatusExt, AllocExt};
pub use clock::now_unix_ns;
pub use deployment::DeploymentStatusExt;
pub use eval::EvalStatusExt;
pub use fan_out::fan_out_eval_id;
pub use id::{fresh_id, id_lead, ordered_uuid};
pub use job::{
    DEFAULT_PRIORITY, JobExt, JobTypeExt, MAX_PRIORITY, MIN_PRIORITY, job_finished, job_status,
};
pub use name::{alloc_index, alloc_name, per_alloc_source, trailing_alloc_index};
pub use names::NomadName;
pub use node::NodeExt;
pub use update::{group_destructive, task_destructive, tasks_updated, tasks_updated_in};
