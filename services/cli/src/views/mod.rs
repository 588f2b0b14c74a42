//! What the status commands print, as pure functions of the API's answers
//! and the current time, so the layout is tested without a cluster.

mod alloc;
mod deployment;
mod eval;
mod history;
mod job;
mod node;

pub use alloc::{ServiceCheck, alloc_page, task_names};
pub use deployment::{deployment_block, deployment_list, deployment_page};
pub use eval::{eval_list, eval_page};
pub use history::{HistoryOptions, job_history, one_version};
pub use job::{JobPage, job_header, job_list, job_page};
pub use node::{node_list, node_page};

use caravan_model::NomadName;
use caravan_proto::Allocation;

use crate::format::{pretty_time_diff, short_id, table};

/// The allocations table of `job status`, `node status` and `eval status`,
/// newest first.
pub fn alloc_list(allocs: &[Allocation], now: i64) -> String {
    let mut sorted: Vec<&Allocation> = allocs.iter().collect();
    sorted.sort_by(|a, b| {
        b.create_revision
            .cmp(&a.create_revision)
            .then_with(|| a.id.cmp(&b.id))
    });
    let mut rows = vec![
        [
            "ID",
            "Node ID",
            "Task Group",
            "Version",
            "Desired",
            "Status",
            "Created",
            "Modified",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for a in sorted {
        rows.push(vec![
            short_id(&a.id).to_string(),
            short_id(&a.node_id).to_string(),
            a.task_group.clone(),
            a.job_version.to_string(),
            a.desired_status().nomad_name().to_string(),
            a.client_status().nomad_name().to_string(),
            pretty_time_diff(a.create_time_unix_ns, now),
            pretty_time_diff(a.modify_time_unix_ns, now),
        ]);
    }
    table(rows)
}

#[cfg(test)]
pub(crate) mod fixtures {
    //! Objects the view tests share.

    use caravan_proto::{AllocClientStatus, AllocDesiredStatus, Allocation};

    /// Seconds as nanoseconds.
    pub const S: i64 = 1_000_000_000;
    /// A fixed "now".
    pub const NOW: i64 = 1_700_000_000 * S;

    /// A running allocation of `hello.hello[0]`.
    pub fn alloc(id: &str, rev: i64) -> Allocation {
        let mut a = Allocation {
            id: id.into(),
            name: "hello.hello[0]".into(),
            namespace: "default".into(),
            job_id: "hello".into(),
            task_group: "hello".into(),
            node_id: "f7476465-0000-0000-0000-000000000000".into(),
            node_name: "dev".into(),
            eval_id: "be9bde98-0000-0000-0000-000000000000".into(),
            create_time_unix_ns: NOW - 65 * S,
            modify_time_unix_ns: NOW - 5 * S,
            create_revision: rev,
            ..Default::default()
        };
        a.set_desired_status(AllocDesiredStatus::Run);
        a.set_client_status(AllocClientStatus::Running);
        a
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    #[test]
    fn allocations_are_listed_newest_first() {
        let out = alloc_list(
            &[alloc("0af996ed-1111", 10), alloc("8ba85cef-2222", 12)],
            NOW,
        );
        assert_eq!(
            out,
            "ID        Node ID   Task Group  Version  Desired  Status   Created   Modified\n\
             8ba85cef  f7476465  hello       0        run      running  1m5s ago  5s ago\n\
             0af996ed  f7476465  hello       0        run      running  1m5s ago  5s ago"
        );
    }
}
