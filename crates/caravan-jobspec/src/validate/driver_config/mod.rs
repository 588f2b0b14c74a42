//! Task driver configs checked at submit time, as each driver would read
//! them on a client (Nomad checks them only there, when the task starts):
//! an unknown key, a value of the wrong type, or an option Caravan's driver
//! does not honour is an error naming the key, so a job that cannot run is
//! refused at `job run`, `job plan` and `job validate` instead of failing
//! on a node. Drivers without a schema here are not checked.

mod docker;
mod exec;
pub use exec::LINUX_CAPABILITIES;
mod mock;
mod raw_exec;
mod schema;

use caravan_proto::{Task, TaskGroup};

use super::Errors;
use schema::Schema;

/// The schema of `driver`, if Caravan knows the driver.
fn schema_of(driver: &str) -> Option<&'static Schema> {
    match driver {
        "docker" => Some(&docker::SCHEMA),
        "raw_exec" => Some(&raw_exec::SCHEMA),
        "exec" => Some(&exec::SCHEMA),
        "mock" => Some(&mock::SCHEMA),
        _ => None,
    }
}

/// Checks `task`'s driver config; errors go under `base` (the task's path).
pub(super) fn check(group: &TaskGroup, task: &Task, base: &str, e: &mut Errors) {
    let Some(schema) = schema_of(&task.driver) else {
        return;
    };
    let empty = prost_types::Struct::default();
    let config = task.config.as_ref().unwrap_or(&empty);
    let path = crate::error::join_path(base, "config");
    schema::check(schema, config, &path, e);
    if task.driver == "docker" {
        docker::check_more(group, task, config, &path, e);
    }
    if task.driver == "exec" {
        exec::check_more(config, &path, e);
    }
}

#[cfg(test)]
mod tests;
