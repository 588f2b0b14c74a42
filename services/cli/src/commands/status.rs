//! `status <id>`: finds the object an id (or id prefix) names, as Nomad's
//! generic `status` does — an exact id in one kind of object, else the one
//! kind with a single match — and shows it with that kind's status verb.

use super::job_status::StatusArgs;
use crate::api::Api;
use crate::backend::NomadCall;
use crate::error::CliError;
use crate::format::FormatArgs;
use crate::lookup;
use crate::ui::Ui;
use crate::views;

type Result<T> = std::result::Result<T, CliError>;

/// The kinds of objects `status` looks in, with Nomad's names of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Jobs,
    Allocs,
    Evals,
    Nodes,
    Deployments,
    Namespaces,
}

impl Kind {
    fn title(self) -> &'static str {
        match self {
            Kind::Jobs => "Jobs",
            Kind::Allocs => "Allocs",
            Kind::Evals => "Evals",
            Kind::Nodes => "Nodes",
            Kind::Deployments => "Deployments",
            Kind::Namespaces => "Namespaces",
        }
    }
}

/// The ids of each kind that start with `prefix`.
async fn matches(api: &Api, prefix: &str) -> Result<Vec<(Kind, Vec<String>)>> {
    let ids = |list: Vec<String>| {
        let mut list = list;
        list.sort();
        list
    };
    let mut found = vec![
        (
            Kind::Jobs,
            ids(api
                .list_jobs(prefix)
                .await?
                .into_iter()
                .map(|j| j.id)
                .collect()),
        ),
        (
            Kind::Allocs,
            ids(api
                .list_allocations(prefix)
                .await?
                .into_iter()
                .map(|a| a.id)
                .collect()),
        ),
        (
            Kind::Evals,
            ids(api
                .list_evaluations(prefix)
                .await?
                .into_iter()
                .map(|e| e.id)
                .collect()),
        ),
        (
            Kind::Nodes,
            ids(api
                .list_nodes(prefix)
                .await?
                .into_iter()
                .map(|n| n.id)
                .collect()),
        ),
        (
            Kind::Deployments,
            ids(api
                .list_deployments_prefix(prefix)
                .await?
                .into_iter()
                .map(|d| d.id)
                .collect()),
        ),
    ];
    // Namespaces are objects of the HTTP API only; a gateway without them
    // (or the gRPC API) has none to match.
    if api.speaks_http() {
        let call = NomadCall::get("/v1/namespaces").param("prefix", prefix);
        if let Ok(Some(list)) = api.nomad("Error querying namespaces", call).await {
            let names = list
                .as_array()
                .map(|l| {
                    l.iter()
                        .filter_map(|ns| ns.get("Name").and_then(|n| n.as_str()))
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            found.push((Kind::Namespaces, ids(names)));
        }
    }
    Ok(found)
}

/// The kind `id` resolves to, or the message listing the candidates.
fn resolve(id: &str, found: &[(Kind, Vec<String>)]) -> std::result::Result<Kind, String> {
    let multiple = || {
        let mut text = format!("Multiple matches found for id {id:?}");
        for (kind, ids) in found.iter().filter(|(_, ids)| !ids.is_empty()) {
            text.push_str(&format!("\n\n{}:\n{}", kind.title(), ids.join(", ")));
        }
        text
    };
    let exact: Vec<Kind> = found
        .iter()
        .filter(|(_, ids)| ids.iter().any(|i| i == id))
        .map(|(k, _)| *k)
        .collect();
    match exact.as_slice() {
        [one] => return Ok(*one),
        [] => {}
        _ => return Err(multiple()),
    }
    let nonempty: Vec<&(Kind, Vec<String>)> =
        found.iter().filter(|(_, ids)| !ids.is_empty()).collect();
    match nonempty.as_slice() {
        [] => Err(format!("Unable to resolve ID: {id:?}")),
        [(kind, ids)] if ids.len() == 1 => Ok(*kind),
        _ => Err(multiple()),
    }
}

/// `status <id>`.
pub async fn status(api: &Api, ui: &mut Ui, id: &str, verbose: bool) -> Result<u8> {
    let found = matches(api, id).await?;
    let kind = resolve(id, &found).map_err(CliError::NotFound)?;
    match kind {
        Kind::Jobs => super::job_status::status(api, ui, Some(id), &StatusArgs::default()).await,
        Kind::Allocs => super::alloc::status(api, ui, id).await,
        Kind::Evals => super::eval::status(api, ui, id).await,
        Kind::Nodes => super::node::status(api, ui, Some(id)).await,
        Kind::Deployments => {
            let d = lookup::deployment(api, id).await?;
            ui.output(views::deployment_page(&d, verbose));
            Ok(0)
        }
        Kind::Namespaces => super::namespace::status(api, ui, id, &FormatArgs::default()).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(jobs: &[&str], allocs: &[&str]) -> Vec<(Kind, Vec<String>)> {
        let v = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect();
        vec![
            (Kind::Jobs, v(jobs)),
            (Kind::Allocs, v(allocs)),
            (Kind::Evals, vec![]),
        ]
    }

    #[test]
    fn an_exact_id_or_a_single_match_resolves() {
        assert_eq!(
            resolve("web", &found(&["web", "web-2"], &[])),
            Ok(Kind::Jobs)
        );
        assert_eq!(
            resolve("0af9", &found(&[], &["0af996ed"])),
            Ok(Kind::Allocs)
        );
        assert_eq!(
            resolve("zz", &found(&[], &[])).unwrap_err(),
            "Unable to resolve ID: \"zz\""
        );
    }

    #[test]
    fn several_matches_are_listed_by_kind() {
        let err = resolve("a", &found(&["ab"], &["a1b2"])).unwrap_err();
        assert_eq!(
            err,
            "Multiple matches found for id \"a\"\n\nJobs:\nab\n\nAllocs:\na1b2"
        );
        assert!(resolve("we", &found(&["web", "west"], &[])).is_err());
    }
}
