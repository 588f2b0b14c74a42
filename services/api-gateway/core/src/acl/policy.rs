//! Nomad's ACL policy language: `namespace "glob" { policy, capabilities,
//! variables { path "glob" { capabilities } } }`, `node`, `agent`,
//! `operator`, `quota`, `plugin`, `host_volume` and `node_pool` blocks, in
//! HCL or in JSON. A parsed policy has its `policy = "..."` shorthands
//! expanded into capabilities exactly as Nomad expands them, so checking a
//! request only looks capabilities up.

use std::fmt;

use hcl_edit::expr::Expression;
use hcl_edit::structure::{Body as HclBody, Structure};
use serde_json::Value;

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

/// One block or body of the policy, from HCL or JSON alike.
#[derive(Debug, Default)]
struct Body {
    attrs: Vec<(String, Value)>,
    blocks: Vec<Block>,
}

#[derive(Debug)]
struct Block {
    ident: String,
    label: Option<String>,
    body: Body,
}

/// Blocks that take one label (`namespace "default" { ... }`).
const LABELLED: &[&str] = &["namespace", "host_volume", "node_pool", "path"];
/// Blocks without a label.
const UNLABELLED: &[&str] = &[
    "agent",
    "node",
    "operator",
    "quota",
    "plugin",
    "sentinel",
    "variables",
];

fn hcl_value(expr: &Expression, field: &str) -> Result<Value, PolicyError> {
    Ok(match expr {
        Expression::Null(_) => Value::Null,
        Expression::Bool(b) => Value::Bool(*b.value()),
        Expression::String(s) => Value::String(s.value().clone()),
        Expression::Number(n) => serde_json::to_value(n.value().to_string())
            .map_err(|e| PolicyError(format!("{field}: {e}")))?,
        Expression::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| hcl_value(item, field))
                .collect::<Result<_, _>>()?,
        ),
        _ => {
            return err(format!(
                "{field}: only literal strings, numbers, booleans and lists are allowed"
            ));
        }
    })
}

fn from_hcl(body: &HclBody) -> Result<Body, PolicyError> {
    let mut out = Body::default();
    for structure in body.iter() {
        match structure {
            Structure::Attribute(a) => {
                let key = a.key.as_str().to_string();
                let value = hcl_value(&a.value, &key)?;
                out.attrs.push((key, value));
            }
            Structure::Block(b) => {
                let ident = b.ident.as_str().to_string();
                let label = match b.labels.as_slice() {
                    [] => None,
                    [one] => Some(one.as_str().to_string()),
                    _ => return err(format!("{ident}: a block takes at most one label")),
                };
                out.blocks.push(Block {
                    ident,
                    label,
                    body: from_hcl(&b.body)?,
                });
            }
        }
    }
    Ok(out)
}

/// HCL's JSON form: a labelled block is `"namespace": {"name": {...}}` (or
/// a list of such objects), an unlabelled one `"node": {...}` (or a list).
fn from_json(object: &serde_json::Map<String, Value>, at: &str) -> Result<Body, PolicyError> {
    let mut out = Body::default();
    for (key, value) in object {
        let path = if at.is_empty() {
            key.clone()
        } else {
            format!("{at}.{key}")
        };
        let items: Vec<&Value> = match value {
            Value::Array(items)
                if (LABELLED.contains(&key.as_str()) || UNLABELLED.contains(&key.as_str()))
                    && items.iter().all(Value::is_object) =>
            {
                items.iter().collect()
            }
            other => vec![other],
        };
        if LABELLED.contains(&key.as_str()) {
            for item in items {
                let Value::Object(labels) = item else {
                    return err(format!("{path}: must be an object of named blocks"));
                };
                for (label, body) in labels {
                    let Value::Object(body) = body else {
                        return err(format!("{path}.{label}: must be an object"));
                    };
                    out.blocks.push(Block {
                        ident: key.clone(),
                        label: Some(label.clone()),
                        body: from_json(body, &format!("{path}.{label}"))?,
                    });
                }
            }
        } else if UNLABELLED.contains(&key.as_str()) {
            for item in items {
                let Value::Object(body) = item else {
                    return err(format!("{path}: must be an object"));
                };
                out.blocks.push(Block {
                    ident: key.clone(),
                    label: None,
                    body: from_json(body, &path)?,
                });
            }
        } else {
            out.attrs.push((key.clone(), value.clone()));
        }
    }
    Ok(out)
}

