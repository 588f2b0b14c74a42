//! Nomad's ACL policy language: `namespace "glob" { policy, capabilities,
//! variables { path "glob" { capabilities } } }`, `node`, `agent`,
//! `operator`, `quota`, `plugin`, `host_volume` and `node_pool` blocks, in
//! HCL or in JSON. A parsed policy has its `policy = "..."` shorthands
//! expanded into capabilities exactly as Nomad expands them, so checking a
//! request only looks capabilities up.
//!
//! This module holds the policy types and what their shorthands mean;
//! reading rules into them is [`parse()`] (in `parse.rs`, over the HCL and
//! JSON syntax of `syntax.rs`).

use std::fmt;

mod parse;
mod syntax;
#[cfg(test)]
mod tests;

pub use self::parse::parse;

/// `policy = "deny"`: denies everything, whatever else grants.
pub const DENY: &str = "deny";
/// `policy = "read"`.
pub const READ: &str = "read";
/// `policy = "list"` (plugins only).
pub const LIST: &str = "list";
/// `policy = "write"`.
pub const WRITE: &str = "write";
/// `policy = "scale"` (namespaces only).
pub const SCALE: &str = "scale";

/// Every namespace capability Nomad knows.
pub const NAMESPACE_CAPABILITIES: &[&str] = &[
    "deny",
    "list-jobs",
    "parse-job",
    "read-job",
    "submit-job",
    "dispatch-job",
    "read-logs",
    "read-fs",
    "alloc-exec",
    "alloc-node-exec",
    "alloc-lifecycle",
    "sentinel-override",
    "csi-register-plugin",
    "csi-write-volume",
    "csi-read-volume",
    "csi-list-volume",
    "csi-mount-volume",
    "host-volume-create",
    "host-volume-register",
    "host-volume-read",
    "host-volume-write",
    "host-volume-delete",
    "list-scaling-policies",
    "read-scaling-policy",
    "read-job-scaling",
    "scale-job",
    "submit-recommendation",
    "register-job",
    "revert-job",
    "deregister-job",
    "purge-job",
    "evaluate-job",
    "plan-job",
    "tag-job-version",
    "stable-job",
    "fail-deployment",
    "pause-deployment",
    "promote-deployment",
    "unblock-deployment",
    "cancel-deployment",
    "set-alloc-health-deployment",
    "gc-allocation",
    "pause-allocation",
    "force-periodic-job",
    "delete-service-registration",
];

/// The capabilities of a variables path.
pub const VARIABLE_CAPABILITIES: &[&str] = &["list", "read", "write", "destroy", "deny"];

/// The capabilities of the `operator` block.
pub const OPERATOR_CAPABILITIES: &[&str] = &[
    "deny",
    "snapshot-save",
    "license-read",
    "keyring-rotate",
    "keyring-read",
    "keyring-delete",
];

const NODE_POOL_CAPABILITIES: &[&str] = &["delete", "deny", "read", "write"];
const HOST_VOLUME_CAPABILITIES: &[&str] = &["deny", "mount-readonly", "mount-readwrite"];

/// Why a policy does not parse: the message names the block or field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError(pub String);

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PolicyError {}

fn err<T>(message: impl Into<String>) -> Result<T, PolicyError> {
    Err(PolicyError(message.into()))
}

/// A parsed, expanded policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// `namespace` blocks, in order.
    pub namespaces: Vec<NamespacePolicy>,
    /// `host_volume` blocks: who may mount which host volumes in a job
    /// they register (`crate::acl::volumes`).
    pub host_volumes: Vec<NamedPolicy>,
    /// `node_pool` blocks, checked on the node pool routes.
    pub node_pools: Vec<NamedPolicy>,
    /// `agent { policy }`.
    pub agent: Option<String>,
    /// `node { policy }`.
    pub node: Option<String>,
    /// `operator { policy, capabilities }`.
    pub operator: Option<NamedPolicy>,
    /// `quota { policy }`.
    pub quota: Option<String>,
    /// `plugin { policy }`.
    pub plugin: Option<String>,
}

/// One `namespace` block, its policy expanded into `capabilities`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespacePolicy {
    /// The namespace or a glob (`*` matches any run of characters).
    pub name: String,
    /// The shorthand as written (`""` when absent).
    pub policy: String,
    /// The capabilities granted: those listed plus the policy's expansion.
    pub capabilities: Vec<String>,
    /// `variables { path "..." { capabilities } }`.
    pub variables: Vec<PathPolicy>,
}

