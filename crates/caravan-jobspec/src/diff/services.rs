//! Services and their checks as Nomad's diff names them (`Service`, `Check`,
//! `CheckRestart`), so a plan shows a changed service as an in-place update.

use super::tree::Node;
use caravan_proto::{Service, ServiceCheck};

pub(super) fn services(services: &[Service]) -> Vec<Node> {
    services.iter().map(service).collect()
}

fn service(s: &Service) -> Node {
    let mut n = Node::default();
    n.field("Name", &s.name)
        .field("TaskName", &s.task_name)
        .field("PortLabel", &s.port_label)
        .field("AddressMode", &s.address_mode)
        .field("Address", &s.address)
        .field("EnableTagOverride", s.enable_tag_override)
        .field("Provider", &s.provider)
        .field("OnUpdate", &s.on_update)
        .map("Meta", &s.meta)
        .map("CanaryMeta", &s.canary_meta)
        .strings("Tags", &s.tags)
        .strings("CanaryTags", &s.canary_tags)
        .set("Check", s.checks.iter().map(check).collect());
    n
}

fn check(c: &ServiceCheck) -> Node {
    let mut n = Node::default();
    n.field("Name", &c.name)
        .field("Type", &c.r#type)
        .field("Command", &c.command)
        .field("Path", &c.path)
        .field("Protocol", &c.protocol)
        .field("Method", &c.method)
        .field("Body", &c.body)
        .field("PortLabel", &c.port_label)
        .field("AddressMode", &c.address_mode)
        .field("Interval", c.interval_ns)
        .field("Timeout", c.timeout_ns)
        .field("InitialStatus", &c.initial_status)
        .field("TaskName", &c.task_name)
        .field("OnUpdate", &c.on_update)
        .field("GRPCService", &c.grpc_service)
        .field("GRPCUseTLS", c.grpc_use_tls)
        .field("TLSSkipVerify", c.tls_skip_verify)
        .field("TLSServerName", &c.tls_server_name)
        .field("SuccessBeforePassing", c.success_before_passing)
        .field("FailuresBeforeCritical", c.failures_before_critical)
        .field("FailuresBeforeWarning", c.failures_before_warning)
        .strings("Args", &c.args)
        .single(
            "CheckRestart",
            c.check_restart.map(|r| {
                let mut n = Node::default();
                n.field("Limit", r.limit)
                    .field("Grace", r.grace_ns)
                    .field("IgnoreWarnings", r.ignore_warnings);
                n
            }),
        );
    for (name, values) in &c.headers {
        n.field(&format!("Header[{name}]"), values.values.join(","));
    }
    n
}
