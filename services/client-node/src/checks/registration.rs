//! What an allocation registers of one `service` block: the instance's ID
//! (the same ID Nomad gives it), its advertised address and port, and its
//! tags (the canary tags while the allocation is a canary), plus the first
//! result of each of its checks.

use caravan_proto::{
    AllocatedPort, Allocation, CheckResult, Node, Service, ServiceCheck, ServiceRegistration,
};

use super::address::{self, Reach};
use super::status::Status;

/// The prefix of every ID of an allocation's service instance.
const TASK_PREFIX: &str = "_nomad-task-";

/// Whose service a registration is: the group's or one task's.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Workload {
    /// A `service` block of the group (registered once a main task runs).
    Group(String),
    /// A `service` block of this task.
    Task(String),
}

impl Workload {
    /// The name in the instance's ID: the task's, or `group-<group>`.
    pub fn id_name(&self) -> String {
        match self {
            Workload::Group(g) => format!("group-{g}"),
            Workload::Task(t) => t.clone(),
        }
    }

    /// The task, for a task's services.
    pub fn task(&self) -> Option<&str> {
        match self {
            Workload::Group(_) => None,
            Workload::Task(t) => Some(t),
        }
    }
}

/// `_nomad-task-<alloc>-<task or group-<group>>-<service>-<port label>`.
pub fn service_id(alloc_id: &str, workload: &Workload, name: &str, port_label: &str) -> String {
    format!(
        "{TASK_PREFIX}{alloc_id}-{}-{name}-{port_label}",
        workload.id_name()
    )
}

/// What a registration is built from besides the service block.
#[derive(Clone, Copy, Debug)]
pub struct Placement<'a> {
    /// The allocation.
    pub alloc: &'a Allocation,
    /// Its node.
    pub node: &'a Node,
    /// Its ports (the group's and every task's).
    pub ports: &'a [AllocatedPort],
}

impl<'a> Placement<'a> {
    /// The node's address: its first network's, else loopback.
    pub fn node_ip(&self) -> &'a str {
        self.node
            .resources
            .as_ref()
            .and_then(|r| r.networks.first())
            .map_or("127.0.0.1", |n| n.ip.as_str())
    }

    /// What addresses resolve against, with the address of the task's own
    /// network when its driver gives it one.
    pub fn reach(&self, driver_ip: Option<&'a str>) -> Reach<'a> {
        Reach {
            ports: self.ports,
            node_ip: self.node_ip(),
            driver_ip,
        }
    }

    /// Whether the allocation is a canary of its deployment.
    pub fn canary(&self) -> bool {
        self.alloc
            .deployment_status
            .as_ref()
            .is_some_and(|d| d.canary)
    }
}

/// Every port an allocation holds: the group's, then each task's.
pub fn alloc_ports(alloc: &Allocation) -> Vec<AllocatedPort> {
    let Some(res) = alloc.allocated_resources.as_ref() else {
        return Vec::new();
    };
    let shared = res.shared.iter().flat_map(|s| s.ports.iter());
    shared
        .chain(res.tasks.values().flat_map(|t| t.ports.iter()))
        .cloned()
        .collect()
}

