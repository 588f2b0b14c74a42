//! `namespace list|status|apply|delete`: namespaces as objects, through
//! Nomad's `/v1/namespaces` and `/v1/namespace/<name>` (Nomad's HTTP API
//! only), printed as Nomad prints them.

use serde_json::{Value, json};

use crate::api::Api;
use crate::args::NamespaceCommand;
use crate::backend::{Method, NomadCall, segment};
use crate::error::CliError;
use crate::format::{FormatArgs, kv, table};
use crate::hcl_spec::{self, FREE_FORM, Schema};
use crate::ui::Ui;

use super::text;

type Result<T> = std::result::Result<T, CliError>;

static CAPABILITIES: Schema = Schema {
    what: "capabilities",
    fields: &[
        ("enabled_task_drivers", "EnabledTaskDrivers", None),
        ("disabled_task_drivers", "DisabledTaskDrivers", None),
        ("enabled_network_modes", "EnabledNetworkModes", None),
        ("disabled_network_modes", "DisabledNetworkModes", None),
    ],
};

static POOL_CONFIG: Schema = Schema {
    what: "node_pool_config",
    fields: &[
        ("default", "Default", None),
        ("allowed", "Allowed", None),
        ("denied", "Denied", None),
    ],
};

/// A namespace specification, as Nomad's `namespace apply` reads it.
static NAMESPACE: Schema = Schema {
    what: "namespace",
    fields: &[
        ("name", "Name", None),
        ("description", "Description", None),
        ("quota", "Quota", None),
        ("capabilities", "Capabilities", Some(&CAPABILITIES)),
        (
            "node_pool_config",
            "NodePoolConfiguration",
            Some(&POOL_CONFIG),
        ),
        ("vault", "VaultConfiguration", Some(&POOL_CONFIG)),
        ("consul", "ConsulConfiguration", Some(&POOL_CONFIG)),
        ("meta", "Meta", Some(&FREE_FORM)),
    ],
};

pub(super) async fn dispatch(api: &Api, ui: &mut Ui, cmd: NamespaceCommand) -> Result<u8> {
    match cmd {
        NamespaceCommand::List { format } => list(api, ui, &format).await,
        NamespaceCommand::Status { format, name } => status(api, ui, &name, &format).await,
        NamespaceCommand::Apply {
            description,
            quota,
            json,
            input,
        } => apply(api, ui, description, quota, json, &input).await,
        NamespaceCommand::Delete { name } => {
            let call = NomadCall::write(
                Method::Delete,
                format!("/v1/namespace/{}", segment(&name)),
                None,
            );
            api.nomad("Error deleting namespace", call).await?;
            ui.output(format!("Successfully deleted namespace {name:?}!"));
            Ok(0)
        }
    }
}

/// The namespaces whose names start with `prefix`.
async fn namespaces(api: &Api, prefix: &str) -> Result<Vec<Value>> {
    let call = NomadCall::get("/v1/namespaces").param("prefix", prefix);
    let list = api
        .nomad_get("Error retrieving namespaces", call)
        .await
        .map_err(|e| super::missing_endpoint(e, "GET /v1/namespaces", "namespaces"))?;
    Ok(list.as_array().cloned().unwrap_or_default())
}

/// The `Name  Description` table, sorted by name.
pub fn namespace_list(namespaces: &[Value]) -> String {
    if namespaces.is_empty() {
        return "No namespaces found".into();
    }
    let mut sorted: Vec<&Value> = namespaces.iter().collect();
    sorted.sort_by_key(|ns| text(ns, "Name"));
    let mut rows = vec![vec!["Name".to_string(), "Description".to_string()]];
    rows.extend(
        sorted
            .into_iter()
            .map(|ns| vec![text(ns, "Name"), text(ns, "Description")]),
    );
    table(rows)
}

async fn list(api: &Api, ui: &mut Ui, format: &FormatArgs) -> Result<u8> {
    let all = namespaces(api, "").await?;
    if format.wanted() {
        ui.output(format.render(&Value::Array(all))?);
    } else {
        ui.output(namespace_list(&all));
    }
    Ok(0)
}

/// A list of strings joined by `,`, or `*` when empty for an allow list.
fn joined(v: Option<&Value>, empty: &str) -> String {
    let items: Vec<&str> = v
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if items.is_empty() {
        empty.to_string()
    } else {
        items.join(",")
    }
}

/// `namespace status`'s page.
pub fn namespace_page(ns: &Value) -> String {
    let caps = ns.get("Capabilities");
    let cap = |key: &str, empty: &str| joined(caps.and_then(|c| c.get(key)), empty);
    let mut out = kv(&[
        ("Name", text(ns, "Name")),
        ("Description", text(ns, "Description")),
        ("Quota", text(ns, "Quota")),
        ("Enabled Drivers", cap("EnabledTaskDrivers", "*")),
        ("Disabled Drivers", cap("DisabledTaskDrivers", "")),
        ("Enabled Network Modes", cap("EnabledNetworkModes", "*")),
        ("Disabled Network Modes", cap("DisabledNetworkModes", "")),
    ]);
    if let Some(meta) = ns.get("Meta").and_then(Value::as_object)
        && !meta.is_empty()
    {
        let pairs: Vec<(&str, String)> = meta
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or_default().to_string()))
            .collect();
        out.push_str("\n\nMetadata\n");
        out.push_str(&kv(&pairs));
    }
    for (key, title) in [
        ("NodePoolConfiguration", "Node Pool Configuration"),
        ("VaultConfiguration", "Vault Configuration"),
        ("ConsulConfiguration", "Consul Configuration"),
    ] {
        let Some(config) = ns.get(key).filter(|c| c.is_object()) else {
            continue;
        };
        let mut pairs = vec![("Default", text(config, "Default"))];
        let allowed = joined(config.get("Allowed"), "");
        if !allowed.is_empty() {
            pairs.push(("Allowed", allowed.replace(',', ", ")));
        }
        let denied = joined(config.get("Denied"), "");
        if !denied.is_empty() {
            pairs.push(("Denied", denied.replace(',', ", ")));
        }
        out.push_str(&format!("\n\n{title}\n"));
        out.push_str(&kv(&pairs));
    }
    out
}

