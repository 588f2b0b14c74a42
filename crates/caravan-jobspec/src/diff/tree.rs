//! Jobs flattened into the named fields and objects Nomad's diff compares, with Nomad's
//! field names (`Count`, `KillTimeout`, `Meta[owner]`, `Static Port`) and value formats
//! (durations in nanoseconds, bools as `true`/`false`).

use caravan_model::NomadName;
use caravan_proto::{
    Affinity, Constraint, Job, NetworkResource, ReschedulePolicy, RestartPolicy, Spread, Task,
    TaskGroup, UpdateStrategy,
};
use std::collections::BTreeMap;

/// One object as Nomad's diff sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Node {
    /// Primitive fields by name.
    pub fields: BTreeMap<String, String>,
    /// Objects that appear at most once (`RestartPolicy`, `Resources`).
    pub singles: BTreeMap<&'static str, Node>,
    /// Objects compared as sets (`Constraint`, `Network`): a changed member is a removal
    /// plus an addition, as in Nomad.
    pub sets: BTreeMap<&'static str, Vec<Node>>,
    /// String lists compared as sets (`Datacenters`).
    pub string_sets: BTreeMap<&'static str, Vec<String>>,
}

impl Node {
    pub(super) fn field(&mut self, name: &str, value: impl ToString) -> &mut Self {
        self.fields.insert(name.to_string(), value.to_string());
        self
    }

    pub(super) fn map(&mut self, prefix: &str, map: &BTreeMap<String, String>) -> &mut Self {
        for (k, v) in map {
            self.fields.insert(format!("{prefix}[{k}]"), v.clone());
        }
        self
    }

    pub(super) fn set(&mut self, name: &'static str, items: Vec<Node>) -> &mut Self {
        if !items.is_empty() {
            self.sets.insert(name, items);
        }
        self
    }

    pub(super) fn single(&mut self, name: &'static str, node: Option<Node>) -> &mut Self {
        if let Some(node) = node {
            self.singles.insert(name, node);
        }
        self
    }

    pub(super) fn strings(&mut self, name: &'static str, items: &[String]) -> &mut Self {
        if !items.is_empty() {
            self.string_sets.insert(name, items.to_vec());
        }
        self
    }
}