/// Reads the attributes of one block body: `policy` and `capabilities`
/// (and only those, unless `blocks` names allowed nested blocks).
fn read_level_caps(
    body: &Body,
    what: &str,
    allowed_blocks: &[&str],
) -> Result<(String, Vec<String>), PolicyError> {
    let mut policy = String::new();
    let mut caps = Vec::new();
    for (key, value) in &body.attrs {
        match key.as_str() {
            "policy" => match value {
                Value::String(s) => policy = s.clone(),
                _ => return err(format!("{what}: policy must be a string")),
            },
            "capabilities" => match value {
                Value::Array(items) => {
                    for item in items {
                        match item {
                            Value::String(s) => caps.push(s.clone()),
                            _ => return err(format!("{what}: capabilities must be strings")),
                        }
                    }
                }
                _ => return err(format!("{what}: capabilities must be a list of strings")),
            },
            other => {
                return err(format!(
                    "Invalid or duplicate policy keys: {other} in {what}"
                ));
            }
        }
    }
    for block in &body.blocks {
        if !allowed_blocks.contains(&block.ident.as_str()) {
            return err(format!(
                "Invalid or duplicate policy keys: {} in {what}",
                block.ident
            ));
        }
    }
    Ok((policy, caps))
}

fn check_caps(caps: &[String], valid: &[&str], what: &str) -> Result<(), PolicyError> {
    for cap in caps {
        if !valid.contains(&cap.as_str()) {
            return err(format!("Invalid {what} capability '{cap}'"));
        }
    }
    Ok(())
}

fn single(
    slot: &mut Option<String>,
    block: &Block,
    valid: fn(&str) -> bool,
) -> Result<(), PolicyError> {
    let what = &block.ident;
    if slot.is_some() {
        return err(format!("Invalid or duplicate policy keys: {what}"));
    }
    let (policy, caps) = read_level_caps(&block.body, what, &[])?;
    if !caps.is_empty() {
        return err(format!(
            "Invalid or duplicate policy keys: capabilities in {what}"
        ));
    }
    if !valid(&policy) {
        return err(format!("Invalid {what} policy: {policy:?}"));
    }
    *slot = Some(policy);
    Ok(())
}

fn namespace_block(block: &Block) -> Result<NamespacePolicy, PolicyError> {
    let name = block.label.clone().unwrap_or_default();
    if !valid_namespace_glob(&name, &[]) {
        return err(format!("Invalid namespace name: {name:?}"));
    }
    let what = format!("namespace {name:?}");
    let (policy, mut capabilities) = read_level_caps(&block.body, &what, &["variables"])?;
    if !policy.is_empty() && !valid_level(&policy) {
        return err(format!("Invalid namespace policy: {policy:?} in {what}"));
    }
    check_caps(&capabilities, NAMESPACE_CAPABILITIES, "namespace")?;
    if !policy.is_empty() {
        capabilities.extend(
            expand_namespace_policy(&policy)
                .into_iter()
                .map(String::from),
        );
    }
    expand_namespace_capabilities(&mut capabilities);
    let mut variables = Vec::new();
    let mut seen_variables = false;
    for vars in block.body.blocks.iter().filter(|b| b.ident == "variables") {
        if seen_variables {
            return err(format!(
                "Invalid or duplicate policy keys: variables in {what}"
            ));
        }
        seen_variables = true;
        if !vars.body.attrs.is_empty() {
            return err(format!(
                "Invalid or duplicate policy keys: {} in the variables of {what}",
                vars.body.attrs[0].0
            ));
        }
        for path in &vars.body.blocks {
            if path.ident != "path" {
                return err(format!(
                    "Invalid or duplicate policy keys: {} in the variables of {what}",
                    path.ident
                ));
            }
            let spec = path.label.clone().unwrap_or_default();
            if spec.is_empty() {
                return err(format!("Invalid missing variable path in namespace {name}"));
            }
            if spec.starts_with('/') {
                return err(format!(
                    "Invalid variable path {spec:?} in namespace {name}: cannot start with a leading '/'"
                ));
            }
            let (level, caps) =
                read_level_caps(&path.body, &format!("variable path {spec:?}"), &[])?;
            if !level.is_empty() {
                return err(format!(
                    "Invalid or duplicate policy keys: policy in variable path {spec:?}"
                ));
            }
            for cap in &caps {
                if !VARIABLE_CAPABILITIES.contains(&cap.as_str()) {
                    return err(format!(
                        "Invalid variable capability '{cap}' in namespace {name}"
                    ));
                }
            }
            variables.push(PathPolicy {
                path: spec,
                capabilities: expand_variables_capabilities(caps),
            });
        }
        if variables.is_empty() {
            return err(format!(
                "Invalid variable policy: no variable paths in namespace {name}"
            ));
        }
    }
    Ok(NamespacePolicy {
        name,
        policy,
        capabilities,
        variables,
    })
}