pub(super) async fn status(api: &Api, ui: &mut Ui, name: &str, format: &FormatArgs) -> Result<u8> {
    let matches = namespaces(api, name).await?;
    let ns = match matches.as_slice() {
        [] => {
            return Err(CliError::NotFound(format!(
                "Error retrieving namespaces: Namespace {name:?} matched no namespaces"
            )));
        }
        [one] => one.clone(),
        many => match many.iter().find(|ns| text(ns, "Name") == name) {
            Some(exact) => exact.clone(),
            None => {
                return Err(CliError::Ambiguous(format!(
                    "Prefix matched multiple namespaces\n\n{}",
                    namespace_list(many)
                )));
            }
        },
    };
    if format.wanted() {
        ui.output(format.render(&ns)?);
    } else {
        ui.output(namespace_page(&ns));
    }
    Ok(0)
}

/// `namespace apply`: a specification file (or `-`), else the namespace
/// named, created or updated with `-description`.
async fn apply(
    api: &Api,
    ui: &mut Ui,
    description: Option<String>,
    quota: Option<String>,
    json_input: bool,
    input: &str,
) -> Result<u8> {
    if quota.is_some() {
        return Err(CliError::Usage(
            "-quota is not supported by Caravan: it has no resource quotas".into(),
        ));
    }
    let from_file = input == "-" || std::path::Path::new(input).is_file();
    let spec = if from_file {
        if description.is_some() {
            ui.error("Flags are ignored when a file is specified!");
        }
        let body = super::read_input(input)?;
        if json_input {
            serde_json::from_str::<Value>(&body)
                .map_err(|e| CliError::Usage(format!("Failed to parse namespace: {e}")))?
        } else {
            hcl_spec::bare(&body, &NAMESPACE).map_err(|e| {
                CliError::Usage(format!("Error parsing namespace specification: {e}"))
            })?
        }
    } else {
        let path = format!("/v1/namespace/{}", segment(input));
        let existing = match api
            .nomad("Error looking up namespace", NomadCall::get(path))
            .await
        {
            Ok(v) => v,
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(e),
        };
        let mut ns = existing.unwrap_or_else(|| json!({ "Name": input }));
        if let Some(d) = description {
            ns["Description"] = Value::String(d);
        }
        ns
    };
    let name = text(&spec, "Name");
    if name.is_empty() {
        return Err(CliError::Usage("Namespace name required".into()));
    }
    if spec
        .get("Quota")
        .and_then(Value::as_str)
        .is_some_and(|q| !q.is_empty())
    {
        return Err(CliError::Usage(
            "quota: not supported by Caravan: it has no resource quotas".into(),
        ));
    }
    let call = NomadCall::write(
        Method::Put,
        format!("/v1/namespace/{}", segment(&name)),
        Some(spec),
    );
    api.nomad("Error applying namespace", call).await?;
    ui.output(format!("Successfully applied namespace {name:?}!"));
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_print_as_nomad_prints_them() {
        let list = vec![
            json!({"Name": "prod", "Description": "Production"}),
            json!({"Name": "default", "Description": "Default shared namespace"}),
        ];
        assert_eq!(
            namespace_list(&list),
            "Name     Description\ndefault  Default shared namespace\nprod     Production"
        );
        assert_eq!(namespace_list(&[]), "No namespaces found");
        let page = namespace_page(&json!({
            "Name": "prod", "Description": "Production", "Quota": "",
            "Capabilities": {"EnabledTaskDrivers": ["docker", "raw_exec"]},
            "Meta": {"owner": "sre"},
            "NodePoolConfiguration": {"Default": "prod", "Allowed": ["a", "b"]},
        }));
        assert!(
            page.starts_with("Name                   = prod\n"),
            "{page}"
        );
        assert!(
            page.contains("Enabled Drivers        = docker,raw_exec\n"),
            "{page}"
        );
        assert!(page.contains("Disabled Drivers       = <none>\n"), "{page}");
        assert!(page.contains("\n\nMetadata\nowner = sre"), "{page}");
        assert!(
            page.ends_with("Node Pool Configuration\nDefault = prod\nAllowed = a, b"),
            "{page}"
        );
    }

    #[test]
    fn specifications_read_as_nomads_namespace() {
        let v = hcl_spec::bare(
            "name = \"prod\"\ndescription = \"Production\"\ncapabilities {\n  enabled_task_drivers = [\"docker\"]\n}\nnode_pool_config {\n  default = \"prod\"\n}\nmeta {\n  owner = \"sre\"\n}\n",
            &NAMESPACE,
        )
        .unwrap();
        assert_eq!(
            v,
            json!({
                "Name": "prod", "Description": "Production",
                "Capabilities": {"EnabledTaskDrivers": ["docker"]},
                "NodePoolConfiguration": {"Default": "prod"},
                "Meta": {"owner": "sre"},
            })
        );
    }
}
