//! What etcd holds after a run, and whether the run was clean: no node went
//! down, no allocation was replaced, over-committed or duplicated, and etcd's
//! size.

use std::time::Duration;

use caravan_integration_tests::state::{duplicated_allocs, overcommitted_nodes};
use caravan_integration_tests::{ClusterState, etcd};
use caravan_proto::NodeStatus;
use serde::Serialize;

/// How many replaced allocations a report describes.
const REPLACED_SHOWN: usize = 5;
/// How long asking etcd for its status may take.
const STATUS_TIMEOUT: Duration = Duration::from_secs(10);

/// The cluster's state after the run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Checks {
    /// Names of the nodes whose status is down.
    pub nodes_down: Vec<String>,
    /// Allocations in etcd (any status).
    pub allocs_in_etcd: usize,
    /// Allocations the jobs asked for: `jobs × count`.
    pub allocs_wanted: usize,
    /// Allocations replacing another (`previous_allocation` set).
    pub replacements: usize,
    /// The first few replaced allocations, with how they ended, so a run
    /// that replaced any says why.
    pub replaced: Vec<String>,
    /// Nodes whose live allocations exceed what they offer.
    pub overcommitted: Vec<String>,
    /// Live allocations of one job sharing a name.
    pub duplicated: Vec<String>,
    /// Keys under the cluster's prefix.
    pub keys: u64,
    /// etcd's database size (the whole member, not only this prefix).
    pub etcd_db_size_bytes: Option<i64>,
    /// The part of it in use (the rest is free pages until a defrag).
    pub etcd_db_in_use_bytes: Option<i64>,
}

impl Checks {
    /// Reads the checks from `state`; etcd's size from `endpoints`.
    pub async fn read(
        state: &ClusterState,
        endpoints: &[String],
        allocs_wanted: usize,
    ) -> anyhow::Result<Checks> {
        let nodes = state.nodes().await?;
        let allocs = state.allocs().await?;
        let (db_size, db_in_use) = match etcd_sizes(endpoints).await {
            Ok((size, in_use)) => (Some(size), Some(in_use)),
            Err(err) => {
                eprintln!("cannot read etcd's status: {err:#}");
                (None, None)
            }
        };
        let mut nodes_down: Vec<String> = nodes
            .iter()
            .filter(|n| n.status() == NodeStatus::Down)
            .map(|n| n.name.clone())
            .collect();
        nodes_down.sort();
        let by_id: std::collections::HashMap<&str, &caravan_proto::Allocation> =
            allocs.iter().map(|a| (a.id.as_str(), a)).collect();
        let replaced = allocs
            .iter()
            .filter(|a| !a.previous_allocation.is_empty())
            .take(REPLACED_SHOWN)
            .map(|a| match by_id.get(a.previous_allocation.as_str()) {
                Some(p) => format!(
                    "{} on node {}: client {:?} ({:?}), desired {:?} ({:?})",
                    p.name,
                    p.node_id,
                    p.client_status(),
                    p.client_description,
                    p.desired_status(),
                    p.desired_description
                ),
                None => format!(
                    "{}: its predecessor {} is gone",
                    a.name, a.previous_allocation
                ),
            })
            .collect();
        Ok(Checks {
            replaced,
            nodes_down,
            allocs_in_etcd: allocs.len(),
            allocs_wanted,
            replacements: allocs
                .iter()
                .filter(|a| !a.previous_allocation.is_empty())
                .count(),
            overcommitted: overcommitted_nodes(&nodes, &allocs),
            duplicated: duplicated_allocs(&allocs),
            keys: state.key_count().await?,
            etcd_db_size_bytes: db_size,
            etcd_db_in_use_bytes: db_in_use,
        })
    }

    /// What went wrong, one line each; empty for a clean run.
    pub fn failures(&self) -> Vec<String> {
        let mut failed = Vec::new();
        if !self.nodes_down.is_empty() {
            failed.push(format!(
                "{} nodes went down: {}",
                self.nodes_down.len(),
                self.nodes_down.join(", ")
            ));
        }
        if self.replacements > 0 {
            failed.push(format!(
                "{} allocations were replaced, e.g. {}",
                self.replacements,
                self.replaced.join("; ")
            ));
        }
        if self.allocs_in_etcd != self.allocs_wanted {
            failed.push(format!(
                "{} allocations in etcd, {} wanted",
                self.allocs_in_etcd, self.allocs_wanted
            ));
        }
        for over in &self.overcommitted {
            failed.push(format!("over-committed: {over}"));
        }
        for dup in &self.duplicated {
            failed.push(format!("duplicated: {dup}"));
        }
        failed
    }
}

/// etcd's database size and the part of it in use.
async fn etcd_sizes(endpoints: &[String]) -> anyhow::Result<(i64, i64)> {
    let status = etcd::status(endpoints, STATUS_TIMEOUT).await?;
    Ok((status.db_size(), status.raft_used_db_size()))
}
