//! Caravan's objects in Nomad's JSON: field names and status strings as
//! Nomad's HTTP API returns them, list endpoints in Nomad's stub shapes.
//! Revisions render as indexes; durations as nanoseconds; timestamps as
//! Unix nanoseconds or RFC 3339 strings where Nomad uses `time.Time`.

use std::collections::BTreeMap;

use caravan_model::{AllocExt, JobExt, NomadName};
use caravan_proto::{
    AllocMetric, AllocatedPort, Allocation, Deployment, Evaluation, Job, NetworkResource, Node,
    TaskGroupSummary, TaskState,
};
use caravan_state::Snapshot;
use serde_json::{Value, json};

/// A revision as a Nomad index.
pub fn index(revision: i64) -> u64 {
    u64::try_from(revision).unwrap_or(0)
}

/// Unix nanoseconds as Go's `time.Time` renders in JSON (RFC 3339, UTC);
/// 0 is Go's zero time.
pub fn time(unix_ns: i64) -> String {
    if unix_ns == 0 {
        return "0001-01-01T00:00:00Z".into();
    }
    let secs = unix_ns.div_euclid(1_000_000_000);
    let nanos = unix_ns.rem_euclid(1_000_000_000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let frac = if nanos == 0 {
        String::new()
    } else {
        let s = format!(".{nanos:09}");
        s.trim_end_matches('0').to_string()
    };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}{frac}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Nomad's `AllocMetric`.
pub fn alloc_metric(m: &AllocMetric) -> Value {
    json!({
        "NodesEvaluated": m.nodes_evaluated,
        "NodesFiltered": m.nodes_filtered,
        "NodesInPool": m.nodes_in_pool.values().sum::<u32>(),
        "NodesAvailable": m.nodes_available,
        "ClassFiltered": m.class_filtered,
        "ConstraintFiltered": m.constraint_filtered,
        "NodesExhausted": m.nodes_exhausted,
        "ClassExhausted": m.class_exhausted,
        "DimensionExhausted": m.dimension_exhausted,
        "QuotaExhausted": m.quota_exhausted.keys().collect::<Vec<_>>(),
        "ResourcesExhausted": Value::Null,
        "ScoreMetaData": m.score_meta.iter().map(|s| json!({
            "NodeID": s.node_id,
            "Scores": s.scores,
            "NormScore": s.norm_score,
        })).collect::<Vec<_>>(),
        "AllocationTime": m.allocation_time_ns,
        "CoalescedFailures": m.coalesced_failures,
    })
}

fn metrics_map(m: &BTreeMap<String, AllocMetric>) -> Value {
    if m.is_empty() {
        return Value::Null;
    }
    Value::Object(
        m.iter()
            .map(|(k, v)| (k.clone(), alloc_metric(v)))
            .collect(),
    )
}

/// Nomad's `Evaluation`.
pub fn evaluation(e: &Evaluation) -> Value {
    json!({
        "ID": e.id,
        "Namespace": e.namespace,
        "Priority": e.priority,
        "Type": e.r#type,
        "TriggeredBy": e.triggered_by,
        "JobID": e.job_id,
        "JobModifyIndex": index(e.job_modify_revision),
        "NodeID": e.node_id,
        "NodeModifyIndex": index(e.node_modify_revision),
        "DeploymentID": e.deployment_id,
        "Status": e.status().api_name(),
        "StatusDescription": e.status_description,
        "Wait": 0,
        "WaitUntil": time(e.wait_until_unix_ns),
        "NextEval": e.next_eval,
        "PreviousEval": e.previous_eval,
        "BlockedEval": e.blocked_eval,
        "RelatedEvals": Value::Null,
        "FailedTGAllocs": metrics_map(&e.failed_tg_allocs),
        "ClassEligibility": e.class_eligibility,
        "EscapedComputedClass": e.escaped_computed_class,
        "QuotaLimitReached": e.quota_limit_reached,
        "AnnotatePlan": e.annotate_plan,
        "QueuedAllocations": e.queued_allocations,
        "SnapshotIndex": index(e.snapshot_revision),
        "CreateIndex": index(e.create_revision),
        "ModifyIndex": index(e.modify_revision),
        "CreateTime": e.create_time_unix_ns,
        "ModifyTime": e.modify_time_unix_ns,
    })
}

fn task_state(t: &TaskState) -> Value {
    json!({
        "State": t.state,
        "Failed": t.failed,
        "Restarts": t.restarts,
        "LastRestart": time(t.last_restart_unix_ns),
        "StartedAt": time(t.started_at_unix_ns),
        "FinishedAt": time(t.finished_at_unix_ns),
        "Events": t.events.iter().map(|e| json!({
            "Type": e.r#type,
            "Time": e.time_unix_ns,
            "Message": e.message,
            "DisplayMessage": e.message,
            "Details": {},
            "ExitCode": e.exit_code,
            "Signal": e.signal,
            "DriverError": e.driver_error,
            "StartDelay": e.restart_delay_ns,
            "FailsTask": e.fails_task,
        })).collect::<Vec<_>>(),
    })
}

fn task_states(a: &Allocation) -> Value {
    if a.task_states.is_empty() {
        return Value::Null;
    }
    Value::Object(
        a.task_states
            .iter()
            .map(|(k, v)| (k.clone(), task_state(v)))
            .collect(),
    )
}

fn deployment_health(a: &Allocation) -> Value {
    match &a.deployment_status {
        None => Value::Null,
        Some(d) => json!({
            "Healthy": d.healthy,
            "Timestamp": time(d.timestamp_unix_ns),
            "Canary": d.canary,
            "ModifyIndex": index(a.client_modify_revision),
        }),
    }
}

fn reschedule_tracker(a: &Allocation) -> Value {
    match &a.reschedule_tracker {
        None => Value::Null,
        Some(t) => json!({
            "Events": t.events.iter().map(|e| json!({
                "RescheduleTime": e.reschedule_time_unix_ns,
                "PrevAllocID": e.prev_alloc_id,
                "PrevNodeID": e.prev_node_id,
                "Delay": e.delay_ns,
            })).collect::<Vec<_>>(),
        }),
    }
}

fn ports(ports: &[AllocatedPort]) -> Vec<Value> {
    ports
        .iter()
        .map(|p| json!({"Label": p.label, "Value": p.value, "To": p.to, "HostIP": p.host_ip}))
        .collect()
}

fn networks(networks: &[NetworkResource]) -> Vec<Value> {
    let port = |p: &caravan_proto::Port| json!({"Label": p.label, "Value": p.value, "To": p.to, "HostNetwork": p.host_network});
    networks
        .iter()
        .map(|n| {
            json!({
                "Mode": n.mode,
                "MBits": n.mbits,
                "ReservedPorts": n.reserved_ports.iter().map(port).collect::<Vec<_>>(),
                "DynamicPorts": n.dynamic_ports.iter().map(port).collect::<Vec<_>>(),
            })
        })
        .collect()
}

fn allocated_resources(a: &Allocation) -> Value {
    let Some(r) = &a.allocated_resources else {
        return Value::Null;
    };
    let tasks: serde_json::Map<String, Value> = r
        .tasks
        .iter()
        .map(|(name, t)| {
            (
                name.clone(),
                json!({
                    "Cpu": {"CpuShares": t.cpu_mhz, "ReservedCores": t.reserved_cores},
                    "Memory": {"MemoryMB": t.memory_mb, "MemoryMaxMB": t.memory_max_mb},
                    "Networks": ports(&t.ports),
                    "Devices": t.devices.iter().map(|d| json!({
                        "Name": d.name, "DeviceIDs": d.device_ids,
                    })).collect::<Vec<_>>(),
                }),
            )
        })
        .collect();
    let shared = r.shared.clone().unwrap_or_default();
    json!({
        "Tasks": tasks,
        "Shared": {
            "DiskMB": shared.disk_mb,
            "Ports": ports(&shared.ports),
            "Networks": networks(&shared.networks),
        },
    })
}

fn desired_transition(a: &Allocation) -> Value {
    let t = a.desired_transition.unwrap_or_default();
    json!({
        "Migrate": t.migrate,
        "Reschedule": t.reschedule,
        "ForceReschedule": t.force_reschedule,
    })
}

fn alloc_job_type(snap: &Snapshot, a: &Allocation) -> String {
    snap.job(&a.namespace, &a.job_id)
        .map(|j| j.r#type().nomad_name().to_string())
        .unwrap_or_default()
}

/// Nomad's `AllocationListStub`.
pub fn alloc_stub(snap: &Snapshot, a: &Allocation) -> Value {
    json!({
        "ID": a.id,
        "EvalID": a.eval_id,
        "Name": a.name,
        "Namespace": a.namespace,
        "NodeID": a.node_id,
        "NodeName": a.node_name,
        "JobID": a.job_id,
        "JobType": alloc_job_type(snap, a),
        "JobVersion": a.job_version,
        "TaskGroup": a.task_group,
        "AllocatedResources": allocated_resources(a),
        "DesiredStatus": a.desired_status().api_name(),
        "DesiredDescription": a.desired_description,
        "DesiredTransition": desired_transition(a),
        "ClientStatus": a.client_status().api_name(),
        "ClientDescription": a.client_description,
        "TaskStates": task_states(a),
        "DeploymentStatus": deployment_health(a),
        "FollowupEvalID": a.followup_eval_id,
        "RescheduleTracker": reschedule_tracker(a),
        "PreemptedAllocations": a.preempted_allocations,
        "PreemptedByAllocation": a.preempted_by_allocation,
        "CreateIndex": index(a.create_revision),
        "ModifyIndex": index(a.modify_index()),
        "CreateTime": a.create_time_unix_ns,
        "ModifyTime": a.modify_time_unix_ns,
    })
}

/// Nomad's `Allocation`, with the job version it runs.
pub fn allocation(snap: &Snapshot, a: &Allocation) -> Value {
    let job = snap
        .job_version(&a.namespace, &a.job_id, a.job_version)
        .or_else(|| snap.job(&a.namespace, &a.job_id))
        .map_or(Value::Null, |j| caravan_jobspec::render_json(j));
    json!({
        "ID": a.id,
        "Namespace": a.namespace,
        "EvalID": a.eval_id,
        "Name": a.name,
        "NodeID": a.node_id,
        "NodeName": a.node_name,
        "JobID": a.job_id,
        "Job": job,
        "TaskGroup": a.task_group,
        "AllocatedResources": allocated_resources(a),
        "Metrics": a.metrics.as_deref().map_or(Value::Null, alloc_metric),
        "DesiredStatus": a.desired_status().api_name(),
        "DesiredDescription": a.desired_description,
        "DesiredTransition": desired_transition(a),
        "ClientStatus": a.client_status().api_name(),
        "ClientDescription": a.client_description,
        "TaskStates": task_states(a),
        "DeploymentID": a.deployment_id,
        "DeploymentStatus": deployment_health(a),
        "FollowupEvalID": a.followup_eval_id,
        "PreviousAllocation": a.previous_allocation,
        "NextAllocation": a.next_allocation,
        "RescheduleTracker": reschedule_tracker(a),
        "PreemptedAllocations": a.preempted_allocations,
        "PreemptedByAllocation": a.preempted_by_allocation,
        "CreateIndex": index(a.create_revision),
        "ModifyIndex": index(a.modify_index()),
        "AllocModifyIndex": index(a.alloc_modify_revision),
        "CreateTime": a.create_time_unix_ns,
        "ModifyTime": a.modify_time_unix_ns,
    })
}

fn drivers(n: &Node) -> Value {
    Value::Object(
        n.drivers
            .iter()
            .map(|(k, d)| {
                (
                    k.clone(),
                    json!({
                        "Attributes": d.attributes,
                        "Detected": d.detected,
                        "Healthy": d.healthy,
                        "HealthDescription": d.health_description,
                        "UpdateTime": time(n.status_updated_at_unix_ns),
                    }),
                )
            })
            .collect(),
    )
}

fn node_resources(n: &Node) -> Value {
    let r = n.resources.clone().unwrap_or_default();
    json!({
        "Cpu": {
            "CpuShares": r.cpu_mhz,
            "TotalCpuCores": r.core_ids.len(),
            "ReservableCpuCores": r.core_ids,
        },
        "Memory": {"MemoryMB": r.memory_mb},
        "Disk": {"DiskMB": r.disk_mb},
        "Networks": r.networks.iter().map(|net| json!({
            "Mode": net.mode, "Device": net.device, "IP": net.ip, "CIDR": net.cidr, "MBits": net.mbits,
        })).collect::<Vec<_>>(),
        "Devices": r.devices.iter().map(|d| {
            let mut parts = d.name.splitn(3, '/');
            let (vendor, kind, name) = (parts.next(), parts.next(), parts.next());
            json!({
                "Vendor": vendor.unwrap_or_default(),
                "Type": kind.unwrap_or_default(),
                "Name": name.unwrap_or_default(),
                "Instances": d.instance_ids.iter().map(|id| json!({"ID": id, "Healthy": true})).collect::<Vec<_>>(),
                "Attributes": d.attributes,
            })
        }).collect::<Vec<_>>(),
        "MinDynamicPort": if r.min_dynamic_port == 0 { 20000 } else { r.min_dynamic_port },
        "MaxDynamicPort": if r.max_dynamic_port == 0 { 32000 } else { r.max_dynamic_port },
    })
}

fn reserved_resources(n: &Node) -> Value {
    let r = n.reserved.clone().unwrap_or_default();
    json!({
        "Cpu": {"CpuShares": r.cpu_mhz, "ReservedCpuCores": r.core_ids},
        "Memory": {"MemoryMB": r.memory_mb},
        "Disk": {"DiskMB": r.disk_mb},
        "Networks": {"ReservedHostPorts": r.reserved_host_ports},
    })
}

fn last_drain(n: &Node) -> Value {
    n.last_drain.as_ref().map_or(Value::Null, |d| {
        json!({
            "StartedAt": time(d.started_at_unix_ns),
            "UpdatedAt": time(d.updated_at_unix_ns),
            "Status": d.status,
            "AccessorID": "",
            "Meta": Value::Null,
        })
    })
}

fn drain_strategy(n: &Node) -> Value {
    n.drain_strategy.as_ref().map_or(Value::Null, |d| {
        json!({
            "DrainSpec": {"Deadline": d.deadline_ns, "IgnoreSystemJobs": d.ignore_system_jobs},
            "ForceDeadline": time(d.force_deadline_unix_ns),
            "StartedAt": time(d.started_at_unix_ns),
        })
    })
}

fn node_address(n: &Node) -> String {
    n.attributes
        .get("unique.network.ip-address")
        .cloned()
        .unwrap_or_else(|| {
            n.http_addr
                .rsplit_once(':')
                .map_or(n.http_addr.clone(), |(host, _)| host.to_string())
        })
}

/// The optional parts of a node stub (Nomad's `NodeStubFields`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeStubFields {
    /// `?resources=true`: `NodeResources` and `ReservedResources`.
    pub resources: bool,
    /// `?os=true`: `Attributes` holding `os.name`.
    pub os: bool,
}

/// Nomad's `NodeListStub`.
pub fn node_stub(n: &Node, fields: NodeStubFields) -> Value {
    let mut stub = json!({
        "Address": node_address(n),
        "ID": n.id,
        "Datacenter": n.datacenter,
        "Name": n.name,
        "NodeClass": n.node_class,
        "NodePool": n.node_pool,
        "Version": n.attributes.get("nomad.version").cloned().unwrap_or_default(),
        "Drain": n.drain_strategy.is_some(),
        "SchedulingEligibility": n.scheduling_eligibility().api_name(),
        "Status": n.status().api_name(),
        "StatusDescription": n.status_description,
        "Drivers": drivers(n),
        "LastDrain": last_drain(n),
        "CreateIndex": index(n.create_revision),
        "ModifyIndex": index(n.modify_revision),
    });
    if let Value::Object(map) = &mut stub {
        if fields.resources {
            map.insert("NodeResources".into(), node_resources(n));
            map.insert("ReservedResources".into(), reserved_resources(n));
        }
        if fields.os {
            // Nomad copies just this key, empty when the node has none.
            let os_name = n.attributes.get("os.name").cloned().unwrap_or_default();
            map.insert("Attributes".into(), json!({ "os.name": os_name }));
        }
    }
    stub
}

/// Nomad's `Node.HostVolumes`: the client's host volumes by name (null when none).
fn host_volumes(n: &Node) -> Value {
    if n.host_volumes.is_empty() {
        return Value::Null;
    }
    n.host_volumes
        .iter()
        .map(|(name, v)| {
            (
                name.clone(),
                json!({"Name": v.name, "Path": v.path, "ReadOnly": v.read_only, "ID": ""}),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// Nomad's `Node.HostNetworks`: the client's named host networks (null when
/// none); `Address` is Caravan's addition, the node's address on the network.
fn host_networks(n: &Node) -> Value {
    if n.host_networks.is_empty() {
        return Value::Null;
    }
    n.host_networks
        .iter()
        .map(|h| {
            (
                h.name.clone(),
                json!({
                    "Name": h.name,
                    "CIDR": h.cidr,
                    "Interface": h.interface,
                    "ReservedPorts": h.reserved_ports,
                    "Address": h.address,
                }),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// Nomad's `Node`.
pub fn node(n: &Node) -> Value {
    json!({
        "ID": n.id,
        "Datacenter": n.datacenter,
        "Name": n.name,
        "HTTPAddr": n.http_addr,
        "TLSEnabled": false,
        "Attributes": n.attributes,
        "NodeResources": node_resources(n),
        "ReservedResources": reserved_resources(n),
        "Meta": n.meta,
        "NodeClass": n.node_class,
        "NodePool": n.node_pool,
        "ComputedClass": n.computed_class,
        "DrainStrategy": drain_strategy(n),
        // Older Nomad clients read this flag rather than the strategy.
        "Drain": n.drain_strategy.is_some(),
        "SchedulingEligibility": n.scheduling_eligibility().api_name(),
        "Status": n.status().api_name(),
        "StatusDescription": n.status_description,
        "StatusUpdatedAt": n.status_updated_at_unix_ns / 1_000_000_000,
        "Events": Value::Null,
        "Drivers": drivers(n),
        "HostVolumes": host_volumes(n),
        "HostNetworks": host_networks(n),
        "LastDrain": last_drain(n),
        "CreateIndex": index(n.create_revision),
        "ModifyIndex": index(n.modify_revision),
    })
}

/// Nomad's `Deployment`.
pub fn deployment(d: &Deployment) -> Value {
    let groups: serde_json::Map<String, Value> = d
        .task_groups
        .iter()
        .map(|(name, s)| {
            (
                name.clone(),
                json!({
                    "AutoRevert": s.auto_revert,
                    "AutoPromote": s.auto_promote,
                    "ProgressDeadline": s.progress_deadline_ns,
                    "RequireProgressBy": time(s.require_progress_by_unix_ns),
                    "Promoted": s.promoted,
                    "PlacedCanaries": s.placed_canaries,
                    "DesiredCanaries": s.desired_canaries,
                    "DesiredTotal": s.desired_total,
                    "PlacedAllocs": s.placed_allocs,
                    "HealthyAllocs": s.healthy_allocs,
                    "UnhealthyAllocs": s.unhealthy_allocs,
                }),
            )
        })
        .collect();
    json!({
        "ID": d.id,
        "Namespace": d.namespace,
        "JobID": d.job_id,
        "JobVersion": d.job_version,
        "JobModifyIndex": index(d.job_modify_revision),
        "JobSpecModifyIndex": index(d.job_spec_modify_revision),
        "JobCreateIndex": index(d.job_create_revision),
        "IsMultiregion": false,
        "TaskGroups": groups,
        "Status": d.status().api_name(),
        "StatusDescription": d.status_description,
        "EvalPriority": d.eval_priority,
        "CreateIndex": index(d.create_revision),
        "ModifyIndex": index(d.modify_revision),
        "CreateTime": d.create_time_unix_ns,
        "ModifyTime": d.modify_time_unix_ns,
    })
}

/// Nomad's `TaskGroupSummary` map.
pub fn group_summaries(groups: &BTreeMap<String, TaskGroupSummary>) -> Value {
    Value::Object(
        groups
            .iter()
            .map(|(k, s)| {
                (
                    k.clone(),
                    json!({
                        "Queued": s.queued,
                        "Complete": s.complete,
                        "Failed": s.failed,
                        "Running": s.running,
                        "Starting": s.starting,
                        "Lost": s.lost,
                        "Unknown": s.unknown,
                    }),
                )
            })
            .collect(),
    )
}

/// Nomad's `JobSummary`.
pub fn job_summary(job: &Job, groups: &BTreeMap<String, TaskGroupSummary>) -> Value {
    json!({
        "JobID": job.id,
        "Namespace": job.namespace,
        "Summary": group_summaries(groups),
        "Children": {"Pending": 0, "Running": 0, "Dead": 0},
        "CreateIndex": index(job.create_revision),
        "ModifyIndex": index(job.modify_revision),
    })
}

/// Nomad's `JobListStub` (the job's status already derived).
pub fn job_stub(snap: &Snapshot, job: &Job) -> Value {
    let groups = caravan_gateway_core::jobs::reads::summarize(snap, job);
    json!({
        "ID": job.id,
        "ParentID": job.parent_id,
        "Name": job.name,
        "Namespace": job.namespace,
        "Datacenters": job.datacenters,
        "NodePool": job.node_pool,
        "Multiregion": Value::Null,
        "Type": job.r#type().nomad_name(),
        "Priority": job.priority,
        "Periodic": job.is_periodic(),
        "ParameterizedJob": job.parameterized.is_some(),
        "Stop": job.stop,
        "Status": job.status().api_name(),
        "StatusDescription": job.status_description,
        "JobSummary": job_summary(job, &groups),
        "CreateIndex": index(job.create_revision),
        "ModifyIndex": index(job.modify_revision),
        "JobModifyIndex": index(job.job_modify_revision),
        "SubmitTime": job.submit_time_unix_ns,
        "Meta": job.meta,
        "IsTemplate": job.is_template(),
    })
}

#[cfg(test)]
mod tests {
    use caravan_proto::{
        AllocClientStatus, AllocDesiredStatus, DeploymentStatus, EvalStatus, NodeStatus,
    };

    use super::*;

    #[test]
    fn times_render_as_go_does() {
        assert_eq!(time(0), "0001-01-01T00:00:00Z");
        assert_eq!(time(1_700_000_000_000_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(time(1_700_000_000_500_000_000), "2023-11-14T22:13:20.5Z");
        assert_eq!(time(951_782_400_000_000_000), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn stubs_use_nomads_names() {
        let mut a = Allocation {
            id: "a1".into(),
            job_id: "web".into(),
            create_revision: 4,
            modify_revision: 9,
            ..Default::default()
        };
        a.set_client_status(AllocClientStatus::Running);
        a.set_desired_status(AllocDesiredStatus::Run);
        let snap = Snapshot::new(caravan_state::Tables::new());
        let v = alloc_stub(&snap, &a);
        assert_eq!(v["ID"], "a1");
        assert_eq!(v["ClientStatus"], "running");
        assert_eq!(v["DesiredStatus"], "run");
        assert_eq!(v["CreateIndex"], 4);
        assert_eq!(v["ModifyIndex"], 9);
        let mut e = Evaluation::default();
        e.set_status(EvalStatus::Blocked);
        assert_eq!(evaluation(&e)["Status"], "blocked");
        let mut n = Node::default();
        n.set_status(NodeStatus::Ready);
        let v = node_stub(&n, NodeStubFields::default());
        assert!(v.get("Attributes").is_none() && v.get("NodeResources").is_none());
        assert_eq!(v["Status"], "ready");
        assert_eq!(v["SchedulingEligibility"], "eligible");
        assert!(v.get("NodeResources").is_none());
        let both = NodeStubFields {
            resources: true,
            os: true,
        };
        assert!(node_stub(&n, both).get("NodeResources").is_some());
        assert_eq!(node_stub(&n, both)["Attributes"], json!({"os.name": ""}));
        assert_eq!(node(&n)["HostVolumes"], Value::Null);
        n.host_volumes.insert(
            "data".into(),
            caravan_proto::ClientHostVolume {
                name: "data".into(),
                path: "/srv/data".into(),
                read_only: true,
            },
        );
        assert_eq!(
            node(&n)["HostVolumes"],
            json!({"data": {"Name": "data", "Path": "/srv/data", "ReadOnly": true, "ID": ""}})
        );
        assert_eq!(node(&n)["HostNetworks"], Value::Null);
        n.host_networks.push(caravan_proto::NodeHostNetwork {
            name: "lo".into(),
            address: "127.0.0.1".into(),
            interface: "lo".into(),
            reserved_ports: "22".into(),
            cidr: "127.0.0.0/8".into(),
        });
        assert_eq!(
            node(&n)["HostNetworks"],
            json!({"lo": {"Name": "lo", "CIDR": "127.0.0.0/8", "Interface": "lo",
                "ReservedPorts": "22", "Address": "127.0.0.1"}})
        );
    }

    #[test]
    fn unset_statuses_read_as_a_new_objects() {
        let snap = Snapshot::new(caravan_state::Tables::new());
        assert_eq!(evaluation(&Evaluation::default())["Status"], "pending");
        let a = Allocation::default();
        for v in [alloc_stub(&snap, &a), allocation(&snap, &a)] {
            assert_eq!(v["DesiredStatus"], "run");
            assert_eq!(v["ClientStatus"], "pending");
        }
        let n = Node::default();
        for v in [node_stub(&n, NodeStubFields::default()), node(&n)] {
            assert_eq!(v["Status"], "initializing");
            assert_eq!(v["SchedulingEligibility"], "eligible");
        }
        assert_eq!(deployment(&Deployment::default())["Status"], "running");
        assert_eq!(job_stub(&snap, &Job::default())["Status"], "pending");
        let mut d = Deployment::default();
        d.set_status(DeploymentStatus::Cancelled);
        assert_eq!(deployment(&d)["Status"], "cancelled");
    }
}
