//! Ids as operators type them: full ids or unique prefixes (the 8-character
//! short ids the tables print), resolved through the list APIs.

use caravan_model::now_unix_ns;
use caravan_proto::{Allocation, Deployment, Evaluation, Job, Node};

use crate::api::Api;
use crate::error::CliError;
use crate::views;

type Result<T> = std::result::Result<T, CliError>;

/// Prefixes must be at least this long (one character matches too much).
const MIN_PREFIX: usize = 2;

fn check_prefix(id: &str) -> Result<()> {
    if id.chars().count() < MIN_PREFIX {
        return Err(CliError::Usage(
            "Identifier must contain at least two characters.".into(),
        ));
    }
    Ok(())
}

/// Picks the one match, or the exact one among several.
fn one<T>(
    mut matches: Vec<T>,
    id: &str,
    id_of: impl Fn(&T) -> &str,
) -> std::result::Result<T, Vec<T>> {
    if matches.len() == 1 {
        return Ok(matches.remove(0));
    }
    if let Some(at) = matches.iter().position(|m| id_of(m) == id) {
        return Ok(matches.swap_remove(at));
    }
    Err(matches)
}

/// The job with id `id`, or the one job whose id starts with it.
pub async fn job(api: &Api, id: &str) -> Result<Job> {
    match api.job(id).await {
        Ok(job) => return Ok(job),
        Err(e) if !e.is_not_found() => return Err(e),
        Err(_) => {}
    }
    let jobs = api.list_jobs(id).await?;
    if jobs.is_empty() {
        return Err(CliError::NotFound(format!(
            "No job(s) with prefix or ID {id:?} found"
        )));
    }
    match one(jobs, id, |j| &j.id) {
        Ok(j) => api.job(&j.id).await,
        Err(many) => Err(CliError::Ambiguous(format!(
            "Prefix matched multiple jobs\n\n{}",
            views::job_list(&many)
        ))),
    }
}

/// The allocation with id `id`, or the one whose id starts with it.
pub async fn alloc(api: &Api, id: &str) -> Result<Allocation> {
    check_prefix(id)?;
    let allocs = api.list_allocations(id).await?;
    if allocs.is_empty() {
        return Err(CliError::NotFound(format!(
            "No allocation(s) with prefix or id {id:?} found"
        )));
    }
    match one(allocs, id, |a| &a.id) {
        Ok(a) => api.allocation(&a.id).await,
        Err(many) => Err(CliError::Ambiguous(format!(
            "Prefix matched multiple allocations\n\n{}",
            views::alloc_list(&many, now_unix_ns())
        ))),
    }
}

/// The evaluation with id `id`, or the one whose id starts with it.
pub async fn eval(api: &Api, id: &str) -> Result<Evaluation> {
    check_prefix(id)?;
    let evals = api.list_evaluations(id).await?;
    if evals.is_empty() {
        return Err(CliError::NotFound(format!(
            "No evaluation(s) with prefix or id {id:?} found"
        )));
    }
    match one(evals, id, |e| &e.id) {
        Ok(e) => api.evaluation(&e.id).await,
        Err(many) => Err(CliError::Ambiguous(format!(
            "Prefix matched multiple evaluations\n\n{}",
            views::eval_list(&many)
        ))),
    }
}

/// The node with id `id`, or the one whose id starts with it.
pub async fn node(api: &Api, id: &str) -> Result<Node> {
    check_prefix(id)?;
    let nodes = api.list_nodes(id).await?;
    if nodes.is_empty() {
        return Err(CliError::NotFound(format!(
            "No node(s) with prefix {id:?} found"
        )));
    }
    match one(nodes, id, |n| &n.id) {
        Ok(n) => api.node(&n.id).await,
        Err(many) => Err(CliError::Ambiguous(format!(
            "Prefix matched multiple nodes\n\n{}",
            views::node_list(&many)
        ))),
    }
}

/// The deployment with id `id`, or the one whose id starts with it.
pub async fn deployment(api: &Api, id: &str) -> Result<Deployment> {
    check_prefix(id)?;
    let deployments = api.list_deployments_prefix(id).await?;
    if deployments.is_empty() {
        return Err(CliError::NotFound(format!(
            "No deployment(s) with prefix or id {id:?} found"
        )));
    }
    match one(deployments, id, |d| &d.id) {
        Ok(d) => api.deployment(&d.id).await,
        Err(many) => Err(CliError::Ambiguous(format!(
            "Prefix matched multiple deployments\n\n{}",
            views::deployment_list(&many, false)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exact_id_wins_among_prefix_matches() {
        let ids = vec!["web".to_string(), "web-2".to_string()];
        assert_eq!(one(ids.clone(), "web", |s| s).unwrap(), "web");
        assert_eq!(
            one(vec!["web-2".to_string()], "we", |s| s).unwrap(),
            "web-2"
        );
        assert_eq!(one(ids, "we", |s| s).unwrap_err().len(), 2);
        assert!(check_prefix("a").is_err());
        assert!(check_prefix("ab").is_ok());
    }
}