/// The job-level fields and objects (groups are diffed separately, by name).
pub(crate) fn job_node(job: &Job) -> Node {
    let mut n = Node::default();
    n.field("AllAtOnce", job.all_at_once)
        .field("Dispatched", job.dispatched)
        .field("Name", &job.name)
        .field("Namespace", &job.namespace)
        .field("NodePool", &job.node_pool)
        .field("ParentID", &job.parent_id)
        .field("Priority", job.priority)
        .field("Stop", job.stop)
        .field("Type", job.r#type().nomad_name())
        .map("Meta", &job.meta)
        .strings("Datacenters", &job.datacenters)
        .set(
            "Constraint",
            job.constraints.iter().map(constraint).collect(),
        )
        .set("Affinity", job.affinities.iter().map(affinity).collect())
        .set("Spread", job.spreads.iter().map(spread).collect())
        .single(
            "Periodic",
            job.periodic.as_ref().map(|p| {
                let mut n = Node::default();
                n.field("Enabled", p.enabled)
                    .field("ProhibitOverlap", p.prohibit_overlap)
                    .field("SpecType", &p.spec_type)
                    .field("TimeZone", &p.time_zone)
                    .strings("Spec", &p.specs);
                n
            }),
        )
        .single(
            "ParameterizedJob",
            job.parameterized.as_ref().map(|p| {
                let mut n = Node::default();
                n.field("Payload", &p.payload)
                    .strings("MetaOptional", &p.meta_optional)
                    .strings("MetaRequired", &p.meta_required);
                n
            }),
        );
    n
}

/// A group's own fields and objects (tasks are diffed separately, by name).
pub(crate) fn group_node(tg: &TaskGroup) -> Node {
    let mut n = Node::default();
    n.field("Count", tg.count)
        .field("ShutdownDelay", tg.shutdown_delay_ns)
        .map("Meta", &tg.meta)
        .set(
            "Constraint",
            tg.constraints.iter().map(constraint).collect(),
        )
        .set("Affinity", tg.affinities.iter().map(affinity).collect())
        .set("Spread", tg.spreads.iter().map(spread).collect())
        .set("Network", tg.networks.iter().map(network).collect())
        .set("Service", super::services::services(&tg.services))
        .set(
            "Volume",
            tg.volumes
                .iter()
                .map(|(name, v)| {
                    let mut n = Node::default();
                    n.field("Name", name)
                        .field("PerAlloc", v.per_alloc)
                        .field("ReadOnly", v.read_only)
                        .field("Source", &v.source)
                        .field("Type", &v.r#type);
                    n
                })
                .collect(),
        )
        .single("RestartPolicy", tg.restart_policy.as_ref().map(restart))
        .single(
            "ReschedulePolicy",
            tg.reschedule_policy.as_ref().map(reschedule),
        )
        .single("Update", tg.update.as_ref().map(update))
        .single(
            "Migrate",
            tg.migrate.as_ref().map(|m| {
                let mut n = Node::default();
                n.field("HealthCheck", &m.health_check)
                    .field("HealthyDeadline", m.healthy_deadline_ns)
                    .field("MaxParallel", m.max_parallel)
                    .field("MinHealthyTime", m.min_healthy_time_ns);
                n
            }),
        )
        .single(
            "EphemeralDisk",
            tg.ephemeral_disk.as_ref().map(|d| {
                let mut n = Node::default();
                n.field("Migrate", d.migrate)
                    .field("SizeMB", d.size_mb)
                    .field("Sticky", d.sticky);
                n
            }),
        );
    if tg.max_client_disconnect_ns != 0 {
        n.field("MaxClientDisconnect", tg.max_client_disconnect_ns);
    }
    if let Some(d) = &tg.disconnect {
        let mut dn = Node::default();
        dn.field("LostAfter", d.lost_after_ns)
            .field("Reconcile", &d.reconcile)
            .field("Replace", d.replace.unwrap_or(true));
        if let Some(stop) = d.stop_on_client_after_ns {
            dn.field("StopOnClientAfter", stop);
        }
        n.single("Disconnect", Some(dn));
    }
    n
}

/// A task's fields and objects.
pub(crate) fn task_node(t: &Task) -> Node {
    let mut n = Node::default();
    n.field("Driver", &t.driver)
        .field("KillSignal", &t.kill_signal)
        .field("KillTimeout", t.kill_timeout_ns)
        .field("Leader", t.leader)
        .field("ShutdownDelay", t.shutdown_delay_ns)
        .field("User", &t.user)
        .map("Env", &t.env)
        .map("Meta", &t.meta)
        .set("Constraint", t.constraints.iter().map(constraint).collect())
        .set("Affinity", t.affinities.iter().map(affinity).collect())
        .set("Service", super::services::services(&t.services))
        .set("Artifact", super::task_files::artifacts(&t.artifacts))
        .set("Template", super::task_files::templates(&t.templates))
        .set("Identity", super::task_files::identities(&t.identities))
        .set(
            "VolumeMount",
            t.volume_mounts
                .iter()
                .map(|m| {
                    let mut n = Node::default();
                    n.field("Destination", &m.destination)
                        .field("PropagationMode", &m.propagation_mode)
                        .field("ReadOnly", m.read_only)
                        .field("Volume", &m.volume);
                    n
                })
                .collect(),
        )
        .single("RestartPolicy", t.restart_policy.as_ref().map(restart))
        .single(
            "Config",
            t.config.as_ref().map(|c| {
                let mut n = Node::default();
                for (k, v) in &c.fields {
                    flatten(k, v, &mut n.fields);
                }
                n
            }),
        )
        .single(
            "Resources",
            t.resources.as_ref().map(|r| {
                let mut n = Node::default();
                n.field("CPU", r.cpu_mhz)
                    .field("Cores", r.cores)
                    .field("DiskMB", r.disk_mb)
                    .field("MemoryMB", r.memory_mb)
                    .field("MemoryMaxMB", r.memory_max_mb)
                    .set("Network", r.networks.iter().map(network).collect())
                    .set(
                        "Device",
                        r.devices
                            .iter()
                            .map(|d| {
                                let mut n = Node::default();
                                n.field("Name", &d.name).field("Count", d.count);
                                n
                            })
                            .collect(),
                    );
                n
            }),
        )
        .single(
            "Lifecycle",
            t.lifecycle.as_ref().map(|l| {
                let mut n = Node::default();
                n.field("Hook", &l.hook).field("Sidecar", l.sidecar);
                n
            }),
        )
        .single(
            "LogConfig",
            t.log_config.as_ref().map(|l| {
                let mut n = Node::default();
                n.field("Disabled", l.disabled)
                    .field("MaxFileSizeMB", l.max_file_size_mb)
                    .field("MaxFiles", l.max_files);
                n
            }),
        )
        .single(
            "DispatchPayload",
            (!t.dispatch_payload_file.is_empty()).then(|| {
                let mut n = Node::default();
                n.field("File", &t.dispatch_payload_file);
                n
            }),
        );
    n
}

/// Flattens a config value as Nomad's flatmap does: `args[0]`, `port_map[0][http]`.
fn flatten(prefix: &str, v: &prost_types::Value, out: &mut BTreeMap<String, String>) {
    use prost_types::value::Kind;
    match &v.kind {
        None | Some(Kind::NullValue(_)) => {
            out.insert(prefix.to_string(), String::new());
        }
        Some(Kind::BoolValue(b)) => {
            out.insert(prefix.to_string(), b.to_string());
        }
        Some(Kind::NumberValue(n)) => {
            out.insert(prefix.to_string(), format_number(*n));
        }
        Some(Kind::StringValue(s)) => {
            out.insert(prefix.to_string(), s.clone());
        }
        Some(Kind::ListValue(l)) => {
            for (i, item) in l.values.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), item, out);
            }
        }
        Some(Kind::StructValue(s)) => {
            for (k, item) in &s.fields {
                flatten(&format!("{prefix}[{k}]"), item, out);
            }
        }
    }
}

