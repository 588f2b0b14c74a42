//! The HTTP API's route table, one builder per area of the API, merged into
//! the routes the ACL guard covers ([`api`]). Each route is one `route`
//! call with its pattern as a literal and its methods chained in it: the
//! ACL table's test reads them from the crate's sources to check each has
//! an entry.

use axum::Router;
use axum::routing::{get, post, put};

use crate::{
    Http, acl, agent, alloc_exec, client_fs, cluster, events, job_ops, jobs, logs, metrics,
    namespaces, node_pools, operator, scaling, search, service_registry, vars, well_known,
};

/// Every route of the API (the web UI's aside), without a fallback.
pub(crate) fn api() -> Router<Http> {
    Router::new()
        .merge(job_routes())
        .merge(job_actions())
        .merge(evaluations_and_allocations())
        .merge(deployments())
        .merge(nodes())
        .merge(operator_routes())
        .merge(agent_and_status())
        .merge(scaling_and_search())
        .merge(client())
        .merge(events_and_metrics())
        .merge(vars::routes())
        .merge(service_registry::routes())
        .merge(namespaces::routes())
        .merge(acl::routes())
        .merge(well_known::routes())
}

/// The jobs: listing, registering, parsing, validating, planning and
/// deregistering them, and what is read of one.
fn job_routes() -> Router<Http> {
    Router::new()
        .route(
            "/v1/jobs",
            get(jobs::list).put(jobs::register).post(jobs::register),
        )
        .route("/v1/jobs/parse", post(jobs::parse).put(jobs::parse))
        .route("/v1/validate/job", post(jobs::validate).put(jobs::validate))
        .route(
            "/v1/job/{id}",
            get(jobs::get)
                .post(jobs::register_at)
                .put(jobs::register_at)
                .delete(jobs::deregister),
        )
        .route("/v1/job/{id}/plan", post(jobs::plan).put(jobs::plan))
        .route(
            "/v1/job/{id}/evaluate",
            post(jobs::evaluate).put(jobs::evaluate),
        )
        .route("/v1/job/{id}/versions", get(jobs::versions))
        .route("/v1/job/{id}/submission", get(jobs::submission))
        .route("/v1/job/{id}/allocations", get(jobs::allocations))
        .route("/v1/job/{id}/evaluations", get(jobs::evaluations))
        .route("/v1/job/{id}/summary", get(jobs::summary))
        .route("/v1/job/{id}/deployments", get(jobs::deployments))
        .route("/v1/job/{id}/deployment", get(jobs::latest_deployment))
}

/// What acts on a registered job: revert, stability, scaling, dispatch and
/// a forced periodic run.
fn job_actions() -> Router<Http> {
    Router::new()
        .route(
            "/v1/job/{id}/revert",
            post(job_ops::revert).put(job_ops::revert),
        )
        .route(
            "/v1/job/{id}/stable",
            post(job_ops::stable).put(job_ops::stable),
        )
        .route(
            "/v1/job/{id}/scale",
            get(job_ops::scale_status)
                .post(job_ops::scale)
                .put(job_ops::scale),
        )
        .route(
            "/v1/job/{id}/dispatch",
            post(job_ops::dispatch).put(job_ops::dispatch),
        )
        .route(
            "/v1/job/{id}/periodic/force",
            post(job_ops::periodic_force).put(job_ops::periodic_force),
        )
}

/// Evaluations and allocations: reading them, and stopping an allocation.
fn evaluations_and_allocations() -> Router<Http> {
    Router::new()
        .route("/v1/evaluations", get(cluster::evals))
        .route("/v1/evaluation/{id}", get(cluster::eval))
        .route("/v1/evaluation/{id}/allocations", get(cluster::eval_allocs))
        .route("/v1/allocations", get(cluster::allocs))
        .route("/v1/allocation/{id}", get(cluster::alloc))
        .route(
            "/v1/allocation/{id}/stop",
            post(cluster::stop_alloc).put(cluster::stop_alloc),
        )
}

