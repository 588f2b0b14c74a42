//! Nomad's JSON, as the gateway's HTTP API renders Caravan's objects, read
//! back into Caravan's messages: field names, status names, indexes,
//! Go times and nanosecond durations. Reading is lenient (a field left out
//! reads as its zero), since the verbs only display what they read;
//! a body of the wrong shape altogether is an error.

use std::collections::BTreeMap;

use super::json::J;
use caravan_proto::{
    AclPolicy, AclToken, AllocDeploymentStatus, AllocFileInfo, AllocMetric, AllocatedDevice,
    AllocatedPort, AllocatedResources, AllocatedSharedResources, AllocatedTaskResources,
    Allocation, Deployment, DeploymentState, DesiredTransition, DesiredUpdates, DrainMetadata,
    DrainStrategy, DriverInfo, Evaluation, Job, NetworkResource, Node, NodeDevice, NodeNetwork,
    NodeReservedResources, NodeResources, NodeScoreMeta, ParameterizedJobConfig, PeriodicConfig,
    PlanAnnotations, PlanJobResponse, Port, RescheduleEvent, RescheduleTracker, TaskEvent,
    TaskGroupSummary, TaskState, VariableDecrypted, VariableMetadata,
};

/// Nomad's `Evaluation`.
pub fn evaluation(v: J<'_>) -> Evaluation {
    let mut e = Evaluation {
        id: v.s("ID"),
        namespace: v.s("Namespace"),
        priority: v.i32("Priority"),
        r#type: v.s("Type"),
        triggered_by: v.s("TriggeredBy"),
        job_id: v.s("JobID"),
        job_modify_revision: v.i("JobModifyIndex"),
        node_id: v.s("NodeID"),
        node_modify_revision: v.i("NodeModifyIndex"),
        deployment_id: v.s("DeploymentID"),
        status_description: v.s("StatusDescription"),
        wait_until_unix_ns: v.time("WaitUntil"),
        next_eval: v.s("NextEval"),
        previous_eval: v.s("PreviousEval"),
        blocked_eval: v.s("BlockedEval"),
        failed_tg_allocs: v
            .entries("FailedTGAllocs")
            .into_iter()
            .map(|(k, m)| (k, alloc_metric(m)))
            .collect(),
        class_eligibility: v
            .entries("ClassEligibility")
            .into_iter()
            .map(|(k, b)| (k, b.0.as_bool().unwrap_or(false)))
            .collect(),
        escaped_computed_class: v.b("EscapedComputedClass"),
        quota_limit_reached: v.s("QuotaLimitReached"),
        annotate_plan: v.b("AnnotatePlan"),
        queued_allocations: v
            .entries("QueuedAllocations")
            .into_iter()
            .map(|(k, n)| (k, n.0.as_i64().unwrap_or(0)))
            .collect(),
        snapshot_revision: v.i("SnapshotIndex"),
        create_time_unix_ns: v.i("CreateTime"),
        modify_time_unix_ns: v.i("ModifyTime"),
        create_revision: v.i("CreateIndex"),
        modify_revision: v.i("ModifyIndex"),
        ..Default::default()
    };
    e.set_status(v.named("Status"));
    e
}

/// Nomad's `AllocMetric`.
pub fn alloc_metric(v: J<'_>) -> AllocMetric {
    AllocMetric {
        nodes_evaluated: v.u32("NodesEvaluated"),
        nodes_filtered: v.u32("NodesFiltered"),
        nodes_available: v.count_map("NodesAvailable"),
        class_filtered: v.count_map("ClassFiltered"),
        constraint_filtered: v.count_map("ConstraintFiltered"),
        nodes_exhausted: v.u32("NodesExhausted"),
        class_exhausted: v.count_map("ClassExhausted"),
        dimension_exhausted: v.count_map("DimensionExhausted"),
        quota_exhausted: v
            .strings("QuotaExhausted")
            .into_iter()
            .map(|q| (q, 1))
            .collect(),
        score_meta: v
            .list("ScoreMetaData")
            .into_iter()
            .map(|s| NodeScoreMeta {
                node_id: s.s("NodeID"),
                scores: s
                    .entries("Scores")
                    .into_iter()
                    .map(|(k, f)| (k, f.0.as_f64().unwrap_or(0.0)))
                    .collect(),
                norm_score: s.f("NormScore"),
            })
            .collect(),
        allocation_time_ns: v.i("AllocationTime"),
        coalesced_failures: v.u32("CoalescedFailures"),
        nodes_in_pool: BTreeMap::new(),
    }
}