fn format_number(n: f64) -> String {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if n.fract() == 0.0 && n.abs() < EXACT {
        // The guard makes the cast exact.
        #[allow(clippy::cast_possible_truncation)]
        return (n as i64).to_string();
    }
    n.to_string()
}

fn constraint(c: &Constraint) -> Node {
    let mut n = Node::default();
    n.field("LTarget", &c.l_target)
        .field("Operand", &c.operand)
        .field("RTarget", &c.r_target);
    n
}

fn affinity(a: &Affinity) -> Node {
    let mut n = Node::default();
    n.field("LTarget", &a.l_target)
        .field("Operand", &a.operand)
        .field("RTarget", &a.r_target)
        .field("Weight", a.weight);
    n
}

fn spread(s: &Spread) -> Node {
    let mut n = Node::default();
    n.field("Attribute", &s.attribute)
        .field("Weight", s.weight)
        .set(
            "SpreadTarget",
            s.targets
                .iter()
                .map(|t| {
                    let mut n = Node::default();
                    n.field("Value", &t.value).field("Percent", t.percent);
                    n
                })
                .collect(),
        );
    n
}

fn network(net: &NetworkResource) -> Node {
    let port = |p: &caravan_proto::Port, with_value: bool| {
        let mut n = Node::default();
        n.field("HostNetwork", &p.host_network)
            .field("Label", &p.label)
            .field("To", p.to);
        if with_value {
            n.field("Value", p.value);
        }
        n
    };
    let dns = net.dns.as_ref().map(|d| {
        let mut n = Node::default();
        for (name, list) in [
            ("Servers", &d.servers),
            ("Searches", &d.searches),
            ("Options", &d.options),
        ] {
            if !list.is_empty() {
                n.field(name, list.join(","));
            }
        }
        n
    });
    let mut n = Node::default();
    n.field("MBits", net.mbits)
        .field("Mode", &net.mode)
        .field("Hostname", &net.hostname)
        .single("DNS", dns)
        .set(
            "Static Port",
            net.reserved_ports.iter().map(|p| port(p, true)).collect(),
        )
        .set(
            "Dynamic Port",
            net.dynamic_ports.iter().map(|p| port(p, false)).collect(),
        );
    n
}

fn restart(r: &RestartPolicy) -> Node {
    let mut n = Node::default();
    n.field("Attempts", r.attempts)
        .field("Delay", r.delay_ns)
        .field("Interval", r.interval_ns)
        .field("Mode", &r.mode);
    n
}

fn reschedule(r: &ReschedulePolicy) -> Node {
    let mut n = Node::default();
    n.field("Attempts", r.attempts)
        .field("Delay", r.delay_ns)
        .field("DelayFunction", &r.delay_function)
        .field("Interval", r.interval_ns)
        .field("MaxDelay", r.max_delay_ns)
        .field("Unlimited", r.unlimited);
    n
}

fn update(u: &UpdateStrategy) -> Node {
    let mut n = Node::default();
    n.field("AutoPromote", u.auto_promote)
        .field("AutoRevert", u.auto_revert)
        .field("Canary", u.canary)
        .field("HealthCheck", &u.health_check)
        .field("HealthyDeadline", u.healthy_deadline_ns)
        .field("MaxParallel", u.max_parallel)
        .field("MinHealthyTime", u.min_healthy_time_ns)
        .field("ProgressDeadline", u.progress_deadline_ns)
        .field("Stagger", u.stagger_ns);
    n
}
