//! `service list|info|delete`: Nomad's native service discovery through
//! `/v1/services` and `/v1/service/<name>` (Nomad's HTTP API only), printed
//! as Nomad prints it.

use clap::Subcommand;
use serde_json::Value;

use crate::api::Api;
use crate::backend::{Method, NomadCall, segment};
use crate::error::CliError;
use crate::format::{FormatArgs, kv, short_id, table};
use crate::ui::Ui;

use super::text;

type Result<T> = std::result::Result<T, CliError>;

/// `caravan service …`.
#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// List the services registered in the namespace (`-namespace=*`: every
    /// namespace) with their tags.
    List {
        #[command(flatten)]
        format: FormatArgs,
    },
    /// Show the instances of a service, by name or a prefix of it.
    Info {
        #[command(flatten)]
        format: FormatArgs,
        /// Every field of each instance.
        #[arg(long)]
        verbose: bool,
        /// The service's name or a prefix of it.
        name: String,
    },
    /// Delete one registered instance of a service.
    Delete {
        /// The service's name.
        name: String,
        /// The instance's registration id.
        id: String,
    },
}

pub(super) async fn dispatch(api: &Api, ui: &mut Ui, cmd: ServiceCommand) -> Result<u8> {
    match cmd {
        ServiceCommand::List { format } => list(api, ui, &format).await,
        ServiceCommand::Info {
            format,
            verbose,
            name,
        } => info(api, ui, &format, verbose, &name).await,
        ServiceCommand::Delete { name, id } => {
            let call = NomadCall::write(
                Method::Delete,
                format!("/v1/service/{}/{}", segment(&name), segment(&id)),
                None,
            );
            api.nomad("Error deleting service registration", call)
                .await?;
            ui.output("Successfully deleted service registration");
            Ok(0)
        }
    }
}

fn tags(v: &Value) -> String {
    let tags: Vec<&str> = v
        .get("Tags")
        .and_then(Value::as_array)
        .map(|t| t.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    format!("[{}]", tags.join(","))
}

/// The services of `/v1/services` whose names start with `prefix`.
async fn services(api: &Api, prefix: &str) -> Result<Vec<Value>> {
    let call = NomadCall::get("/v1/services").param("prefix", prefix);
    let list = api
        .nomad_get("Error listing service registrations", call)
        .await
        .map_err(|e| super::missing_endpoint(e, "GET /v1/services", "services"))?;
    Ok(list.as_array().cloned().unwrap_or_default())
}

/// Nomad's `Service Name  [Namespace]  Tags` table.
pub fn service_list(namespaces: &[Value], all_namespaces: bool) -> String {
    let mut header = vec!["Service Name".to_string()];
    if all_namespaces {
        header.push("Namespace".into());
    }
    header.push("Tags".into());
    let mut rows = vec![header];
    let mut sorted: Vec<&Value> = namespaces.iter().collect();
    sorted.sort_by_key(|ns| text(ns, "Namespace"));
    for ns in sorted {
        let mut services: Vec<&Value> = ns
            .get("Services")
            .and_then(Value::as_array)
            .map(|s| s.iter().collect())
            .unwrap_or_default();
        services.sort_by_key(|s| text(s, "ServiceName"));
        for service in services {
            let mut row = vec![text(service, "ServiceName")];
            if all_namespaces {
                row.push(text(ns, "Namespace"));
            }
            row.push(tags(service));
            rows.push(row);
        }
    }
    table(rows)
}

async fn list(api: &Api, ui: &mut Ui, format: &FormatArgs) -> Result<u8> {
    let all = services(api, "").await?;
    if all.is_empty() {
        ui.output("No service registrations found");
    } else if format.wanted() {
        ui.output(format.render(&Value::Array(all))?);
    } else {
        ui.output(service_list(&all, api.namespace() == "*"));
    }
    Ok(0)
}

/// The namespace and name `prefix` means: the one service it starts, or
/// the one it names exactly; the list of candidates when it is ambiguous.
fn pick(prefix: &str, found: &[Value]) -> std::result::Result<(String, String), Vec<Value>> {
    let mut matches: Vec<(String, String)> = Vec::new();
    for ns in found {
        for service in ns
            .get("Services")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            matches.push((text(ns, "Namespace"), text(service, "ServiceName")));
        }
    }
    let exact: Vec<&(String, String)> = matches.iter().filter(|(_, n)| n == prefix).collect();
    match (matches.as_slice(), exact.as_slice()) {
        ([one], _) => Ok(one.clone()),
        (_, [one]) => Ok((*one).clone()),
        _ => Err(found.to_vec()),
    }
}

