//! Which jobs a change of a node concerns: the rule the api-gateway applies
//! when it writes the change and the eval broker when it finishes the
//! change's fan-out, written once.

use std::collections::BTreeSet;
use std::sync::Arc;

use caravan_model::{AllocExt, JobExt, JobTypeExt};
use caravan_proto::{Job, Node};

use crate::tables::Tables;

/// The jobs a change of `node` concerns, each once: those with live
/// allocations on it and, unless `only_placed`, the system and sysbatch
/// jobs of its pool (they may now place there). System jobs are left out
/// with `ignore_system`; stopped jobs and templates always.
pub fn node_change_jobs(
    tables: &Tables,
    node: &Node,
    only_placed: bool,
    ignore_system: bool,
) -> Vec<Arc<Job>> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    let mut push = |job: &Arc<Job>| {
        let system = job.r#type().runs_on_every_node();
        if (ignore_system && system) || job.stop || job.is_template() {
            return;
        }
        if seen.insert((job.namespace.clone(), job.id.clone())) {
            out.push(Arc::clone(job));
        }
    };
    for alloc in tables.allocs_by_node(&node.id) {
        if alloc.is_terminal() {
            continue;
        }
        if let Some(job) = tables.job(&alloc.namespace, &alloc.job_id) {
            push(job);
        }
    }
    if !only_placed {
        for job in tables.jobs() {
            let pool_matches = job.node_pool == "all"
                || job.node_pool == node.node_pool
                || (job.node_pool.is_empty() && node.node_pool == "default");
            if job.r#type().runs_on_every_node() && pool_matches {
                push(job);
            }
        }
    }
    out
}