fn named_block(
    block: &Block,
    valid_name: fn(&str) -> bool,
    valid_caps: &[&str],
    expand: fn(&str) -> Vec<&'static str>,
) -> Result<NamedPolicy, PolicyError> {
    let name = block.label.clone().unwrap_or_default();
    let what = &block.ident;
    if block.label.is_some() && !valid_name(&name) {
        return err(format!("Invalid {what} name: {name:?}"));
    }
    let (policy, mut capabilities) = read_level_caps(&block.body, what, &[])?;
    if !policy.is_empty() && !valid_level(&policy) {
        return err(format!("Invalid {what} policy: {policy:?}"));
    }
    check_caps(&capabilities, valid_caps, what)?;
    capabilities.extend(expand(&policy).into_iter().map(String::from));
    Ok(NamedPolicy {
        name,
        policy,
        capabilities,
    })
}

/// `text` with a line break after every `{` and before every `}` outside
/// strings and comments.
fn spread_braces(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => {
                    if let Some(next) = chars.next() {
                        out.push(next);
                    }
                }
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '#' => {
                out.push(c);
                for next in chars.by_ref() {
                    out.push(next);
                    if next == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                out.push(c);
                for next in chars.by_ref() {
                    out.push(next);
                    if next == '\n' {
                        break;
                    }
                }
            }
            '{' => out.push_str("{\n"),
            '}' => out.push_str("\n}\n"),
            _ => out.push(c),
        }
    }
    out
}

