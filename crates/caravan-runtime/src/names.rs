//! The name of each Caravan service: its configuration's environment prefix
//! (`CARAVAN_<NAME>__`), its leader key (`<prefix>/leader/<name>`), its
//! binary (`caravan-<name>`) and what its logs call it.

/// The public gRPC and HTTP APIs and the node-facing API.
pub const API_GATEWAY: &str = "api-gateway";
/// The leader-elected queues of evaluations.
pub const EVAL_BROKER: &str = "eval-broker";
/// The leader-elected verifier and writer of plans.
pub const PLAN_APPLIER: &str = "plan-applier";
/// The replicas that run the scheduler on dequeued evaluations.
pub const SCHEDULER_WORKER: &str = "scheduler-worker";
/// The leader-elected follower of deployments.
pub const DEPLOYMENT_WATCHER: &str = "deployment-watcher";
/// The agent that runs a machine's allocations.
pub const CLIENT_NODE: &str = "client-node";

/// Every service, in the order a cluster starts them.
pub const ALL: [&str; 6] = [
    API_GATEWAY,
    EVAL_BROKER,
    PLAN_APPLIER,
    SCHEDULER_WORKER,
    DEPLOYMENT_WATCHER,
    CLIENT_NODE,
];

/// The services that elect a leader (and campaign on `leader/<name>`).
pub const LEADER_ELECTED: [&str; 3] = [EVAL_BROKER, PLAN_APPLIER, DEPLOYMENT_WATCHER];

/// The binary a service runs as, e.g. `caravan-eval-broker`.
pub fn binary(service: &str) -> String {
    format!("caravan-{service}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leader_elected_services_are_services_and_binaries_are_prefixed() {
        assert!(LEADER_ELECTED.iter().all(|s| ALL.contains(s)));
        assert_eq!(binary(EVAL_BROKER), "caravan-eval-broker");
    }
}
