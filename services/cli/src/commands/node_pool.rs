//! `node pool list|info|apply|delete|nodes`: node pools as objects, through
//! Nomad's `/v1/node/pools` and `/v1/node/pool/<name>` (Nomad's HTTP API
//! only), printed as Nomad prints them.

use serde_json::Value;

use crate::api::Api;
use crate::args::NodePoolCommand;
use crate::backend::http::decode;
use crate::backend::http::json::J;
use crate::backend::{Method, NomadCall, segment};
use crate::error::CliError;
use crate::format::{FormatArgs, kv, table};
use crate::hcl_spec::{self, FREE_FORM, Schema};
use crate::ui::Ui;

use super::text;
use crate::views;

type Result<T> = std::result::Result<T, CliError>;

static SCHEDULER_CONFIG: Schema = Schema {
    what: "scheduler_config",
    fields: &[
        ("scheduler_algorithm", "SchedulerAlgorithm", None),
        (
            "memory_oversubscription_enabled",
            "MemoryOversubscriptionEnabled",
            None,
        ),
    ],
};

/// A node pool specification: `node_pool "<name>" { … }`.
static NODE_POOL: Schema = Schema {
    what: "node_pool",
    fields: &[
        ("description", "Description", None),
        ("meta", "Meta", Some(&FREE_FORM)),
        (
            "scheduler_config",
            "SchedulerConfiguration",
            Some(&SCHEDULER_CONFIG),
        ),
        ("node_identity_ttl", "NodeIdentityTTL", None),
    ],
};

pub(super) async fn dispatch(api: &Api, ui: &mut Ui, cmd: NodePoolCommand) -> Result<u8> {
    match cmd {
        NodePoolCommand::List { format } => {
            let pools = pools(api, "").await?;
            if format.wanted() {
                ui.output(format.render(&Value::Array(pools))?);
            } else {
                ui.output(pool_list(&pools));
            }
            Ok(0)
        }
        NodePoolCommand::Info { format, name } => {
            let pool = by_prefix(api, &name).await?;
            if format.wanted() {
                ui.output(format.render(&pool)?);
            } else {
                ui.output(pool_page(&pool));
            }
            Ok(0)
        }
        NodePoolCommand::Apply { json, file } => apply(api, ui, json, &file).await,
        NodePoolCommand::Delete { name } => {
            let call = NomadCall::write(
                Method::Delete,
                format!("/v1/node/pool/{}", segment(&name)),
                None,
            );
            api.nomad("Error deleting node pool", call).await?;
            ui.output(format!("Successfully deleted node pool {name:?}!"));
            Ok(0)
        }
        NodePoolCommand::Nodes { format, name } => nodes(api, ui, &name, &format).await,
    }
}

async fn pools(api: &Api, prefix: &str) -> Result<Vec<Value>> {
    let call = NomadCall::get("/v1/node/pools").param("prefix", prefix);
    let list = api
        .nomad_get("Error querying node pools", call)
        .await
        .map_err(|e| super::missing_endpoint(e, "GET /v1/node/pools", "node pools"))?;
    Ok(list.as_array().cloned().unwrap_or_default())
}

/// The `Name  Description` table.
pub fn pool_list(pools: &[Value]) -> String {
    let mut rows = vec![vec!["Name".to_string(), "Description".to_string()]];
    rows.extend(
        pools
            .iter()
            .map(|p| vec![text(p, "Name"), text(p, "Description")]),
    );
    table(rows)
}

/// The pool named `prefix`, or the one pool whose name starts with it.
async fn by_prefix(api: &Api, prefix: &str) -> Result<Value> {
    let matches = pools(api, prefix).await?;
    match matches.as_slice() {
        [] => Err(CliError::NotFound(format!(
            "Error retrieving node pool: No node pool with prefix {prefix:?} found"
        ))),
        [one] => Ok(one.clone()),
        many => many
            .iter()
            .find(|p| text(p, "Name") == prefix)
            .cloned()
            .ok_or_else(|| {
                CliError::Ambiguous(format!(
                    "Prefix matched multiple node pools\n\n{}",
                    pool_list(many)
                ))
            }),
    }
}