/// The registration of `service` (its name already interpolated as `name`)
/// for `workload`, with its checks in their initial status; `driver_ip` is
/// the address of the task's own network, if any; `Err` says why it has no
/// address.
pub fn build(
    service: &Service,
    name: &str,
    workload: &Workload,
    group: &str,
    at: Placement<'_>,
    driver_ip: Option<&str>,
) -> Result<ServiceRegistration, String> {
    let mode = if service.address_mode.is_empty() {
        "auto"
    } else {
        &service.address_mode
    };
    let (address, port) = address::resolve(
        &service.address,
        mode,
        &service.port_label,
        at.reach(driver_ip),
    )
    .map_err(|e| format!("unable to get address for service {name:?}: {e}"))?;
    let tags = if at.canary() && !service.canary_tags.is_empty() {
        service.canary_tags.clone()
    } else {
        service.tags.clone()
    };
    Ok(ServiceRegistration {
        id: service_id(&at.alloc.id, workload, name, &service.port_label),
        service_name: name.to_owned(),
        namespace: at.alloc.namespace.clone(),
        node_id: at.node.id.clone(),
        datacenter: at.node.datacenter.clone(),
        job_id: at.alloc.job_id.clone(),
        alloc_id: at.alloc.id.clone(),
        tags,
        address,
        port: i32::from(port),
        checks: service
            .checks
            .iter()
            .map(|c| {
                let status = super::Tracker::new(c).status();
                initial_result(c, status, on_update(c, service), name, group, workload)
            })
            .collect(),
        ..Default::default()
    })
}

/// The check's `on_update`, inherited from its service when it sets none.
pub fn on_update<'a>(check: &'a ServiceCheck, service: &'a Service) -> &'a str {
    if check.on_update.is_empty() {
        &service.on_update
    } else {
        &check.on_update
    }
}

/// A check's mode as Nomad reports it: `readiness` when its result does not
/// count for the allocation's health (`on_update = "ignore"`).
pub fn mode(on_update: &str) -> &'static str {
    if on_update == "ignore" {
        "readiness"
    } else {
        "healthiness"
    }
}

