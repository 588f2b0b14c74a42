//! Policy rules (HCL or JSON) into a [`Policy`]: one step per block kind,
//! each checking its block as Nomad does and expanding its `policy`
//! shorthand into capabilities.

use serde_json::Value;

use super::syntax::{self, Block, Body, LABELLED};
use super::{
    DENY, HOST_VOLUME_CAPABILITIES, LIST, NAMESPACE_CAPABILITIES, NODE_POOL_CAPABILITIES,
    NamedPolicy, NamespacePolicy, OPERATOR_CAPABILITIES, PathPolicy, Policy, PolicyError, READ,
    VARIABLE_CAPABILITIES, WRITE, err, expand_host_volume_policy, expand_namespace_capabilities,
    expand_namespace_policy, expand_node_pool_policy, expand_operator_policy,
    expand_variables_capabilities, valid_level, valid_namespace_glob,
};

/// Parses a policy's rules, HCL or JSON (a document starting with `{`).
/// Errors are worded as Nomad's and name the block at fault. Empty rules
/// (exactly `""`) are a policy granting nothing, as Nomad accepts them.
pub fn parse(rules: &str) -> Result<Policy, PolicyError> {
    if rules.is_empty() {
        return Ok(Policy::default());
    }
    let body = syntax::read(rules)?;
    if let Some((key, _)) = body.attrs.first() {
        return err(format!("Invalid or duplicate policy keys: {key}"));
    }
    let mut policy = Policy::default();
    for block in &body.blocks {
        check_label(block)?;
        add_block(&mut policy, block)?;
    }
    if policy == Policy::default() {
        return err(format!("Invalid policy: {}", rules.trim()));
    }
    Ok(policy)
}

/// A top-level block is named exactly when its kind takes a name.
fn check_label(block: &Block) -> Result<(), PolicyError> {
    let labelled = LABELLED.contains(&block.ident.as_str());
    if labelled && block.label.is_none() {
        return err(format!("{}: the block needs a name", block.ident));
    }
    if !labelled && block.label.is_some() {
        return err(format!("{}: the block takes no name", block.ident));
    }
    Ok(())
}

/// Adds one top-level block to `policy`, by its kind.
fn add_block(policy: &mut Policy, block: &Block) -> Result<(), PolicyError> {
    match block.ident.as_str() {
        "namespace" => policy.namespaces.push(namespace_block(block)?),
        "host_volume" => policy.host_volumes.push(host_volume_block(block)?),
        "node_pool" => policy.node_pools.push(node_pool_block(block)?),
        "agent" => single(&mut policy.agent, block, valid_level)?,
        "node" => single(&mut policy.node, block, valid_level)?,
        "quota" => single(&mut policy.quota, block, valid_level)?,
        "plugin" => single(&mut policy.plugin, block, valid_plugin_level)?,
        "operator" => operator_block(&mut policy.operator, block)?,
        other => return err(format!("Invalid or duplicate policy keys: {other}")),
    }
    Ok(())
}

/// `namespace "glob" { policy, capabilities, variables { ... } }`.
fn namespace_block(block: &Block) -> Result<NamespacePolicy, PolicyError> {
    let name = block.label.clone().unwrap_or_default();
    if !valid_namespace_glob(&name, &[]) {
        return err(format!("Invalid namespace name: {name:?}"));
    }
    let what = format!("namespace {name:?}");
    let (policy, capabilities) = namespace_capabilities(&block.body, &what)?;
    let variables = namespace_variables(&block.body, &name, &what)?;
    Ok(NamespacePolicy {
        name,
        policy,
        capabilities,
        variables,
    })
}

/// A namespace's policy and its capabilities: those listed, the policy's
/// expansion and what host volume capabilities imply.
fn namespace_capabilities(body: &Body, what: &str) -> Result<(String, Vec<String>), PolicyError> {
    let (policy, mut capabilities) = read_level_caps(body, what, &["variables"])?;
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
    Ok((policy, capabilities))
}

/// The paths of a namespace's `variables` block (at most one; none when
/// it has no such block).
fn namespace_variables(
    body: &Body,
    name: &str,
    what: &str,
) -> Result<Vec<PathPolicy>, PolicyError> {
    let mut blocks = body.blocks.iter().filter(|b| b.ident == "variables");
    let Some(first) = blocks.next() else {
        return Ok(Vec::new());
    };
    let variables = variable_paths(&first.body, name, what)?;
    if blocks.next().is_some() {
        return err(format!(
            "Invalid or duplicate policy keys: variables in {what}"
        ));
    }
    Ok(variables)
}