async fn info(
    api: &Api,
    ui: &mut Ui,
    format: &FormatArgs,
    verbose: bool,
    prefix: &str,
) -> Result<u8> {
    let found = services(api, prefix).await?;
    if found.is_empty() {
        return Err(CliError::Other(format!(
            "Error listing service registrations: No service registrations with prefix {prefix:?} found"
        )));
    }
    let (namespace, name) = pick(prefix, &found).map_err(|candidates| {
        CliError::Ambiguous(format!(
            "Prefix matched multiple services\n\n{}",
            service_list(&candidates, api.namespace() == "*")
        ))
    })?;
    let call =
        NomadCall::get(format!("/v1/service/{}", segment(&name))).param("namespace", namespace);
    let instances = api
        .nomad_get("Error listing service registrations", call)
        .await?;
    let mut instances = instances.as_array().cloned().unwrap_or_default();
    if instances.is_empty() {
        ui.output("No service registrations found");
        return Ok(0);
    }
    if format.wanted() {
        ui.output(format.render(&Value::Array(instances))?);
        return Ok(0);
    }
    instances.sort_by_key(|i| text(i, "JobID"));
    if verbose {
        let blocks: Vec<String> = instances.iter().map(verbose_instance).collect();
        ui.output(blocks.join("\n\n"));
    } else {
        ui.output(instance_table(&instances));
    }
    Ok(0)
}

/// `host:port`, with brackets around an IPv6 host; the address alone
/// without a port.
fn address(instance: &Value) -> String {
    let host = text(instance, "Address");
    match instance.get("Port").and_then(Value::as_i64) {
        None | Some(0) => host,
        Some(port) if host.contains(':') => format!("[{host}]:{port}"),
        Some(port) => format!("{host}:{port}"),
    }
}

/// Nomad's `Job ID  Address  Tags  Node ID  Alloc ID` table.
pub fn instance_table(instances: &[Value]) -> String {
    let mut rows = vec![vec![
        "Job ID".to_string(),
        "Address".into(),
        "Tags".into(),
        "Node ID".into(),
        "Alloc ID".into(),
    ]];
    for i in instances {
        rows.push(vec![
            text(i, "JobID"),
            address(i),
            tags(i),
            short_id(&text(i, "NodeID")).to_string(),
            short_id(&text(i, "AllocID")).to_string(),
        ]);
    }
    table(rows)
}

fn verbose_instance(i: &Value) -> String {
    kv(&[
        ("ID", text(i, "ID")),
        ("Service Name", text(i, "ServiceName")),
        ("Namespace", text(i, "Namespace")),
        ("Job ID", text(i, "JobID")),
        ("Alloc ID", text(i, "AllocID")),
        ("Node ID", text(i, "NodeID")),
        ("Datacenter", text(i, "Datacenter")),
        (
            "Address",
            format!("{}:{}", text(i, "Address"), text(i, "Port")),
        ),
        ("Tags", tags(i)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn listed() -> Vec<Value> {
        vec![
            json!({"Namespace": "prod", "Services": [{"ServiceName": "db", "Tags": ["primary"]}]}),
            json!({"Namespace": "default", "Services": [
                {"ServiceName": "web", "Tags": ["b", "a"]},
                {"ServiceName": "api", "Tags": []},
            ]}),
        ]
    }

    #[test]
    fn the_list_is_sorted_with_a_namespace_column_for_all() {
        let out = service_list(&listed(), true);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("Service Name"), "{out}");
        assert!(lines[0].contains("Namespace"), "{out}");
        assert!(lines[1].starts_with("api"), "{out}");
        assert!(
            lines[2].starts_with("web") && lines[2].ends_with("[b,a]"),
            "{out}"
        );
        assert!(
            lines[3].starts_with("db") && lines[3].contains("prod"),
            "{out}"
        );
        assert!(!service_list(&listed(), false).contains("Namespace"));
    }

    #[test]
    fn a_prefix_picks_the_one_service_or_the_exact_name() {
        let one = vec![json!({"Namespace": "default", "Services": [{"ServiceName": "web"}]})];
        assert_eq!(pick("we", &one), Ok(("default".into(), "web".into())));
        let two = vec![json!({"Namespace": "default", "Services": [
            {"ServiceName": "web"}, {"ServiceName": "web-admin"}]})];
        assert_eq!(pick("web", &two), Ok(("default".into(), "web".into())));
        assert!(pick("we", &two).is_err(), "ambiguous");
    }

    #[test]
    fn instances_show_host_port_and_short_ids() {
        let i = json!({"JobID": "app", "Address": "10.0.0.1", "Port": 8080,
            "Tags": ["v1"], "NodeID": "0123456789abcdef", "AllocID": "fedcba9876543210"});
        let out = instance_table(&[i]);
        assert!(out.contains("10.0.0.1:8080"), "{out}");
        assert!(out.contains("[v1]"), "{out}");
        assert!(
            out.contains("01234567") && !out.contains("0123456789"),
            "{out}"
        );
        assert_eq!(address(&json!({"Address": "::1", "Port": 80})), "[::1]:80");
        assert_eq!(address(&json!({"Address": "db"})), "db");
    }
}
