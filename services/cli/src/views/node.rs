//! `node status`: the nodes table and one node's page (drivers, allocated
//! resources, allocations).

use caravan_model::{AllocExt, NomadName};
use caravan_proto::{Allocation, Node};

use crate::format::{ibytes, kv, mb, rfc3339, short_id, table};
use crate::views::alloc_list;

/// `false`, or `true; <deadline> deadline; ignoring system jobs`.
fn drain_text(node: &Node) -> String {
    let Some(d) = &node.drain_strategy else {
        return "false".to_string();
    };
    let mut out = String::from("true");
    if d.deadline_ns < 0 {
        out.push_str("; force drain");
    } else if d.force_deadline_unix_ns <= 0 {
        out.push_str("; no deadline");
    } else {
        out.push_str(&format!("; {} deadline", rfc3339(d.force_deadline_unix_ns)));
    }
    if d.ignore_system_jobs {
        out.push_str("; ignoring system jobs");
    }
    out
}

/// The nodes table, sorted by id.
pub fn node_list(nodes: &[Node]) -> String {
    let mut sorted: Vec<&Node> = nodes.iter().collect();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    let mut rows = vec![
        [
            "ID",
            "Node Pool",
            "DC",
            "Name",
            "Class",
            "Drain",
            "Eligibility",
            "Status",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for n in sorted {
        rows.push(vec![
            short_id(&n.id).to_string(),
            pool(n).to_string(),
            n.datacenter.clone(),
            n.name.clone(),
            n.node_class.clone(),
            n.drain_strategy.is_some().to_string(),
            n.scheduling_eligibility().nomad_name().to_string(),
            n.status().nomad_name().to_string(),
        ]);
    }
    table(rows)
}

fn pool(n: &Node) -> &str {
    if n.node_pool.is_empty() {
        "default"
    } else {
        &n.node_pool
    }
}

/// The healthy drivers, sorted, comma-separated.
fn drivers(n: &Node) -> String {
    let mut names: Vec<&str> = n
        .drivers
        .iter()
        .filter(|(_, d)| d.detected && d.healthy)
        .map(|(name, _)| name.as_str())
        .collect();
    names.sort_unstable();
    names.join(",")
}

/// One node's page; `allocs` are the allocations on it.
pub fn node_page(node: &Node, allocs: &[Allocation], now: i64) -> String {
    let mut out = kv(&[
        ("ID", node.id.clone()),
        ("Name", node.name.clone()),
        ("Node Pool", pool(node).to_string()),
        ("Class", node.node_class.clone()),
        ("DC", node.datacenter.clone()),
        ("Drain", drain_text(node)),
        (
            "Eligibility",
            node.scheduling_eligibility().nomad_name().to_string(),
        ),
        ("Status", node.status().nomad_name().to_string()),
        ("Address", node.http_addr.clone()),
        ("Driver Status", drivers(node)),
    ]);
    out.push_str("\n\nAllocated Resources\n");
    out.push_str(&allocated(node, allocs));
    out.push_str("\n\nAllocations\n");
    if allocs.is_empty() {
        out.push_str("No allocations placed");
    } else {
        out.push_str(&alloc_list(allocs, now));
    }
    out
}

/// `CPU / Memory / Disk` used by live allocations out of what the node
/// offers after its reservations.
fn allocated(node: &Node, allocs: &[Allocation]) -> String {
    let (mut cpu, mut mem, mut disk) = (0u64, 0u64, 0u64);
    for a in allocs {
        if !a.is_live() {
            continue;
        }
        let Some(r) = &a.allocated_resources else {
            continue;
        };
        for t in r.tasks.values() {
            cpu += u64::from(t.cpu_mhz);
            mem += u64::from(t.memory_mb);
        }
        disk += r.shared.as_ref().map_or(0, |s| u64::from(s.disk_mb));
    }
    let total = node.resources.clone().unwrap_or_default();
    let reserved = node.reserved.clone().unwrap_or_default();
    let total_cpu = total.cpu_mhz.saturating_sub(reserved.cpu_mhz);
    let total_mem = total.memory_mb.saturating_sub(reserved.memory_mb);
    let total_disk = total.disk_mb.saturating_sub(reserved.disk_mb);
    table([
        vec!["CPU".to_string(), "Memory".to_string(), "Disk".to_string()],
        vec![
            format!("{cpu}/{total_cpu} MHz"),
            format!("{}/{}", ibytes(mb(mem)), ibytes(mb(total_mem))),
            format!("{}/{}", ibytes(mb(disk)), ibytes(mb(total_disk))),
        ],
    ])
}

#[cfg(test)]
mod tests {
    use caravan_proto::{
        AllocatedResources, AllocatedSharedResources, AllocatedTaskResources, DrainStrategy,
        DriverInfo, NodeReservedResources, NodeResources, NodeStatus, SchedulingEligibility,
    };

    use super::*;
    use crate::views::fixtures::*;

    fn node() -> Node {
        let mut n = Node {
            id: "f7476465-0000-0000-0000-000000000000".into(),
            name: "dev".into(),
            datacenter: "dc1".into(),
            http_addr: "127.0.0.1:4660".into(),
            resources: Some(NodeResources {
                cpu_mhz: 4000,
                memory_mb: 8192,
                disk_mb: 10_240,
                ..Default::default()
            }),
            reserved: Some(NodeReservedResources {
                cpu_mhz: 100,
                ..Default::default()
            }),
            drivers: [
                (
                    "raw_exec".to_string(),
                    DriverInfo {
                        detected: true,
                        healthy: true,
                        ..Default::default()
                    },
                ),
                (
                    "mock".to_string(),
                    DriverInfo {
                        detected: true,
                        healthy: true,
                        ..Default::default()
                    },
                ),
                ("docker".to_string(), DriverInfo::default()),
            ]
            .into(),
            ..Default::default()
        };
        n.set_status(NodeStatus::Ready);
        n.set_scheduling_eligibility(SchedulingEligibility::Eligible);
        n
    }

    #[test]
    fn the_table_shows_pool_drain_and_eligibility() {
        let mut draining = node();
        draining.id = "aaaa0000-1".into();
        draining.name = "other".into();
        draining.drain_strategy = Some(DrainStrategy::default());
        draining.set_scheduling_eligibility(SchedulingEligibility::Ineligible);
        assert_eq!(
            node_list(&[node(), draining]),
            "ID        Node Pool  DC   Name   Class   Drain  Eligibility  Status\n\
             aaaa0000  default    dc1  other  <none>  true   ineligible   ready\n\
             f7476465  default    dc1  dev    <none>  false  eligible     ready"
        );
    }

    #[test]
    fn the_page_sums_live_allocations() {
        let mut a = alloc("0af996ed-1", 4);
        a.allocated_resources = Some(AllocatedResources {
            tasks: [(
                "hello".to_string(),
                AllocatedTaskResources {
                    cpu_mhz: 50,
                    memory_mb: 32,
                    ..Default::default()
                },
            )]
            .into(),
            shared: Some(AllocatedSharedResources {
                disk_mb: 300,
                ..Default::default()
            }),
        });
        let out = node_page(&node(), &[a], NOW);
        assert!(
            out.starts_with(
                "ID            = f7476465-0000-0000-0000-000000000000\n\
             Name          = dev\n\
             Node Pool     = default\n\
             Class         = <none>\n\
             DC            = dc1\n\
             Drain         = false\n\
             Eligibility   = eligible\n\
             Status        = ready\n\
             Address       = 127.0.0.1:4660\n\
             Driver Status = mock,raw_exec\n\
             \n\
             Allocated Resources\n\
             CPU          Memory          Disk\n\
             50/3900 MHz  32 MiB/8.0 GiB  300 MiB/10 GiB\n\
             \n\
             Allocations\n"
            ),
            "{out}"
        );
    }

    #[test]
    fn drains_name_their_deadline() {
        let mut n = node();
        n.drain_strategy = Some(DrainStrategy {
            deadline_ns: 3600 * S,
            force_deadline_unix_ns: NOW,
            ignore_system_jobs: true,
            ..Default::default()
        });
        assert_eq!(
            drain_text(&n),
            "true; 2023-11-14T22:13:20Z deadline; ignoring system jobs"
        );
        n.drain_strategy = Some(DrainStrategy {
            deadline_ns: -1,
            ..Default::default()
        });
        assert_eq!(drain_text(&n), "true; force drain");
    }
}