/// `variables { path "glob" { ... } ... }`: only `path` blocks, at least one.
fn variable_paths(vars: &Body, name: &str, what: &str) -> Result<Vec<PathPolicy>, PolicyError> {
    if let Some((key, _)) = vars.attrs.first() {
        return err(format!(
            "Invalid or duplicate policy keys: {key} in the variables of {what}"
        ));
    }
    let variables = vars
        .blocks
        .iter()
        .map(|path| variable_path(path, name, what))
        .collect::<Result<Vec<_>, _>>()?;
    if variables.is_empty() {
        return err(format!(
            "Invalid variable policy: no variable paths in namespace {name}"
        ));
    }
    Ok(variables)
}

/// `path "glob" { capabilities }`, `read` implying `list`.
fn variable_path(path: &Block, name: &str, what: &str) -> Result<PathPolicy, PolicyError> {
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
    let (level, caps) = read_level_caps(&path.body, &format!("variable path {spec:?}"), &[])?;
    if !level.is_empty() {
        return err(format!(
            "Invalid or duplicate policy keys: policy in variable path {spec:?}"
        ));
    }
    if let Some(cap) = caps
        .iter()
        .find(|cap| !VARIABLE_CAPABILITIES.contains(&cap.as_str()))
    {
        return err(format!(
            "Invalid variable capability '{cap}' in namespace {name}"
        ));
    }
    Ok(PathPolicy {
        path: spec,
        capabilities: expand_variables_capabilities(caps),
    })
}

/// `host_volume "glob" { policy, capabilities }`.
fn host_volume_block(block: &Block) -> Result<NamedPolicy, PolicyError> {
    named_block(
        block,
        |n| valid_namespace_glob(n, &[]),
        HOST_VOLUME_CAPABILITIES,
        expand_host_volume_policy,
    )
}

/// `node_pool "glob" { policy, capabilities }`: pool names may hold `_`.
fn node_pool_block(block: &Block) -> Result<NamedPolicy, PolicyError> {
    named_block(
        block,
        |n| valid_namespace_glob(n, &['_']),
        NODE_POOL_CAPABILITIES,
        expand_node_pool_policy,
    )
}

/// `operator { policy, capabilities }`, at most once.
fn operator_block(slot: &mut Option<NamedPolicy>, block: &Block) -> Result<(), PolicyError> {
    if slot.is_some() {
        return err("Invalid or duplicate policy keys: operator");
    }
    *slot = Some(named_block(
        block,
        |_| true,
        OPERATOR_CAPABILITIES,
        expand_operator_policy,
    )?);
    Ok(())
}

/// The levels a `plugin` block takes: `list` besides the usual ones.
fn valid_plugin_level(policy: &str) -> bool {
    matches!(policy, DENY | READ | LIST | WRITE)
}

/// Reads the attributes of one block body: `policy` and `capabilities`
/// (and only those), with no nested blocks but those `allowed_blocks`
/// names.
fn read_level_caps(
    body: &Body,
    what: &str,
    allowed_blocks: &[&str],
) -> Result<(String, Vec<String>), PolicyError> {
    let mut policy = String::new();
    let mut caps = Vec::new();
    for (key, value) in &body.attrs {
        match key.as_str() {
            "policy" => policy = policy_attr(value, what)?,
            "capabilities" => capabilities_attr(value, what, &mut caps)?,
            other => {
                return err(format!(
                    "Invalid or duplicate policy keys: {other} in {what}"
                ));
            }
        }
    }
    if let Some(block) = body
        .blocks
        .iter()
        .find(|b| !allowed_blocks.contains(&b.ident.as_str()))
    {
        return err(format!(
            "Invalid or duplicate policy keys: {} in {what}",
            block.ident
        ));
    }
    Ok((policy, caps))
}

/// `policy = "level"`.
fn policy_attr(value: &Value, what: &str) -> Result<String, PolicyError> {
    match value {
        Value::String(s) => Ok(s.clone()),
        _ => err(format!("{what}: policy must be a string")),
    }
}

/// `capabilities = ["...", ...]`, appended to `caps`.
fn capabilities_attr(value: &Value, what: &str, caps: &mut Vec<String>) -> Result<(), PolicyError> {
    let Value::Array(items) = value else {
        return err(format!("{what}: capabilities must be a list of strings"));
    };
    for item in items {
        match item {
            Value::String(s) => caps.push(s.clone()),
            _ => return err(format!("{what}: capabilities must be strings")),
        }
    }
    Ok(())
}

/// Every capability in `caps` is one of `valid`.
fn check_caps(caps: &[String], valid: &[&str], what: &str) -> Result<(), PolicyError> {
    for cap in caps {
        if !valid.contains(&cap.as_str()) {
            return err(format!("Invalid {what} capability '{cap}'"));
        }
    }
    Ok(())
}

/// A block holding only `policy` (`agent`, `node`, `quota`, `plugin`),
/// at most once, its level one `valid` takes.
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

/// A block with an optional name, a policy and capabilities: the name is
/// one `valid_name` takes, the capabilities ones of `valid_caps`, and the
/// policy is expanded with `expand`.
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