/// Parses a policy's rules, HCL or JSON (a document starting with `{`).
/// Errors are worded as Nomad's and name the block at fault. Empty rules
/// (exactly `""`) are a policy granting nothing, as Nomad accepts them.
pub fn parse(rules: &str) -> Result<Policy, PolicyError> {
    if rules.is_empty() {
        return Ok(Policy::default());
    }
    let body = if rules.trim_start().starts_with('{') {
        let value: Value = serde_json::from_str(rules)
            .map_err(|e| PolicyError(format!("Failed to parse ACL Policy: {e}")))?;
        let Value::Object(object) = value else {
            return err("Failed to parse ACL Policy: the JSON document must be an object");
        };
        from_json(&object, "")?
    } else {
        // HCL 1 (Nomad's) takes blocks on one line (`variables { path "a"
        // { ... } }`); HCL 2 wants them spread over lines, so a policy
        // that does not parse is tried again with its braces on lines of
        // their own. The error reported is the first one's.
        let parsed = match hcl_edit::parser::parse_body(rules) {
            Ok(parsed) => parsed,
            Err(e) => hcl_edit::parser::parse_body(&spread_braces(rules)).map_err(|_| {
                PolicyError(format!(
                    "Failed to parse ACL Policy: line {}, column {}: {}",
                    e.location().line(),
                    e.location().column(),
                    e.message()
                ))
            })?,
        };
        from_hcl(&parsed)?
    };
    if let Some((key, _)) = body.attrs.first() {
        return err(format!("Invalid or duplicate policy keys: {key}"));
    }
    let mut policy = Policy::default();
    for block in &body.blocks {
        let labelled = LABELLED.contains(&block.ident.as_str());
        if labelled && block.label.is_none() {
            return err(format!("{}: the block needs a name", block.ident));
        }
        if !labelled && block.label.is_some() {
            return err(format!("{}: the block takes no name", block.ident));
        }
        match block.ident.as_str() {
            "namespace" => policy.namespaces.push(namespace_block(block)?),
            "host_volume" => policy.host_volumes.push(named_block(
                block,
                |n| valid_namespace_glob(n, &[]),
                HOST_VOLUME_CAPABILITIES,
                expand_host_volume_policy,
            )?),
            "node_pool" => policy.node_pools.push(named_block(
                block,
                |n| valid_namespace_glob(n, &['_']),
                NODE_POOL_CAPABILITIES,
                expand_node_pool_policy,
            )?),
            "agent" => single(&mut policy.agent, block, valid_level)?,
            "node" => single(&mut policy.node, block, valid_level)?,
            "quota" => single(&mut policy.quota, block, valid_level)?,
            "plugin" => single(&mut policy.plugin, block, |p| {
                matches!(p, DENY | READ | LIST | WRITE)
            })?,
            "operator" => {
                if policy.operator.is_some() {
                    return err("Invalid or duplicate policy keys: operator");
                }
                policy.operator = Some(named_block(
                    block,
                    |_| true,
                    OPERATOR_CAPABILITIES,
                    expand_operator_policy,
                )?);
            }
            other => return err(format!("Invalid or duplicate policy keys: {other}")),
        }
    }
    if policy == Policy::default() {
        return err(format!("Invalid policy: {}", rules.trim()));
    }
    Ok(policy)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(ns: &NamespacePolicy) -> Vec<&str> {
        let mut c: Vec<&str> = ns.capabilities.iter().map(String::as_str).collect();
        c.sort_unstable();
        c
    }

    #[test]
    fn hcl_policies_expand_like_nomad() {
        let p = parse(
            r#"
            namespace "default" {
              policy = "read"
            }
            namespace "prod-*" {
              policy = "write"
              capabilities = ["alloc-node-exec"]
              variables {
                path "app/*" { capabilities = ["read"] }
              }
            }
            node { policy = "read" }
            agent { policy = "write" }
            operator { policy = "read" }
            quota { policy = "read" }
            plugin { policy = "list" }
            host_volume "scratch" { policy = "write" }
            "#,
        )
        .unwrap();
        assert_eq!(p.namespaces.len(), 2);
        assert_eq!(
            caps(&p.namespaces[0]),
            vec![
                "csi-list-volume",
                "csi-read-volume",
                "host-volume-read",
                "list-jobs",
                "list-scaling-policies",
                "parse-job",
                "read-job",
                "read-job-scaling",
                "read-scaling-policy",
            ]
        );
        let prod = &p.namespaces[1];
        assert_eq!(prod.name, "prod-*");
        for cap in [
            "alloc-node-exec",
            "submit-job",
            "read-logs",
            "host-volume-read",
        ] {
            assert!(prod.capabilities.iter().any(|c| c == cap), "{cap}");
        }
        assert_eq!(prod.variables[0].path, "app/*");
        assert_eq!(prod.variables[0].capabilities, vec!["read", "list"]);
        assert_eq!(p.node.as_deref(), Some("read"));
        assert_eq!(p.agent.as_deref(), Some("write"));
        assert_eq!(
            p.operator.unwrap().capabilities,
            vec!["license-read", "keyring-read"]
        );
        assert_eq!(p.plugin.as_deref(), Some("list"));
        assert_eq!(
            p.host_volumes[0].capabilities,
            vec!["mount-readonly", "mount-readwrite"]
        );
    }

    #[test]
    fn scale_and_deny_expand_like_nomad() {
        let p = parse(r#"namespace "a" { policy = "scale" }  namespace "b" { policy = "deny" }"#)
            .unwrap();
        assert_eq!(
            caps(&p.namespaces[0]),
            vec![
                "list-scaling-policies",
                "read-job",
                "read-job-scaling",
                "read-scaling-policy",
                "scale-job",
                "submit-recommendation",
            ]
        );
        assert_eq!(caps(&p.namespaces[1]), vec!["deny"]);
        let hv = parse(r#"namespace "c" { capabilities = ["host-volume-write"] }"#).unwrap();
        assert_eq!(
            caps(&hv.namespaces[0]),
            vec![
                "host-volume-create",
                "host-volume-delete",
                "host-volume-read",
                "host-volume-register",
                "host-volume-write",
            ]
        );
        let denied = parse(
            r#"namespace "d" { variables { path "*" { capabilities = ["read", "deny"] } } }"#,
        )
        .unwrap();
        assert_eq!(denied.namespaces[0].variables[0].capabilities, vec!["deny"]);
    }

    #[test]
    fn json_policies_parse_like_hcl() {
        let json = parse(
            r#"{"namespace": {"default": {"policy": "write",
                 "variables": {"path": {"x/*": {"capabilities": ["write"]}}}}},
                "node": {"policy": "read"}}"#,
        )
        .unwrap();
        let hcl = parse(
            r#"namespace "default" {
                 policy = "write"
                 variables { path "x/*" { capabilities = ["write"] } }
               }
               node { policy = "read" }"#,
        )
        .unwrap();
        assert_eq!(json, hcl);
        let list =
            parse(r#"{"namespace": [{"a": {"policy": "read"}}, {"b": {"policy": "deny"}}]}"#)
                .unwrap();
        assert_eq!(list.namespaces.len(), 2);
    }

    #[test]
    fn empty_rules_grant_nothing() {
        assert_eq!(parse("").unwrap(), Policy::default());
    }

    #[test]
    fn one_line_blocks_parse_as_in_nomad() {
        let p = parse(r#"namespace "a" { policy = "read" } node { policy = "write" } # x { y }"#)
            .unwrap();
        assert_eq!(p.namespaces[0].name, "a");
        assert_eq!(p.node.as_deref(), Some("write"));
        let braces = parse(r#"namespace "a{b" { policy = "read" }"#).unwrap_err();
        assert!(braces.0.contains("Invalid namespace name"), "{braces}");
    }

    #[test]
    fn bad_policies_name_the_problem() {
        let cases = [
            (" \n", "Invalid policy"),
            (
                r#"namespace "x" { policy = "nope" }"#,
                "Invalid namespace policy",
            ),
            (
                r#"namespace "x" { capabilities = ["fly"] }"#,
                "Invalid namespace capability 'fly'",
            ),
            (
                r#"namespace "bad name" { policy = "read" }"#,
                "Invalid namespace name",
            ),
            (r#"node { policy = "list" }"#, "Invalid node policy"),
            (
                r#"bogus { policy = "read" }"#,
                "Invalid or duplicate policy keys: bogus",
            ),
            (r#"namespace "x" { polcy = "read" }"#, "polcy"),
            (r#"namespace "x" { variables { } }"#, "no variable paths"),
            (
                r#"namespace "x" { variables { path "/a" { capabilities = ["read"] } } }"#,
                "leading '/'",
            ),
            (
                r#"namespace "x" { variables { path "a" { capabilities = ["fly"] } } }"#,
                "Invalid variable capability 'fly'",
            ),
            ("namespace \"x\" {", "Failed to parse ACL Policy"),
            ("{\"namespace\": ", "Failed to parse ACL Policy"),
            (
                r#"node { policy = "read" } node { policy = "write" }"#,
                "duplicate",
            ),
            (
                r#"operator { capabilities = ["fly"] }"#,
                "Invalid operator capability",
            ),
        ];
        for (rules, want) in cases {
            let e = parse(rules).unwrap_err();
            assert!(e.0.contains(want), "{rules}: {e}");
        }
    }
}