/// One variables `path` block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathPolicy {
    /// The path or a glob.
    pub path: String,
    /// The capabilities, `read` implying `list` as in Nomad.
    pub capabilities: Vec<String>,
}

/// A block with a name (or none), a policy and capabilities.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamedPolicy {
    /// The label (`""` for unlabelled blocks).
    pub name: String,
    /// The shorthand as written.
    pub policy: String,
    /// The capabilities, expanded.
    pub capabilities: Vec<String>,
}

/// Nomad's `expandNamespacePolicy`.
pub fn expand_namespace_policy(policy: &str) -> Vec<&'static str> {
    const READ_CAPS: &[&str] = &[
        "list-jobs",
        "parse-job",
        "read-job",
        "csi-list-volume",
        "csi-read-volume",
        "read-job-scaling",
        "list-scaling-policies",
        "read-scaling-policy",
        "host-volume-read",
    ];
    const WRITE_EXTRA: &[&str] = &[
        "scale-job",
        "submit-job",
        "dispatch-job",
        "read-logs",
        "read-fs",
        "alloc-exec",
        "alloc-lifecycle",
        "csi-mount-volume",
        "csi-write-volume",
        "submit-recommendation",
        "host-volume-create",
    ];
    match policy {
        DENY => vec!["deny"],
        READ => READ_CAPS.to_vec(),
        WRITE => READ_CAPS.iter().chain(WRITE_EXTRA).copied().collect(),
        SCALE => vec![
            "list-scaling-policies",
            "read-scaling-policy",
            "read-job-scaling",
            "scale-job",
            "read-job",
            "submit-recommendation",
        ],
        _ => Vec::new(),
    }
}

/// Nomad's `expandNamespaceCapabilities`: host volume capabilities imply
/// lesser ones.
fn expand_namespace_capabilities(caps: &mut Vec<String>) {
    let mut extra = Vec::new();
    for cap in caps.iter() {
        match cap.as_str() {
            "host-volume-write" => extra.extend([
                "host-volume-register",
                "host-volume-create",
                "host-volume-delete",
                "host-volume-read",
            ]),
            "host-volume-register" => extra.extend(["host-volume-create", "host-volume-read"]),
            "host-volume-create" => extra.push("host-volume-read"),
            _ => {}
        }
    }
    caps.extend(extra.into_iter().map(String::from));
}

/// Nomad's `expandOperatorPolicy`.
fn expand_operator_policy(policy: &str) -> Vec<&'static str> {
    match policy {
        DENY => vec!["deny"],
        READ => vec!["license-read", "keyring-read"],
        WRITE => vec![
            "snapshot-save",
            "license-read",
            "keyring-rotate",
            "keyring-read",
            "keyring-delete",
        ],
        _ => Vec::new(),
    }
}

fn expand_node_pool_policy(policy: &str) -> Vec<&'static str> {
    match policy {
        DENY => vec!["deny"],
        READ => vec!["read"],
        WRITE => vec!["delete", "read", "write"],
        _ => Vec::new(),
    }
}

fn expand_host_volume_policy(policy: &str) -> Vec<&'static str> {
    match policy {
        DENY => vec!["deny"],
        READ => vec!["mount-readonly"],
        WRITE => vec!["mount-readonly", "mount-readwrite"],
        _ => Vec::new(),
    }
}

/// Nomad's `expandVariablesCapabilities`: `deny` alone wins, `read` implies
/// `list`.
fn expand_variables_capabilities(caps: Vec<String>) -> Vec<String> {
    if caps.iter().any(|c| c == DENY) {
        return vec![DENY.to_string()];
    }
    let read = caps.iter().any(|c| c == READ);
    let list = caps.iter().any(|c| c == LIST);
    let mut caps = caps;
    if read && !list {
        caps.push(LIST.to_string());
    }
    caps
}

/// A policy level valid for most blocks (Nomad's `isPolicyValid`).
fn valid_level(policy: &str) -> bool {
    matches!(policy, DENY | READ | WRITE | SCALE)
}

/// Whether `name` is a valid namespace (or glob) in a policy.
fn valid_namespace_glob(name: &str, extra: &[char]) -> bool {
    (1..=128).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '*' || extra.contains(&c))
}