fn task_state(v: J<'_>) -> TaskState {
    TaskState {
        state: v.s("State"),
        failed: v.b("Failed"),
        restarts: v.u("Restarts"),
        last_restart_unix_ns: v.time("LastRestart"),
        started_at_unix_ns: v.time("StartedAt"),
        finished_at_unix_ns: v.time("FinishedAt"),
        events: v
            .list("Events")
            .into_iter()
            .map(|e| TaskEvent {
                r#type: e.s("Type"),
                time_unix_ns: e.i("Time"),
                message: {
                    let display = e.s("DisplayMessage");
                    if display.is_empty() {
                        e.s("Message")
                    } else {
                        display
                    }
                },
                exit_code: e.i32("ExitCode"),
                signal: e.i32("Signal"),
                driver_error: e.s("DriverError"),
                restart_delay_ns: e.i("StartDelay"),
                fails_task: e.b("FailsTask"),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn allocated_ports(v: J<'_>, key: &str) -> Vec<AllocatedPort> {
    v.list(key)
        .into_iter()
        .map(|p| AllocatedPort {
            label: p.s("Label"),
            value: p.u32("Value"),
            to: p.u32("To"),
            host_ip: p.s("HostIP"),
        })
        .collect()
}

fn allocated_resources(v: J<'_>) -> Option<AllocatedResources> {
    if !v.is_object() {
        return None;
    }
    let port = |p: J<'_>| Port {
        label: p.s("Label"),
        value: p.u32("Value"),
        to: p.u32("To"),
        host_network: p.s("HostNetwork"),
    };
    let shared = v.get("Shared");
    Some(AllocatedResources {
        tasks: v
            .entries("Tasks")
            .into_iter()
            .map(|(name, t)| {
                (
                    name,
                    AllocatedTaskResources {
                        cpu_mhz: t.get("Cpu").u32("CpuShares"),
                        reserved_cores: t
                            .get("Cpu")
                            .list("ReservedCores")
                            .into_iter()
                            .filter_map(|c| c.0.as_u64().and_then(|c| u32::try_from(c).ok()))
                            .collect(),
                        memory_mb: t.get("Memory").u32("MemoryMB"),
                        memory_max_mb: t.get("Memory").u32("MemoryMaxMB"),
                        ports: allocated_ports(t, "Networks"),
                        devices: t
                            .list("Devices")
                            .into_iter()
                            .map(|d| AllocatedDevice {
                                name: d.s("Name"),
                                device_ids: d.strings("DeviceIDs"),
                            })
                            .collect(),
                    },
                )
            })
            .collect(),
        shared: Some(AllocatedSharedResources {
            disk_mb: shared.u32("DiskMB"),
            ports: allocated_ports(shared, "Ports"),
            networks: shared
                .list("Networks")
                .into_iter()
                .map(|n| NetworkResource {
                    mode: n.s("Mode"),
                    mbits: n.u32("MBits"),
                    reserved_ports: n.list("ReservedPorts").into_iter().map(port).collect(),
                    dynamic_ports: n.list("DynamicPorts").into_iter().map(port).collect(),
                    hostname: n.s("Hostname"),
                    // Allocated networks carry no DNS settings to show.
                    dns: None,
                })
                .collect(),
        }),
    })
}

/// Nomad's `Allocation` or `AllocationListStub`.
pub fn allocation(v: J<'_>) -> Allocation {
    let deployment = v.get("DeploymentStatus");
    let transition = v.get("DesiredTransition");
    let tracker = v.get("RescheduleTracker");
    let metrics = v.get("Metrics");
    let mut a = Allocation {
        id: v.s("ID"),
        name: v.s("Name"),
        namespace: v.s("Namespace"),
        job_id: v.s("JobID"),
        job_version: v.u("JobVersion"),
        task_group: v.s("TaskGroup"),
        node_id: v.s("NodeID"),
        node_name: v.s("NodeName"),
        eval_id: v.s("EvalID"),
        deployment_id: v.s("DeploymentID"),
        deployment_status: deployment.is_object().then(|| AllocDeploymentStatus {
            healthy: deployment.ob("Healthy"),
            timestamp_unix_ns: deployment.time("Timestamp"),
            canary: deployment.b("Canary"),
        }),
        desired_description: v.s("DesiredDescription"),
        desired_transition: transition.is_object().then(|| DesiredTransition {
            migrate: transition.ob("Migrate"),
            reschedule: transition.ob("Reschedule"),
            force_reschedule: transition.ob("ForceReschedule"),
        }),
        client_description: v.s("ClientDescription"),
        allocated_resources: allocated_resources(v.get("AllocatedResources")),
        metrics: metrics.is_object().then(|| Box::new(alloc_metric(metrics))),
        previous_allocation: v.s("PreviousAllocation"),
        next_allocation: v.s("NextAllocation"),
        reschedule_tracker: tracker.is_object().then(|| {
            Box::new(RescheduleTracker {
                events: tracker
                    .list("Events")
                    .into_iter()
                    .map(|e| RescheduleEvent {
                        reschedule_time_unix_ns: e.i("RescheduleTime"),
                        prev_alloc_id: e.s("PrevAllocID"),
                        prev_node_id: e.s("PrevNodeID"),
                        delay_ns: e.i("Delay"),
                    })
                    .collect(),
            })
        }),
        preempted_allocations: v.strings("PreemptedAllocations"),
        preempted_by_allocation: v.s("PreemptedByAllocation"),
        followup_eval_id: v.s("FollowupEvalID"),
        create_time_unix_ns: v.i("CreateTime"),
        modify_time_unix_ns: v.i("ModifyTime"),
        create_revision: v.i("CreateIndex"),
        modify_revision: v.i("ModifyIndex"),
        alloc_modify_revision: v.i("AllocModifyIndex"),
        ..Default::default()
    };
    for (name, state) in v.entries("TaskStates") {
        a.task_states.insert(name, task_state(state));
    }
    a.set_desired_status(v.named("DesiredStatus"));
    a.set_client_status(v.named("ClientStatus"));
    a
}

/// Nomad's `Node` or `NodeListStub`.
pub fn node(v: J<'_>) -> Node {
    let resources = v.get("NodeResources");
    let reserved = v.get("ReservedResources");
    let drain = v.get("DrainStrategy");
    let last_drain = v.get("LastDrain");
    let mut n = Node {
        id: v.s("ID"),
        name: v.s("Name"),
        datacenter: v.s("Datacenter"),
        node_pool: v.s("NodePool"),
        node_class: v.s("NodeClass"),
        computed_class: v.s("ComputedClass"),
        attributes: v.string_map("Attributes"),
        meta: v.string_map("Meta"),
        drivers: v
            .entries("Drivers")
            .into_iter()
            .map(|(k, d)| {
                (
                    k,
                    DriverInfo {
                        detected: d.b("Detected"),
                        healthy: d.b("Healthy"),
                        health_description: d.s("HealthDescription"),
                        attributes: d.string_map("Attributes"),
                    },
                )
            })
            .collect(),
        resources: resources.is_object().then(|| NodeResources {
            cpu_mhz: resources.get("Cpu").u("CpuShares"),
            core_ids: resources
                .get("Cpu")
                .list("ReservableCpuCores")
                .into_iter()
                .filter_map(|c| c.0.as_u64().and_then(|c| u32::try_from(c).ok()))
                .collect(),
            memory_mb: resources.get("Memory").u("MemoryMB"),
            disk_mb: resources.get("Disk").u("DiskMB"),
            networks: resources
                .list("Networks")
                .into_iter()
                .map(|n| NodeNetwork {
                    mode: n.s("Mode"),
                    device: n.s("Device"),
                    ip: n.s("IP"),
                    cidr: n.s("CIDR"),
                    mbits: n.u32("MBits"),
                })
                .collect(),
            min_dynamic_port: resources.u32("MinDynamicPort"),
            max_dynamic_port: resources.u32("MaxDynamicPort"),
            devices: resources
                .list("Devices")
                .into_iter()
                .map(|d| NodeDevice {
                    name: [d.s("Vendor"), d.s("Type"), d.s("Name")].join("/"),
                    instance_ids: d.list("Instances").into_iter().map(|i| i.s("ID")).collect(),
                    attributes: d.string_map("Attributes"),
                })
                .collect(),
        }),
        reserved: reserved.is_object().then(|| NodeReservedResources {
            cpu_mhz: reserved.get("Cpu").u("CpuShares"),
            core_ids: reserved
                .get("Cpu")
                .list("ReservedCpuCores")
                .into_iter()
                .filter_map(|c| c.0.as_u64().and_then(|c| u32::try_from(c).ok()))
                .collect(),
            memory_mb: reserved.get("Memory").u("MemoryMB"),
            disk_mb: reserved.get("Disk").u("DiskMB"),
            reserved_host_ports: reserved.get("Networks").s("ReservedHostPorts"),
        }),
        status_description: v.s("StatusDescription"),
        drain_strategy: if drain.is_object() {
            Some(DrainStrategy {
                deadline_ns: drain.get("DrainSpec").i("Deadline"),
                ignore_system_jobs: drain.get("DrainSpec").b("IgnoreSystemJobs"),
                force_deadline_unix_ns: drain.time("ForceDeadline"),
                started_at_unix_ns: drain.time("StartedAt"),
            })
        } else if v.b("Drain") {
            // A stub says only that the node drains.
            Some(DrainStrategy::default())
        } else {
            None
        },
        http_addr: v.s("HTTPAddr"),
        status_updated_at_unix_ns: v.i("StatusUpdatedAt").saturating_mul(1_000_000_000),
        create_revision: v.i("CreateIndex"),
        modify_revision: v.i("ModifyIndex"),
        last_drain: last_drain.is_object().then(|| DrainMetadata {
            started_at_unix_ns: last_drain.time("StartedAt"),
            updated_at_unix_ns: last_drain.time("UpdatedAt"),
            status: last_drain.s("Status"),
        }),
        ..Default::default()
    };
    // A stub carries the address its API listens on as `Address`.
    let address = v.s("Address");
    if n.http_addr.is_empty() && !address.is_empty() {
        n.attributes
            .entry("unique.network.ip-address".into())
            .or_insert(address);
    }
    let version = v.s("Version");
    if !version.is_empty() {
        n.attributes
            .entry("nomad.version".into())
            .or_insert(version);
    }
    n.set_status(v.named("Status"));
    n.set_scheduling_eligibility(v.named("SchedulingEligibility"));
    n
}

/// Nomad's `Deployment`.
pub fn deployment(v: J<'_>) -> Deployment {
    let mut d = Deployment {
        id: v.s("ID"),
        namespace: v.s("Namespace"),
        job_id: v.s("JobID"),
        job_version: v.u("JobVersion"),
        job_modify_revision: v.i("JobModifyIndex"),
        job_spec_modify_revision: v.i("JobSpecModifyIndex"),
        job_create_revision: v.i("JobCreateIndex"),
        task_groups: v
            .entries("TaskGroups")
            .into_iter()
            .map(|(name, s)| {
                (
                    name,
                    DeploymentState {
                        auto_revert: s.b("AutoRevert"),
                        auto_promote: s.b("AutoPromote"),
                        progress_deadline_ns: s.i("ProgressDeadline"),
                        require_progress_by_unix_ns: s.time("RequireProgressBy"),
                        promoted: s.b("Promoted"),
                        placed_canaries: s.strings("PlacedCanaries"),
                        desired_canaries: s.i32("DesiredCanaries"),
                        desired_total: s.i32("DesiredTotal"),
                        placed_allocs: s.i32("PlacedAllocs"),
                        healthy_allocs: s.i32("HealthyAllocs"),
                        unhealthy_allocs: s.i32("UnhealthyAllocs"),
                    },
                )
            })
            .collect(),
        status_description: v.s("StatusDescription"),
        eval_priority: v.i32("EvalPriority"),
        create_time_unix_ns: v.i("CreateTime"),
        modify_time_unix_ns: v.i("ModifyTime"),
        create_revision: v.i("CreateIndex"),
        modify_revision: v.i("ModifyIndex"),
        ..Default::default()
    };
    d.set_status(v.named("Status"));
    d
}

/// The per-group counts of Nomad's `JobSummary`.
pub fn group_summaries(v: J<'_>) -> BTreeMap<String, TaskGroupSummary> {
    v.entries("Summary")
        .into_iter()
        .map(|(name, s)| {
            (
                name,
                TaskGroupSummary {
                    queued: s.i("Queued"),
                    starting: s.i("Starting"),
                    running: s.i("Running"),
                    failed: s.i("Failed"),
                    complete: s.i("Complete"),
                    lost: s.i("Lost"),
                    unknown: s.i("Unknown"),
                },
            )
        })
        .collect()
}

/// Nomad's `JobListStub`, as far as a job list shows it.
pub fn job_stub(v: J<'_>) -> Job {
    let mut job = Job {
        id: v.s("ID"),
        parent_id: v.s("ParentID"),
        name: v.s("Name"),
        namespace: v.s("Namespace"),
        datacenters: v.strings("Datacenters"),
        node_pool: v.s("NodePool"),
        priority: v.i32("Priority"),
        // A stub says only whether the job is periodic or parameterized.
        periodic: v.b("Periodic").then(|| PeriodicConfig {
            enabled: true,
            ..Default::default()
        }),
        parameterized: v
            .b("ParameterizedJob")
            .then(ParameterizedJobConfig::default),
        stop: v.b("Stop"),
        status_description: v.s("StatusDescription"),
        create_revision: v.i("CreateIndex"),
        modify_revision: v.i("ModifyIndex"),
        job_modify_revision: v.i("JobModifyIndex"),
        submit_time_unix_ns: v.i("SubmitTime"),
        meta: v.string_map("Meta"),
        ..Default::default()
    };
    job.set_type(v.named("Type"));
    job.set_status(v.named("Status"));
    job
}

/// Nomad's `JobPlanResponse` (its `Diff` is computed by the CLI itself).
pub fn plan_response(v: J<'_>) -> PlanJobResponse {
    let annotations = v.get("Annotations");
    PlanJobResponse {
        annotations: annotations.is_object().then(|| PlanAnnotations {
            desired_tg_updates: annotations
                .entries("DesiredTGUpdates")
                .into_iter()
                .map(|(name, u)| {
                    (
                        name,
                        DesiredUpdates {
                            ignore: u.u("Ignore"),
                            place: u.u("Place"),
                            migrate: u.u("Migrate"),
                            stop: u.u("Stop"),
                            in_place_update: u.u("InPlaceUpdate"),
                            destructive_update: u.u("DestructiveUpdate"),
                            canary: u.u("Canary"),
                            preemptions: u.u("Preemptions"),
                            reschedule_now: u.u("RescheduleNow"),
                            reschedule_later: u.u("RescheduleLater"),
                            disconnect: u.u("Disconnect"),
                            reconnect: u.u("Reconnect"),
                        },
                    )
                })
                .collect(),
            preempted_allocs: annotations
                .list("PreemptedAllocs")
                .into_iter()
                .map(allocation)
                .collect(),
        }),
        failed_tg_allocs: v
            .entries("FailedTGAllocs")
            .into_iter()
            .map(|(k, m)| (k, alloc_metric(m)))
            .collect(),
        job_modify_revision: v.i("JobModifyIndex"),
        created_evals: v.list("CreatedEvals").into_iter().map(evaluation).collect(),
        diff: String::new(),
        warnings: warnings(v),
    }
}

/// Nomad's `Warnings`: one string of lines, empty for none.
pub fn warnings(v: J<'_>) -> Vec<String> {
    v.s("Warnings")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// Nomad's `AllocFileInfo`.
pub fn file_info(v: J<'_>) -> AllocFileInfo {
    AllocFileInfo {
        name: v.s("Name"),
        is_dir: v.b("IsDir"),
        size: v.i("Size"),
        file_mode: v.s("FileMode"),
        mod_time_unix_ns: v.time("ModTime"),
        content_type: v.s("ContentType"),
    }
}

/// Nomad's `VariableMetadata`.
pub fn variable_metadata(v: J<'_>) -> VariableMetadata {
    VariableMetadata {
        namespace: v.s("Namespace"),
        path: v.s("Path"),
        create_revision: v.i("CreateIndex"),
        modify_revision: v.i("ModifyIndex"),
        create_time: v.i("CreateTime"),
        modify_time: v.i("ModifyTime"),
        // The CLI's views show no lock; `-json` prints the API's own answer.
        lock: None,
    }
}

/// Nomad's `VariableDecrypted`.
pub fn variable(v: J<'_>) -> VariableDecrypted {
    VariableDecrypted {
        meta: Some(variable_metadata(v)),
        items: v.string_map("Items"),
    }
}

/// Nomad's `ACLPolicy` (or its stub).
pub fn acl_policy(v: J<'_>) -> AclPolicy {
    AclPolicy {
        name: v.s("Name"),
        description: v.s("Description"),
        rules: v.s("Rules"),
        create_revision: v.i("CreateIndex"),
        modify_revision: v.i("ModifyIndex"),
    }
}

/// Nomad's `ACLToken` (or its stub).
pub fn acl_token(v: J<'_>) -> AclToken {
    AclToken {
        accessor_id: v.s("AccessorID"),
        secret_id: v.s("SecretID"),
        name: v.s("Name"),
        r#type: v.s("Type"),
        policies: v.strings("Policies"),
        global: v.b("Global"),
        create_time: v.time("CreateTime"),
        create_revision: v.i("CreateIndex"),
        modify_revision: v.i("ModifyIndex"),
    }
}

#[cfg(test)]
mod tests {
    use caravan_proto::{
        AllocClientStatus, AllocDesiredStatus, DeploymentStatus, EvalStatus, JobStatus, JobType,
        NodeStatus, SchedulingEligibility,
    };
    use serde_json::json;

    use super::*;

    #[test]
    fn allocations_read_back_with_their_statuses_and_tasks() {
        let v = json!({
            "ID": "a1", "Name": "web.web[0]", "JobID": "web", "JobVersion": 3,
            "TaskGroup": "web", "NodeID": "n1", "DesiredStatus": "run",
            "ClientStatus": "running", "CreateIndex": 7, "ModifyIndex": 9,
            "CreateTime": 11, "ModifyTime": 12,
            "DeploymentStatus": {"Healthy": true, "Canary": true, "Timestamp": "0001-01-01T00:00:00Z"},
            "TaskStates": {"web": {"State": "running", "Restarts": 2,
                "StartedAt": "2023-11-14T22:13:20Z",
                "Events": [{"Type": "Started", "Time": 5, "DisplayMessage": "Task started"}]}},
            "AllocatedResources": {"Tasks": {"web": {"Cpu": {"CpuShares": 100}, "Memory": {"MemoryMB": 64}, "Networks": []}},
                "Shared": {"DiskMB": 300, "Ports": [{"Label": "http", "Value": 25000, "To": 8080, "HostIP": "127.0.0.1"}]}},
            "RescheduleTracker": null,
        });
        let a = allocation(J(&v));
        assert_eq!(
            (a.id.as_str(), a.job_version, a.create_revision),
            ("a1", 3, 7)
        );
        assert_eq!(a.client_status(), AllocClientStatus::Running);
        assert_eq!(a.desired_status(), AllocDesiredStatus::Run);
        let d = a.deployment_status.unwrap();
        assert_eq!((d.healthy, d.canary), (Some(true), true));
        let t = a.task_states.get("web").unwrap();
        assert_eq!((t.state.as_str(), t.restarts), ("running", 2));
        assert_eq!(t.events[0].message, "Task started");
        let r = a.allocated_resources.unwrap();
        assert_eq!(r.tasks.get("web").unwrap().memory_mb, 64);
        assert_eq!(r.shared.unwrap().ports[0].value, 25000);
        assert!(a.reschedule_tracker.is_none());
    }

    #[test]
    fn evaluations_nodes_and_deployments_read_back() {
        let e = evaluation(J(&json!({
            "ID": "e1", "Status": "blocked", "JobID": "web", "CreateIndex": 4,
            "WaitUntil": "2023-11-14T22:13:20Z",
            "FailedTGAllocs": {"web": {"NodesEvaluated": 3, "DimensionExhausted": {"memory": 3}}},
        })));
        assert_eq!(e.status(), EvalStatus::Blocked);
        assert_eq!(e.wait_until_unix_ns, 1_700_000_000_000_000_000);
        assert_eq!(
            e.failed_tg_allocs
                .get("web")
                .unwrap()
                .dimension_exhausted
                .get("memory"),
            Some(&3)
        );
        let n = node(J(&json!({
            "ID": "n1", "Name": "dev", "Status": "ready", "SchedulingEligibility": "ineligible",
            "Drain": true, "Address": "10.0.0.1", "Version": "0.1.0",
            "Drivers": {"raw_exec": {"Detected": true, "Healthy": true}},
        })));
        assert_eq!(n.status(), NodeStatus::Ready);
        assert_eq!(
            n.scheduling_eligibility(),
            SchedulingEligibility::Ineligible
        );
        assert!(n.drain_strategy.is_some());
        assert!(n.drivers.get("raw_exec").unwrap().healthy);
        assert_eq!(
            n.attributes
                .get("unique.network.ip-address")
                .map(String::as_str),
            Some("10.0.0.1")
        );
        let d = deployment(J(&json!({
            "ID": "d1", "Status": "successful",
            "TaskGroups": {"web": {"DesiredTotal": 3, "HealthyAllocs": 3, "PlacedCanaries": ["a"]}},
        })));
        assert_eq!(d.status(), DeploymentStatus::Successful);
        let g = d.task_groups.get("web").unwrap();
        assert_eq!((g.desired_total, g.healthy_allocs), (3, 3));
    }

    #[test]
    fn job_stubs_and_plans_read_back() {
        let j = job_stub(J(&json!({
            "ID": "cron", "Type": "batch", "Priority": 50, "Status": "running",
            "Periodic": true, "ParameterizedJob": false, "SubmitTime": 9,
        })));
        assert_eq!(j.r#type(), JobType::Batch);
        assert_eq!(j.status(), JobStatus::Running);
        assert!(j.periodic.is_some_and(|p| p.enabled));
        assert!(j.parameterized.is_none());
        let p = plan_response(J(&json!({
            "Annotations": {"DesiredTGUpdates": {"web": {"Place": 2, "Ignore": 1}}, "PreemptedAllocs": []},
            "FailedTGAllocs": null, "JobModifyIndex": 12, "CreatedEvals": [],
            "Warnings": "a\nb",
        })));
        let u = p.annotations.unwrap();
        assert_eq!(u.desired_tg_updates.get("web").unwrap().place, 2);
        assert_eq!(p.job_modify_revision, 12);
        assert_eq!(p.warnings, ["a", "b"]);
    }
}