fn initial_result(
    check: &ServiceCheck,
    status: Status,
    on_update: &str,
    service: &str,
    group: &str,
    workload: &Workload,
) -> CheckResult {
    CheckResult {
        check_name: check.name.clone(),
        status: status.as_str().to_owned(),
        mode: mode(on_update).to_owned(),
        output: String::new(),
        status_code: 0,
        timestamp: 0,
        group: group.to_owned(),
        task: workload.task().unwrap_or(&check.task_name).to_owned(),
        service: service.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use caravan_proto::{
        AllocDeploymentStatus, AllocatedResources, AllocatedSharedResources,
        AllocatedTaskResources, NodeNetwork, NodeResources,
    };

    use super::*;

    fn alloc(canary: bool) -> Allocation {
        let mut res = AllocatedResources {
            shared: Some(AllocatedSharedResources {
                ports: vec![AllocatedPort {
                    label: "http".into(),
                    value: 25001,
                    to: 8080,
                    host_ip: String::new(),
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        res.tasks.insert(
            "web".into(),
            AllocatedTaskResources {
                ports: vec![AllocatedPort {
                    label: "admin".into(),
                    value: 25002,
                    to: 0,
                    host_ip: "10.0.0.9".into(),
                }],
                ..Default::default()
            },
        );
        Allocation {
            id: "b4e61df9-b095-d64e-f241-23860da1375f".into(),
            namespace: "prod".into(),
            job_id: "shop".into(),
            task_group: "api".into(),
            allocated_resources: Some(res),
            deployment_status: canary.then(|| AllocDeploymentStatus {
                canary: true,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn node() -> Node {
        Node {
            id: "n1".into(),
            datacenter: "dc1".into(),
            resources: Some(NodeResources {
                networks: vec![NodeNetwork {
                    ip: "10.0.0.1".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn service() -> Service {
        Service {
            name: "shop-api".into(),
            port_label: "http".into(),
            tags: vec!["v1".into()],
            canary_tags: vec!["canary".into()],
            checks: vec![
                ServiceCheck {
                    name: "alive".into(),
                    r#type: "tcp".into(),
                    ..Default::default()
                },
                ServiceCheck {
                    name: "ready".into(),
                    r#type: "http".into(),
                    initial_status: "passing".into(),
                    on_update: "ignore".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn ids_are_nomads_for_group_and_task_services() {
        let a = "b4e61df9-b095-d64e-f241-23860da1375f";
        assert_eq!(
            service_id(a, &Workload::Task("redis".into()), "redis-http", "http"),
            "_nomad-task-b4e61df9-b095-d64e-f241-23860da1375f-redis-redis-http-http"
        );
        assert_eq!(
            service_id(a, &Workload::Group("cache".into()), "db", ""),
            "_nomad-task-b4e61df9-b095-d64e-f241-23860da1375f-group-cache-db-"
        );
    }

    #[test]
    fn a_registration_carries_the_alloc_node_address_tags_and_checks() {
        let (a, n) = (alloc(false), node());
        let ports = alloc_ports(&a);
        let at = Placement {
            alloc: &a,
            node: &n,
            ports: &ports,
        };
        let w = Workload::Task("web".into());
        let r = build(&service(), "shop-api", &w, "api", at, None).unwrap();
        assert_eq!(
            r.id,
            "_nomad-task-b4e61df9-b095-d64e-f241-23860da1375f-web-shop-api-http"
        );
        assert_eq!(
            (r.namespace.as_str(), r.job_id.as_str(), r.node_id.as_str()),
            ("prod", "shop", "n1")
        );
        assert_eq!(r.datacenter, "dc1");
        assert_eq!((r.address.as_str(), r.port), ("10.0.0.1", 25001));
        assert_eq!(r.tags, vec!["v1"]);
        let checks: Vec<_> = r
            .checks
            .iter()
            .map(|c| (c.check_name.as_str(), c.status.as_str(), c.mode.as_str()))
            .collect();
        assert_eq!(
            checks,
            vec![
                ("alive", "pending", "healthiness"),
                ("ready", "passing", "readiness")
            ]
        );
        assert_eq!(r.checks[0].task, "web");

        // A task port on its own host address.
        let mut admin = service();
        admin.port_label = "admin".into();
        let r = build(&admin, "admin", &w, "api", at, None).unwrap();
        assert_eq!((r.address.as_str(), r.port), ("10.0.0.9", 25002));
    }

    #[test]
    fn driver_mode_advertises_the_tasks_own_address_and_port() {
        let (a, n) = (alloc(false), node());
        let ports = alloc_ports(&a);
        let at = Placement {
            alloc: &a,
            node: &n,
            ports: &ports,
        };
        let mut s = service();
        s.address_mode = "driver".into();
        let w = Workload::Task("web".into());
        let r = build(&s, "shop-api", &w, "api", at, Some("172.17.0.2")).unwrap();
        assert_eq!((r.address.as_str(), r.port), ("172.17.0.2", 8080));
        let err = build(&s, "shop-api", &w, "api", at, None).unwrap_err();
        assert!(err.contains("no driver network"), "{err}");
    }

    #[test]
    fn a_canary_uses_its_canary_tags_when_it_has_some() {
        let (a, n) = (alloc(true), node());
        let ports = alloc_ports(&a);
        let at = Placement {
            alloc: &a,
            node: &n,
            ports: &ports,
        };
        let w = Workload::Group("api".into());
        let r = build(&service(), "shop-api", &w, "api", at, None).unwrap();
        assert_eq!(r.tags, vec!["canary"]);
        let mut plain = service();
        plain.canary_tags.clear();
        let r = build(&plain, "shop-api", &w, "api", at, None).unwrap();
        assert_eq!(r.tags, vec!["v1"]);
    }

    #[test]
    fn an_unknown_port_names_the_service() {
        let (a, n) = (alloc(false), node());
        let ports = alloc_ports(&a);
        let at = Placement {
            alloc: &a,
            node: &n,
            ports: &ports,
        };
        let mut s = service();
        s.port_label = "grpc".into();
        let err = build(
            &s,
            "shop-api",
            &Workload::Task("web".into()),
            "api",
            at,
            None,
        )
        .unwrap_err();
        assert!(
            err.contains("service \"shop-api\"") && err.contains("\"grpc\""),
            "{err}"
        );
    }
}