/// Deployments: reading them and their allocations, and a deployment's
/// promotion, failure, pause and allocations' health.
fn deployments() -> Router<Http> {
    Router::new()
        .route("/v1/deployments", get(cluster::deployments))
        .route("/v1/deployment/{id}", get(cluster::deployment))
        .route(
            "/v1/deployment/allocations/{id}",
            get(cluster::deployment_allocs),
        )
        .route(
            "/v1/deployment/promote/{id}",
            post(cluster::promote).put(cluster::promote),
        )
        .route(
            "/v1/deployment/fail/{id}",
            post(cluster::fail).put(cluster::fail),
        )
        .route(
            "/v1/deployment/pause/{id}",
            post(cluster::pause).put(cluster::pause),
        )
        .route(
            "/v1/deployment/allocation-health/{id}",
            post(cluster::alloc_health).put(cluster::alloc_health),
        )
}

/// Nodes (eligibility, drain, evaluation, purge) and node pools.
fn nodes() -> Router<Http> {
    Router::new()
        .route("/v1/nodes", get(cluster::nodes))
        .route("/v1/node/{id}", get(cluster::node))
        .route("/v1/node/{id}/allocations", get(cluster::node_allocs))
        .route(
            "/v1/node/{id}/eligibility",
            post(cluster::eligibility).put(cluster::eligibility),
        )
        .route(
            "/v1/node/{id}/drain",
            post(cluster::drain).put(cluster::drain),
        )
        .route(
            "/v1/node/{id}/evaluate",
            post(cluster::evaluate_node).put(cluster::evaluate_node),
        )
        .route(
            "/v1/node/{id}/purge",
            post(cluster::purge_node).put(cluster::purge_node),
        )
        .merge(node_pools::routes())
}

/// The operator's scheduler configuration, garbage collection and Raft
/// configuration.
fn operator_routes() -> Router<Http> {
    Router::new()
        .route(
            "/v1/operator/scheduler/configuration",
            get(operator::get_config)
                .put(operator::set_config)
                .post(operator::set_config),
        )
        .route("/v1/system/gc", put(operator::garbage_collect))
        .route(
            "/v1/operator/raft/configuration",
            get(operator::raft_configuration),
        )
}

/// The agent (self, members, health, servers, joining and leaving), the
/// leader and peers, and the regions.
fn agent_and_status() -> Router<Http> {
    Router::new()
        .route("/v1/status/leader", get(cluster::leader))
        .route("/v1/status/peers", get(cluster::peers))
        .route("/v1/agent/self", get(cluster::agent_self))
        .route("/v1/agent/members", get(cluster::members))
        .route("/v1/agent/health", get(agent::health))
        .route(
            "/v1/agent/servers",
            get(agent::servers)
                .put(agent::set_servers)
                .post(agent::set_servers),
        )
        .route("/v1/agent/join", put(agent::join).post(agent::join))
        .route(
            "/v1/agent/force-leave",
            put(agent::force_leave).post(agent::force_leave),
        )
        .route("/v1/regions", get(agent::regions))
}

/// Scaling policies and search (by prefix and fuzzy).
fn scaling_and_search() -> Router<Http> {
    Router::new()
        .route("/v1/scaling/policies", get(scaling::list))
        .route("/v1/scaling/policy/{id}", get(scaling::get))
        .route(
            "/v1/search",
            get(search::prefix_get)
                .post(search::prefix)
                .put(search::prefix),
        )
        .route("/v1/search/fuzzy", post(search::fuzzy).put(search::fuzzy))
}

/// What reaches into a client's allocations: logs, the file system and
/// exec.
fn client() -> Router<Http> {
    Router::new()
        .route("/v1/client/fs/logs/{alloc_id}", get(logs::logs))
        .merge(client_fs::routes())
        .merge(alloc_exec::routes())
}

/// The event stream and the metrics (JSON and Prometheus).
fn events_and_metrics() -> Router<Http> {
    Router::new()
        .route("/v1/event/stream", get(events::stream))
        .route("/v1/metrics", get(metrics::metrics))
        .route("/metrics", get(metrics::prometheus))
}