/// `node pool info`'s page.
pub fn pool_page(pool: &Value) -> String {
    let mut basic = vec![
        ("Name", text(pool, "Name")),
        ("Description", text(pool, "Description")),
    ];
    if let Some(ttl) = pool
        .get("NodeIdentityTTL")
        .and_then(Value::as_i64)
        .filter(|t| *t > 0)
    {
        let d = std::time::Duration::from_nanos(u64::try_from(ttl).unwrap_or(0));
        basic.push((
            "Node Identity TTL",
            humantime::format_duration(d).to_string(),
        ));
    }
    let mut out = kv(&basic);
    out.push_str("\n\nMetadata\n");
    match pool.get("Meta").and_then(Value::as_object) {
        Some(meta) if !meta.is_empty() => {
            let pairs: Vec<(&str, String)> = meta
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or_default().to_string()))
                .collect();
            out.push_str(&kv(&pairs));
        }
        _ => out.push_str("No metadata"),
    }
    out.push_str("\n\nScheduler Configuration\n");
    match pool.get("SchedulerConfiguration").filter(|c| c.is_object()) {
        Some(config) => {
            let mut pairs = vec![("Scheduler Algorithm", text(config, "SchedulerAlgorithm"))];
            if let Some(b) = config
                .get("MemoryOversubscriptionEnabled")
                .and_then(Value::as_bool)
            {
                pairs.push(("Memory Oversubscription Enabled", b.to_string()));
            }
            out.push_str(&kv(&pairs));
        }
        None => out.push_str("No scheduler configuration"),
    }
    out
}

async fn apply(api: &Api, ui: &mut Ui, json_input: bool, file: &str) -> Result<u8> {
    let body = super::read_input(file)?;
    let spec = if json_input {
        serde_json::from_str::<Value>(&body)
            .map_err(|e| CliError::Usage(format!("Failed to parse input content: {e}")))?
    } else {
        hcl_spec::labelled(&body, "node_pool", "Name", &NODE_POOL)
            .map_err(|e| CliError::Usage(format!("Failed to parse input content: {e}")))?
    };
    let name = text(&spec, "Name");
    if name.is_empty() {
        return Err(CliError::Usage(
            "Failed to parse input content: the node pool has no name".into(),
        ));
    }
    let call = NomadCall::write(
        Method::Put,
        format!("/v1/node/pool/{}", segment(&name)),
        Some(spec),
    );
    api.nomad("Error applying node pool", call).await?;
    ui.output(format!("Successfully applied node pool {name:?}!"));
    Ok(0)
}

async fn nodes(api: &Api, ui: &mut Ui, name: &str, format: &FormatArgs) -> Result<u8> {
    let pool = by_prefix(api, name).await?;
    let call = NomadCall::get(format!(
        "/v1/node/pool/{}/nodes",
        segment(&text(&pool, "Name"))
    ));
    let list = api.nomad_get("Error querying nodes", call).await?;
    let stubs = list.as_array().cloned().unwrap_or_default();
    if stubs.is_empty() {
        ui.output("No nodes");
        return Ok(0);
    }
    if format.wanted() {
        ui.output(format.render(&Value::Array(stubs))?);
        return Ok(0);
    }
    let nodes: Vec<_> = stubs.iter().map(|n| decode::node(J(n))).collect();
    ui.output(views::node_list(&nodes));
    Ok(0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pools_print_as_nomad_prints_them() {
        assert_eq!(
            pool_list(&[json!({"Name": "all", "Description": "Every node"})]),
            "Name  Description\nall   Every node"
        );
        let page = pool_page(&json!({"Name": "prod", "Description": "", "Meta": null}));
        assert!(
            page.ends_with(
                "Metadata\nNo metadata\n\nScheduler Configuration\nNo scheduler configuration"
            ),
            "{page}"
        );
        let page = pool_page(&json!({
            "Name": "prod", "Description": "Production", "Meta": {"env": "prod"},
            "SchedulerConfiguration": {"SchedulerAlgorithm": "spread", "MemoryOversubscriptionEnabled": true},
        }));
        assert!(page.contains("Metadata\nenv = prod"), "{page}");
        assert!(
            page.contains(
                "Scheduler Algorithm             = spread\nMemory Oversubscription Enabled = true"
            ),
            "{page}"
        );
    }

    #[test]
    fn specifications_read_as_nomads_node_pool() {
        let v = hcl_spec::labelled(
            "node_pool \"prod\" {\n  description = \"Production\"\n  meta {\n    env = \"prod\"\n  }\n  scheduler_config {\n    scheduler_algorithm = \"spread\"\n  }\n}\n",
            "node_pool",
            "Name",
            &NODE_POOL,
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"Name": "prod", "Description": "Production", "Meta": {"env": "prod"},
                   "SchedulerConfiguration": {"SchedulerAlgorithm": "spread"}})
        );
    }
}
