//! `node status`, `node eligibility`, `node drain`.

use std::collections::BTreeMap;
use std::time::Duration;

use caravan_model::{AllocExt, NomadName, now_unix_ns};
use caravan_proto::{Allocation, DrainStrategy};

use crate::api::Api;
use crate::args::{DrainArgs, NodeCommand};
use crate::backend::{NomadCall, segment};
use crate::error::CliError;
use crate::format::{rfc3339, short_id};
use crate::lookup;
use crate::monitor::stamp;
use crate::ui::Ui;
use crate::views;

type Result<T> = std::result::Result<T, CliError>;

pub(super) async fn dispatch(api: &Api, ui: &mut Ui, cmd: NodeCommand) -> Result<u8> {
    match cmd {
        NodeCommand::Status { format, id } if format.wanted() => {
            let call = match id {
                None => NomadCall::get("/v1/nodes"),
                Some(id) => {
                    let node = lookup::node(api, &id).await?;
                    NomadCall::get(format!("/v1/node/{}", segment(&node.id)))
                }
            };
            super::print_json(api, ui, &format, "Error querying node status", call).await
        }
        NodeCommand::Status { id, .. } => status(api, ui, id.as_deref()).await,
        NodeCommand::Pool(cmd) => super::node_pool::dispatch(api, ui, cmd).await,
        NodeCommand::Eligibility { enable, id, .. } => {
            let node = lookup::node(api, &id).await?;
            api.update_eligibility(&node.id, enable).await?;
            let what = if enable { "eligible" } else { "ineligible" };
            ui.output(format!(
                "Node {:?} scheduling eligibility set: {what} for scheduling",
                node.id
            ));
            Ok(0)
        }
        NodeCommand::Drain(args) => drain(api, ui, args).await,
    }
}

/// The nodes table, or one node's page.
pub(super) async fn status(api: &Api, ui: &mut Ui, id: Option<&str>) -> Result<u8> {
    let Some(id) = id else {
        let nodes = api.list_nodes("").await?;
        if !nodes.is_empty() {
            ui.output(views::node_list(&nodes));
        }
        return Ok(0);
    };
    let node = lookup::node(api, id).await?;
    let allocs = api.node_allocations(&node.id).await?;
    ui.output(views::node_page(&node, &allocs, now_unix_ns()));
    Ok(0)
}

/// The drain asked for: a deadline, none, or force (negative).
pub(crate) fn drain_strategy(args: &DrainArgs) -> Result<DrainStrategy> {
    let deadline_ns = if args.force {
        -1
    } else if args.no_deadline {
        0
    } else {
        let ns = caravan_jobspec::parse_duration(&args.deadline).map_err(|e| {
            CliError::Usage(format!("Failed to parse deadline {:?}: {e}", args.deadline))
        })?;
        if ns <= 0 {
            return Err(CliError::Usage(
                "A positive drain deadline is required (or -no-deadline, -force)".into(),
            ));
        }
        ns
    };
    Ok(DrainStrategy {
        deadline_ns,
        ignore_system_jobs: args.ignore_system,
        ..Default::default()
    })
}

async fn drain(api: &Api, ui: &mut Ui, args: DrainArgs) -> Result<u8> {
    let node = lookup::node(api, &args.id).await?;
    if args.disable {
        api.update_drain(&node.id, None, !args.keep_ineligible)
            .await?;
        ui.output(format!("Node {:?} drain strategy unset", node.id));
        return Ok(0);
    }
    let strategy = drain_strategy(&args)?;
    api.update_drain(&node.id, Some(strategy), false).await?;
    ui.output(format!("Node {:?} drain strategy set", node.id));
    if args.detach {
        return Ok(0);
    }
    monitor_drain(api, ui, &node.id, args.ignore_system).await
}

/// Whether an allocation still holds its place on a draining node.
fn still_running(a: &Allocation) -> bool {
    a.is_live()
}

/// Follows a drain until the node's allocations have stopped (or the drain
/// was cancelled), printing each allocation's status change.
async fn monitor_drain(api: &Api, ui: &mut Ui, node_id: &str, ignore_system: bool) -> Result<u8> {
    let now = || rfc3339(now_unix_ns());
    ui.output(stamp(
        true,
        &now(),
        &format!(
            "Monitoring node {:?}: Ctrl-C to detach monitoring",
            short_id(node_id)
        ),
    ));
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let system_jobs: Vec<String> = if ignore_system {
        api.list_jobs("")
            .await?
            .into_iter()
            .filter(|j| j.r#type() == caravan_proto::JobType::System)
            .map(|j| j.id)
            .collect()
    } else {
        Vec::new()
    };
    loop {
        let node = api.node(node_id).await?;
        let allocs = api.node_allocations(node_id).await?;
        for a in &allocs {
            let status = a.client_status().nomad_name().to_string();
            if let Some(old) = seen.get(&a.id)
                && *old != status
            {
                ui.output(stamp(
                    false,
                    &now(),
                    &format!("Alloc {:?} status {old:?} -> {status:?}", short_id(&a.id)),
                ));
            }
            seen.insert(a.id.clone(), status);
        }
        let remaining = allocs
            .iter()
            .filter(|a| still_running(a) && !system_jobs.contains(&a.job_id))
            .count();
        if remaining == 0 {
            ui.output(stamp(
                true,
                &now(),
                &format!("All allocations on node {node_id:?} have stopped"),
            ));
            return Ok(0);
        }
        if node.drain_strategy.is_none() {
            ui.output(stamp(
                true,
                &now(),
                &format!("Drain of node {node_id:?} ended with {remaining} allocations running"),
            ));
            return Ok(0);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> DrainArgs {
        let mut line = vec!["caravan", "node", "drain"];
        line.extend_from_slice(extra);
        line.push("f747");
        let cli = <crate::args::Cli as clap::Parser>::try_parse_from(crate::args::normalize(
            line.into_iter().map(String::from),
        ))
        .unwrap();
        match cli.command {
            crate::args::Command::Node(NodeCommand::Drain(d)) => d,
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn drain_deadlines_default_to_an_hour() {
        let s = drain_strategy(&args(&["-enable"])).unwrap();
        assert_eq!(s.deadline_ns, 3_600_000_000_000);
        assert!(!s.ignore_system_jobs);
        let s = drain_strategy(&args(&["-enable", "-deadline", "30m", "-ignore-system"])).unwrap();
        assert_eq!(s.deadline_ns, 1_800_000_000_000);
        assert!(s.ignore_system_jobs);
        assert_eq!(
            drain_strategy(&args(&["-enable", "-force"]))
                .unwrap()
                .deadline_ns,
            -1
        );
        assert_eq!(
            drain_strategy(&args(&["-enable", "-no-deadline"]))
                .unwrap()
                .deadline_ns,
            0
        );
        assert!(drain_strategy(&args(&["-enable", "-deadline", "soon"])).is_err());
    }
}
