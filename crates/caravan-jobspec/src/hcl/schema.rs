//! Nomad job-specification blocks decoded into Nomad's JSON shape from tables of their
//! fields (services and checks, volumes, the UI block, and what Caravan refuses: Connect,
//! templates, artifacts, Vault, Consul, identities, actions, schedules, secrets). They
//! reach `/v1/jobs/parse` as Nomad writes them, and the conversion to a job reads them or
//! refuses each one that is set, as it does for the same fields sent as JSON.

use serde_json::{Map, Value as Json};

use super::body::{BlockRef, Body, Diag};

/// How one argument or block of a schema is read.
pub(crate) enum Kind {
    Str,
    Int,
    Bool,
    /// A duration, as nanoseconds.
    Dur,
    StrList,
    /// A string map, as a block or an argument.
    StrMap,
    /// One block: an object.
    Block(&'static [Field]),
    /// Repeated unlabeled blocks: a list of objects.
    List(&'static [Field]),
    /// Repeated labeled blocks: a list of objects, the label in the named field.
    Labeled(&'static [Field], &'static str),
    /// A free-form body (`config`), in Nomad's shape.
    FreeForm,
    /// `header { Name = ["value"] }`: a map of string lists.
    Headers,
}

/// One field: its HCL name, its JSON name, how it is read.
pub(crate) struct Field(pub &'static str, pub &'static str, pub Kind);

use Kind::*;

pub(crate) const CHECK_RESTART: &[Field] = &[
    Field("limit", "Limit", Int),
    Field("grace", "Grace", Dur),
    Field("ignore_warnings", "IgnoreWarnings", Bool),
];

pub(crate) const CHECK: &[Field] = &[
    Field("name", "Name", Str),
    Field("type", "Type", Str),
    Field("command", "Command", Str),
    Field("args", "Args", StrList),
    Field("path", "Path", Str),
    Field("protocol", "Protocol", Str),
    Field("port", "PortLabel", Str),
    Field("expose", "Expose", Bool),
    Field("address_mode", "AddressMode", Str),
    Field("advertise", "Advertise", Str),
    Field("interval", "Interval", Dur),
    Field("timeout", "Timeout", Dur),
    Field("initial_status", "InitialStatus", Str),
    Field("notes", "Notes", Str),
    Field("tls_server_name", "TLSServerName", Str),
    Field("tls_skip_verify", "TLSSkipVerify", Bool),
    Field("header", "Header", Headers),
    Field("method", "Method", Str),
    Field("check_restart", "CheckRestart", Block(CHECK_RESTART)),
    Field("grpc_service", "GRPCService", Str),
    Field("grpc_use_tls", "GRPCUseTLS", Bool),
    Field("task", "TaskName", Str),
    Field("success_before_passing", "SuccessBeforePassing", Int),
    Field("failures_before_critical", "FailuresBeforeCritical", Int),
    Field("failures_before_warning", "FailuresBeforeWarning", Int),
    Field("body", "Body", Str),
    Field("on_update", "OnUpdate", Str),
];

/// A group network's `dns` block.
pub(crate) const DNS: &[Field] = &[
    Field("servers", "Servers", StrList),
    Field("searches", "Searches", StrList),
    Field("options", "Options", StrList),
];

pub(crate) const IDENTITY: &[Field] = &[
    Field("name", "Name", Str),
    Field("aud", "Audience", StrList),
    Field("change_mode", "ChangeMode", Str),
    Field("change_signal", "ChangeSignal", Str),
    Field("env", "Env", Bool),
    Field("file", "File", Bool),
    Field("filepath", "Filepath", Str),
    Field("service_name", "ServiceName", Str),
    Field("ttl", "TTL", Dur),
    Field("extra_claims", "ExtraClaims", StrList),
];

const MESH_GATEWAY: &[Field] = &[Field("mode", "Mode", Str)];

const UPSTREAM: &[Field] = &[
    Field("destination_name", "DestinationName", Str),
    Field("destination_namespace", "DestinationNamespace", Str),
    Field("destination_peer", "DestinationPeer", Str),
    Field("destination_partition", "DestinationPartition", Str),
    Field("destination_type", "DestinationType", Str),
    Field("local_bind_port", "LocalBindPort", Int),
    Field("datacenter", "Datacenter", Str),
    Field("local_bind_address", "LocalBindAddress", Str),
    Field("local_bind_socket_path", "LocalBindSocketPath", Str),
    Field("local_bind_socket_mode", "LocalBindSocketMode", Str),
    Field("mesh_gateway", "MeshGateway", Block(MESH_GATEWAY)),
    Field("config", "Config", FreeForm),
];

const EXPOSE_PATH: &[Field] = &[
    Field("path", "Path", Str),
    Field("protocol", "Protocol", Str),
    Field("local_path_port", "LocalPathPort", Int),
    Field("listener_port", "ListenerPort", Str),
];

const EXPOSE: &[Field] = &[Field("path", "Paths", List(EXPOSE_PATH))];

const TRANSPARENT_PROXY: &[Field] = &[
    Field("uid", "UID", Str),
    Field("outbound_port", "OutboundPort", Int),
    Field("exclude_inbound_ports", "ExcludeInboundPorts", StrList),
    Field("exclude_outbound_ports", "ExcludeOutboundPorts", StrList),
    Field("exclude_outbound_cidrs", "ExcludeOutboundCIDRs", StrList),
    Field("exclude_uids", "ExcludeUIDs", StrList),
    Field("no_dns", "NoDNS", Bool),
];

const PROXY: &[Field] = &[
    Field("local_service_address", "LocalServiceAddress", Str),
    Field("local_service_port", "LocalServicePort", Int),
    Field("expose", "Expose", Block(EXPOSE)),
    Field("upstreams", "Upstreams", List(UPSTREAM)),
    Field(
        "transparent_proxy",
        "TransparentProxy",
        Block(TRANSPARENT_PROXY),
    ),
    Field("config", "Config", FreeForm),
];

const SIDECAR_SERVICE: &[Field] = &[
    Field("tags", "Tags", StrList),
    Field("port", "Port", Str),
    Field("proxy", "Proxy", Block(PROXY)),
    Field("disable_default_tcp_check", "DisableDefaultTCPCheck", Bool),
    Field("meta", "Meta", StrMap),
];

const SIMPLE_RESOURCES: &[Field] = &[
    Field("cpu", "CPU", Int),
    Field("cores", "Cores", Int),
    Field("memory", "MemoryMB", Int),
    Field("memory_max", "MemoryMaxMB", Int),
    Field("disk", "DiskMB", Int),
];

const LOGS: &[Field] = &[
    Field("max_files", "MaxFiles", Int),
    Field("max_file_size", "MaxFileSizeMB", Int),
    Field("enabled", "Enabled", Bool),
    Field("disabled", "Disabled", Bool),
];

pub(crate) const VOLUME_MOUNT: &[Field] = &[
    Field("volume", "Volume", Str),
    Field("destination", "Destination", Str),
    Field("read_only", "ReadOnly", Bool),
    Field("propagation_mode", "PropagationMode", Str),
    Field("selinux_label", "SELinuxLabel", Str),
];

const SIDECAR_TASK: &[Field] = &[
    Field("name", "Name", Str),
    Field("driver", "Driver", Str),
    Field("user", "User", Str),
    Field("config", "Config", FreeForm),
    Field("env", "Env", StrMap),
    Field("resources", "Resources", Block(SIMPLE_RESOURCES)),
    Field("meta", "Meta", StrMap),
    Field("kill_timeout", "KillTimeout", Dur),
    Field("logs", "LogConfig", Block(LOGS)),
    Field("shutdown_delay", "ShutdownDelay", Dur),
    Field("kill_signal", "KillSignal", Str),
    Field("volume_mount", "VolumeMounts", List(VOLUME_MOUNT)),
    Field("identity", "Identities", List(IDENTITY)),
];

const CONNECT: &[Field] = &[
    Field("native", "Native", Bool),
    Field("gateway", "Gateway", FreeForm),
    Field("sidecar_service", "SidecarService", Block(SIDECAR_SERVICE)),
    Field("sidecar_task", "SidecarTask", Block(SIDECAR_TASK)),
];

const WEIGHTS: &[Field] = &[
    Field("passing", "Passing", Int),
    Field("warning", "Warning", Int),
];

pub(crate) const SERVICE: &[Field] = &[
    Field("name", "Name", Str),
    Field("tags", "Tags", StrList),
    Field("canary_tags", "CanaryTags", StrList),
    Field("enable_tag_override", "EnableTagOverride", Bool),
    Field("port", "PortLabel", Str),
    Field("address_mode", "AddressMode", Str),
    Field("address", "Address", Str),
    Field("check", "Checks", List(CHECK)),
    Field("check_restart", "CheckRestart", Block(CHECK_RESTART)),
    Field("connect", "Connect", Block(CONNECT)),
    Field("meta", "Meta", StrMap),
    Field("canary_meta", "CanaryMeta", StrMap),
    Field("tagged_addresses", "TaggedAddresses", StrMap),
    Field("task", "TaskName", Str),
    Field("on_update", "OnUpdate", Str),
    Field("identity", "Identity", Block(IDENTITY)),
    Field("weights", "Weights", Block(WEIGHTS)),
    Field("provider", "Provider", Str),
    Field("cluster", "Cluster", Str),
    Field("kind", "Kind", Str),
];

const CHANGE_SCRIPT: &[Field] = &[
    Field("command", "Command", Str),
    Field("args", "Args", StrList),
    Field("timeout", "Timeout", Dur),
    Field("fail_on_error", "FailOnError", Bool),
    Field("run_on_first_render", "RunOnFirstRender", Bool),
];

const WAIT: &[Field] = &[Field("min", "Min", Dur), Field("max", "Max", Dur)];

pub(crate) const TEMPLATE: &[Field] = &[
    Field("source", "SourcePath", Str),
    Field("destination", "DestPath", Str),
    Field("data", "EmbeddedTmpl", Str),
    Field("change_mode", "ChangeMode", Str),
    Field("change_script", "ChangeScript", Block(CHANGE_SCRIPT)),
    Field("change_signal", "ChangeSignal", Str),
    Field("once", "Once", Bool),
    Field("splay", "Splay", Dur),
    Field("perms", "Perms", Str),
    Field("uid", "Uid", Int),
    Field("gid", "Gid", Int),
    Field("left_delimiter", "LeftDelim", Str),
    Field("right_delimiter", "RightDelim", Str),
    Field("env", "Envvars", Bool),
    Field("vault_grace", "VaultGrace", Dur),
    Field("wait", "Wait", Block(WAIT)),
    Field("error_on_missing_key", "ErrMissingKey", Bool),
];

pub(crate) const ARTIFACT: &[Field] = &[
    Field("source", "GetterSource", Str),
    Field("options", "GetterOptions", StrMap),
    Field("headers", "GetterHeaders", StrMap),
    Field("mode", "GetterMode", Str),
    Field("insecure", "GetterInsecure", Bool),
    Field("destination", "RelativeDest", Str),
    Field("chown", "Chown", Bool),
];

pub(crate) const VAULT: &[Field] = &[
    Field("policies", "Policies", StrList),
    Field("role", "Role", Str),
    Field("namespace", "Namespace", Str),
    Field("cluster", "Cluster", Str),
    Field("env", "Env", Bool),
    Field("disable_file", "DisableFile", Bool),
    Field("change_mode", "ChangeMode", Str),
    Field("change_signal", "ChangeSignal", Str),
    Field("allow_token_expiration", "AllowTokenExpiration", Bool),
];

pub(crate) const CONSUL: &[Field] = &[
    Field("namespace", "Namespace", Str),
    Field("cluster", "Cluster", Str),
    Field("partition", "Partition", Str),
];

const MOUNT_OPTIONS: &[Field] = &[
    Field("fs_type", "FSType", Str),
    Field("mount_flags", "MountFlags", StrList),
];

pub(crate) const VOLUME: &[Field] = &[
    Field("type", "Type", Str),
    Field("source", "Source", Str),
    Field("read_only", "ReadOnly", Bool),
    Field("sticky", "Sticky", Bool),
    Field("access_mode", "AccessMode", Str),
    Field("attachment_mode", "AttachmentMode", Str),
    Field("mount_options", "MountOptions", Block(MOUNT_OPTIONS)),
    Field("per_alloc", "PerAlloc", Bool),
];

pub(crate) const CSI_PLUGIN: &[Field] = &[
    Field("id", "ID", Str),
    Field("type", "Type", Str),
    Field("mount_dir", "MountDir", Str),
    Field("stage_publish_base_dir", "StagePublishBaseDir", Str),
    Field("health_timeout", "HealthTimeout", Dur),
];

pub(crate) const ACTION: &[Field] = &[
    Field("command", "Command", Str),
    Field("args", "Args", StrList),
];

const CRON: &[Field] = &[
    Field("start", "Start", Str),
    Field("end", "End", Str),
    Field("timezone", "Timezone", Str),
];

pub(crate) const SCHEDULE: &[Field] = &[Field("cron", "Cron", Block(CRON))];

pub(crate) const SECRET: &[Field] = &[
    Field("provider", "Provider", Str),
    Field("path", "Path", Str),
    Field("config", "Config", FreeForm),
    Field("env", "Env", StrMap),
];

pub(crate) const TASK_SCALING: &[Field] = &[
    Field("min", "Min", Int),
    Field("max", "Max", Int),
    Field("policy", "Policy", FreeForm),
    Field("enabled", "Enabled", Bool),
    Field("type", "Type", Str),
];

const UI_LINK: &[Field] = &[Field("label", "Label", Str), Field("url", "URL", Str)];

pub(crate) const UI: &[Field] = &[
    Field("description", "Description", Str),
    Field("link", "Links", List(UI_LINK)),
];

const MULTIREGION_STRATEGY: &[Field] = &[
    Field("max_parallel", "MaxParallel", Int),
    Field("on_failure", "OnFailure", Str),
];

const MULTIREGION_REGION: &[Field] = &[
    Field("count", "Count", Int),
    Field("datacenters", "Datacenters", StrList),
    Field("node_pool", "NodePool", Str),
    Field("meta", "Meta", StrMap),
];

pub(crate) const MULTIREGION: &[Field] = &[
    Field("strategy", "Strategy", Block(MULTIREGION_STRATEGY)),
    Field("region", "Regions", Labeled(MULTIREGION_REGION, "Name")),
];

/// Decodes one block by its schema into a JSON object of Nomad's field names.
pub(crate) fn decode(
    block: &BlockRef<'_>,
    parent: &Body<'_, '_>,
    path: String,
    fields: &[Field],
    diag: &mut Diag,
) -> Map<String, Json> {
    let mut b = parent.child(block, path);
    let mut out = Map::new();
    for Field(hcl, json, kind) in fields {
        let v = match kind {
            Str => b.string(hcl, diag).map(Json::String),
            Int => b.int(hcl, diag).map(Json::from),
            Bool => b.bool(hcl, diag).map(Json::Bool),
            Dur => b.duration(hcl, diag).map(Json::from),
            StrList => b
                .string_list(hcl, diag)
                .map(|l| Json::Array(l.into_iter().map(Json::String).collect())),
            StrMap => b
                .string_map(hcl, diag)
                .map(|m| Json::Object(m.into_iter().map(|(k, v)| (k, Json::String(v))).collect())),
            Headers => headers(&mut b, hcl, diag),
            Block(schema) => b.single_block(hcl, diag).map(|blk| {
                let p = b.field_path(hcl);
                Json::Object(decode(&blk, &b, p, schema, diag))
            }),
            List(schema) => {
                let items: Vec<Json> = b
                    .blocks(hcl)
                    .into_iter()
                    .enumerate()
                    .map(|(i, blk)| {
                        let p = b.field_path(&format!("{hcl}[{i}]"));
                        Json::Object(decode(&blk, &b, p, schema, diag))
                    })
                    .collect();
                (!items.is_empty()).then_some(Json::Array(items))
            }
            Labeled(schema, label_field) => {
                let list: Vec<Json> = labeled(&mut b, hcl, schema, label_field, diag)
                    .into_iter()
                    .map(|(_, obj)| Json::Object(obj))
                    .collect();
                (!list.is_empty()).then_some(Json::Array(list))
            }
            FreeForm => b.single_block(hcl, diag).map(|blk| {
                let p = b.field_path(hcl);
                Json::Object(b.child(&blk, p).free_form(diag))
            }),
        };
        if let Some(v) = v {
            out.insert((*json).to_string(), v);
        }
    }
    b.finish(&[], &[], diag);
    out
}

fn headers(b: &mut Body<'_, '_>, name: &str, diag: &mut Diag) -> Option<Json> {
    let blk = b.single_block(name, diag)?;
    let inner = b.child(&blk, b.field_path(name));
    let fields = inner.free_form(diag);
    let mut out = Map::new();
    for (k, v) in fields {
        let values = match v {
            Json::Array(items) => items,
            other => vec![other],
        };
        let strings: Vec<Json> = values
            .into_iter()
            .map(|x| match x {
                Json::String(s) => Json::String(s),
                other => Json::String(other.to_string()),
            })
            .collect();
        out.insert(k, Json::Array(strings));
    }
    Some(Json::Object(out))
}

/// Every block `ident` of a body decoded as a list.
pub(crate) fn list(
    b: &mut Body<'_, '_>,
    ident: &str,
    fields: &[Field],
    diag: &mut Diag,
) -> Option<Json> {
    let items: Vec<Json> = b
        .blocks(ident)
        .into_iter()
        .enumerate()
        .map(|(i, blk)| {
            let p = b.field_path(&format!("{ident}[{i}]"));
            Json::Object(decode(&blk, b, p, fields, diag))
        })
        .collect();
    (!items.is_empty()).then_some(Json::Array(items))
}

/// At most one block `ident` of a body, decoded.
pub(crate) fn single(
    b: &mut Body<'_, '_>,
    ident: &str,
    fields: &[Field],
    diag: &mut Diag,
) -> Option<Json> {
    let blk = b.single_block(ident, diag)?;
    let p = b.field_path(ident);
    Some(Json::Object(decode(&blk, b, p, fields, diag)))
}

/// Labeled blocks `ident` of a body, decoded with their label into `label_field`.
pub(crate) fn labeled(
    b: &mut Body<'_, '_>,
    ident: &str,
    fields: &[Field],
    label_field: &str,
    diag: &mut Diag,
) -> Vec<(String, Map<String, Json>)> {
    let mut out = Vec::new();
    for blk in b.blocks(ident) {
        let Some(label) = b.label(&blk, diag) else {
            continue;
        };
        let p = b.field_path(&format!("{ident} {label:?}"));
        let mut obj = decode(&blk, b, p, fields, diag);
        obj.insert(label_field.to_string(), Json::String(label.clone()));
        out.push((label, obj));
    }
    out
}
