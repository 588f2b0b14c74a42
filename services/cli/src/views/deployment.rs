//! `deployment list`, `deployment status` and the `Latest Deployment` block
//! of `job status`: a deployment's identity and its `Deployed` table.

use caravan_model::NomadName;
use caravan_proto::Deployment;

use crate::format::{SHORT_ID, kv, limit, rfc3339, table};

/// How many characters of an id to show: all with `verbose`, else the short id.
fn id_length(verbose: bool) -> usize {
    if verbose { usize::MAX } else { SHORT_ID }
}

/// The deployments table, newest first; `No deployments found` when empty.
pub fn deployment_list(deployments: &[Deployment], verbose: bool) -> String {
    if deployments.is_empty() {
        return "No deployments found".to_string();
    }
    let mut sorted: Vec<&Deployment> = deployments.iter().collect();
    sorted.sort_by(|a, b| {
        b.create_revision
            .cmp(&a.create_revision)
            .then_with(|| a.id.cmp(&b.id))
    });
    let n = id_length(verbose);
    let mut rows = vec![
        ["ID", "Job ID", "Job Version", "Status", "Description"]
            .map(String::from)
            .to_vec(),
    ];
    for d in sorted {
        rows.push(vec![
            limit(&d.id, n).to_string(),
            d.job_id.clone(),
            d.job_version.to_string(),
            d.status().nomad_name().to_string(),
            d.status_description.clone(),
        ]);
    }
    table(rows)
}

/// `deployment status`: ID, job, version, status and description, then the
/// `Deployed` table when the deployment has groups.
pub fn deployment_page(d: &Deployment, verbose: bool) -> String {
    let mut out = kv(&[
        ("ID", limit(&d.id, id_length(verbose)).to_string()),
        ("Job ID", d.job_id.clone()),
        ("Job Version", d.job_version.to_string()),
        ("Status", d.status().nomad_name().to_string()),
        ("Description", d.status_description.clone()),
    ]);
    if !d.task_groups.is_empty() {
        out.push_str("\n\nDeployed\n");
        out.push_str(&deployment_groups(d));
    }
    out
}

/// The `Latest Deployment` block of `job status`: ID, status, description
/// and the `Deployed` table.
pub fn deployment_block(d: &Deployment) -> String {
    let mut out = kv(&[
        ("ID", limit(&d.id, SHORT_ID).to_string()),
        ("Status", d.status().nomad_name().to_string()),
        ("Description", d.status_description.clone()),
    ]);
    if !d.task_groups.is_empty() {
        out.push_str("\n\nDeployed\n");
        out.push_str(&deployment_groups(d));
    }
    out
}

/// The per-group table; the Auto Revert, Promoted and Canaries columns
/// appear only when some group uses them, as in Nomad.
pub fn deployment_groups(d: &Deployment) -> String {
    let auto_revert = d.task_groups.values().any(|g| g.auto_revert);
    let canaries = d.task_groups.values().any(|g| g.desired_canaries > 0);
    let mut header = vec!["Task Group"];
    if auto_revert {
        header.push("Auto Revert");
    }
    if canaries {
        header.push("Promoted");
    }
    header.push("Desired");
    if canaries {
        header.push("Canaries");
    }
    header.extend(["Placed", "Healthy", "Unhealthy", "Progress Deadline"]);
    let mut rows = vec![header.into_iter().map(String::from).collect::<Vec<_>>()];
    for (group, g) in &d.task_groups {
        let mut row = vec![group.clone()];
        if auto_revert {
            row.push(g.auto_revert.to_string());
        }
        if canaries {
            row.push(g.promoted.to_string());
        }
        row.push(g.desired_total.to_string());
        if canaries {
            row.push(g.desired_canaries.to_string());
        }
        let deadline = if g.require_progress_by_unix_ns > 0 {
            rfc3339(g.require_progress_by_unix_ns)
        } else {
            "N/A".to_string()
        };
        row.extend([
            g.placed_allocs.to_string(),
            g.healthy_allocs.to_string(),
            g.unhealthy_allocs.to_string(),
            deadline,
        ]);
        rows.push(row);
    }
    table(rows)
}

#[cfg(test)]
mod tests {
    use caravan_proto::{DeploymentState, DeploymentStatus};

    use super::*;
    use crate::views::fixtures::*;

    fn deployment(id: &str, rev: i64) -> Deployment {
        let mut d = Deployment {
            id: id.into(),
            namespace: "default".into(),
            job_id: "web".into(),
            job_version: 3,
            status_description: "Deployment is running".into(),
            create_revision: rev,
            task_groups: [(
                "web".to_string(),
                DeploymentState {
                    desired_total: 4,
                    placed_allocs: 2,
                    healthy_allocs: 1,
                    require_progress_by_unix_ns: NOW,
                    ..Default::default()
                },
            )]
            .into(),
            ..Default::default()
        };
        d.set_status(DeploymentStatus::Running);
        d
    }

    #[test]
    fn the_status_page_has_nomads_fields_and_table() {
        assert_eq!(
            deployment_page(&deployment("5ca611b5-0000-1111", 7), false),
            "ID          = 5ca611b5\n\
             Job ID      = web\n\
             Job Version = 3\n\
             Status      = running\n\
             Description = Deployment is running\n\
             \n\
             Deployed\n\
             Task Group  Desired  Placed  Healthy  Unhealthy  Progress Deadline\n\
             web         4        2       1        0          2023-11-14T22:13:20Z"
        );
        let verbose = deployment_page(&deployment("5ca611b5-0000-1111", 7), true);
        assert!(verbose.starts_with("ID          = 5ca611b5-0000-1111\n"));
    }

    #[test]
    fn canaries_and_auto_revert_add_columns() {
        let mut d = deployment("5ca611b5-0000", 7);
        let g = d.task_groups.get_mut("web").unwrap();
        g.auto_revert = true;
        g.desired_canaries = 1;
        g.require_progress_by_unix_ns = 0;
        d.task_groups.insert(
            "api".into(),
            DeploymentState {
                desired_total: 2,
                promoted: true,
                ..Default::default()
            },
        );
        assert_eq!(
            deployment_groups(&d),
            "Task Group  Auto Revert  Promoted  Desired  Canaries  Placed  Healthy  Unhealthy  Progress Deadline\n\
             api         false        true      2        0         0       0        0          N/A\n\
             web         true         false     4        1         2       1        0          N/A"
        );
    }

    #[test]
    fn a_deployment_without_groups_has_no_table() {
        let mut d = deployment("5ca611b5-0000", 7);
        d.task_groups.clear();
        assert!(!deployment_page(&d, false).contains("Deployed"));
        assert!(!deployment_block(&d).contains("Deployed"));
    }

    #[test]
    fn deployments_are_listed_newest_first() {
        assert_eq!(deployment_list(&[], false), "No deployments found");
        let mut old = deployment("0ld00000-1", 3);
        old.set_status(DeploymentStatus::Successful);
        old.status_description = "Deployment completed successfully".into();
        old.job_version = 2;
        assert_eq!(
            deployment_list(&[old, deployment("5ca611b5-0000", 7)], false),
            "ID        Job ID  Job Version  Status      Description\n\
             5ca611b5  web     3            running     Deployment is running\n\
             0ld00000  web     2            successful  Deployment completed successfully"
        );
    }
}
