//! The one authorization table: every operation of the API, named once
//! with what it needs when ACLs are on. The HTTP routes
//! (`caravan-gateway-http`'s `acl_routes::RULES`) and the gRPC methods
//! (`caravan-gateway-grpc`'s `acl_guard::METHODS`) each name the operation
//! they carry out, so an operation needs the same on both transports.

use super::need::Need;

/// One operation: its name (`job.register`, for tests and logs), what it
/// needs, and whether it is a list over namespaces whose answer keeps to
/// what the token may read (as Nomad's lists with `?namespace=*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    /// The operation's name.
    pub name: &'static str,
    /// What a request needs.
    pub need: Need,
    /// A list cut to what the token may read.
    pub list: bool,
}

const fn op(name: &'static str, need: Need) -> Op {
    Op {
        name,
        need,
        list: false,
    }
}

const fn list(name: &'static str, need: Need) -> Op {
    Op {
        name,
        need,
        list: true,
    }
}

/// The namespace capabilities Nomad's job endpoints check.
const LIST_JOBS: Need = Need::Ns("list-jobs");
const READ_JOB: Need = Need::Ns("read-job");
const SUBMIT_JOB: Need = Need::Ns("submit-job");
const ALLOC_LIFECYCLE: Need = Need::Ns("alloc-lifecycle");
const READ_FS: Need = Need::Ns("read-fs");

// Jobs.
/// List jobs.
pub const JOB_LIST: Op = list("job.list", LIST_JOBS);
/// Register (create or update) a job.
pub const JOB_REGISTER: Op = op("job.register", SUBMIT_JOB);
/// Parse a job specification.
pub const JOB_PARSE: Op = op("job.parse", Need::Ns("parse-job"));
/// Validate a job.
pub const JOB_VALIDATE: Op = op("job.validate", READ_JOB);
/// Read a job.
pub const JOB_READ: Op = op("job.read", READ_JOB);
/// Read a job's submitted source.
pub const JOB_SUBMISSION: Op = op("job.submission", READ_JOB);
/// Deregister (stop or purge) a job.
pub const JOB_DEREGISTER: Op = op("job.deregister", SUBMIT_JOB);
/// Plan a job's update.
pub const JOB_PLAN: Op = op("job.plan", SUBMIT_JOB);
/// Create an evaluation of a job.
pub const JOB_EVALUATE: Op = op("job.evaluate", SUBMIT_JOB);
/// List a job's versions.
pub const JOB_VERSIONS: Op = op("job.versions", READ_JOB);
/// List a job's allocations.
pub const JOB_ALLOCATIONS: Op = op("job.allocations", READ_JOB);
/// List a job's evaluations.
pub const JOB_EVALUATIONS: Op = op("job.evaluations", READ_JOB);
/// Read a job's summary.
pub const JOB_SUMMARY: Op = op("job.summary", READ_JOB);
/// Revert a job to an earlier version.
pub const JOB_REVERT: Op = op("job.revert", SUBMIT_JOB);
/// Mark a job version stable or not.
pub const JOB_STABILITY: Op = op("job.stability", SUBMIT_JOB);
/// Read a job's scaling status.
pub const JOB_SCALE_STATUS: Op = op("job.scale-status", Need::Ns("read-job-scaling"));
/// Scale a job's group.
pub const JOB_SCALE: Op = op("job.scale", Need::Ns("scale-job"));
/// Dispatch a parameterized job.
pub const JOB_DISPATCH: Op = op("job.dispatch", Need::Ns("dispatch-job"));
/// Force a periodic job's launch.
pub const JOB_PERIODIC_FORCE: Op = op("job.periodic-force", SUBMIT_JOB);
/// List a job's deployments.
pub const JOB_DEPLOYMENTS: Op = op("job.deployments", READ_JOB);
/// Read a job's latest deployment.
pub const JOB_DEPLOYMENT: Op = op("job.deployment", READ_JOB);

// Evaluations.
/// List evaluations.
pub const EVAL_LIST: Op = list("eval.list", READ_JOB);
/// Read an evaluation.
pub const EVAL_READ: Op = op("eval.read", READ_JOB);
/// List an evaluation's allocations.
pub const EVAL_ALLOCATIONS: Op = op("eval.allocations", READ_JOB);

// Allocations, and the calls a node answers about them.
/// List allocations.
pub const ALLOC_LIST: Op = list("alloc.list", READ_JOB);
/// Read an allocation.
pub const ALLOC_READ: Op = op("alloc.read", READ_JOB);
/// Stop an allocation.
pub const ALLOC_STOP: Op = op("alloc.stop", ALLOC_LIFECYCLE);
/// Read a task's logs.
pub const ALLOC_LOGS: Op = op("alloc.logs", Need::Ns("read-logs"));
/// List an allocation's directory.
pub const ALLOC_FS_LIST: Op = op("alloc.fs.list", READ_FS);
/// Stat a file of an allocation.
pub const ALLOC_FS_STAT: Op = op("alloc.fs.stat", READ_FS);
/// Read (or stream) a file of an allocation.
pub const ALLOC_FS_READ: Op = op("alloc.fs.read", READ_FS);
/// Read an allocation's resource usage.
pub const ALLOC_STATS: Op = op("alloc.stats", READ_JOB);
/// Read an allocation's health checks.
pub const ALLOC_CHECKS: Op = op("alloc.checks", READ_JOB);
/// Signal an allocation's tasks.
pub const ALLOC_SIGNAL: Op = op("alloc.signal", ALLOC_LIFECYCLE);
/// Restart an allocation's tasks.
pub const ALLOC_RESTART: Op = op("alloc.restart", ALLOC_LIFECYCLE);
/// Run a command in an allocation's task.
pub const ALLOC_EXEC: Op = op("alloc.exec", Need::Exec);
/// Garbage-collect an allocation on its node (Nomad takes submit-job or
/// gc-allocation; the table holds one).
pub const ALLOC_GC: Op = op("alloc.gc", SUBMIT_JOB);

// Nodes.
/// List nodes.
pub const NODE_LIST: Op = op("node.list", Need::NodeRead);
/// Read a node.
pub const NODE_READ: Op = op("node.read", Need::NodeRead);
/// List a node's allocations.
pub const NODE_ALLOCATIONS: Op = list("node.allocations", Need::NodeRead);
/// Set a node's scheduling eligibility.
pub const NODE_ELIGIBILITY: Op = op("node.eligibility", Need::NodeWrite);
/// Drain a node.
pub const NODE_DRAIN: Op = op("node.drain", Need::NodeWrite);
/// Create evaluations for a node's jobs.
pub const NODE_EVALUATE: Op = op("node.evaluate", Need::NodeWrite);
/// Purge a node.
pub const NODE_PURGE: Op = op("node.purge", Need::NodeWrite);
/// Read a node's host resource usage.
pub const NODE_STATS: Op = op("node.stats", Need::NodeRead);
/// Garbage-collect a node's terminal allocations.
pub const NODE_GC: Op = op("node.gc", Need::NodeWrite);

// Node pools, as Nomad's: a pool capability on the pool named (by the URL,
// or the body of a write); the list shows the pools the token reads.
/// List node pools.
pub const NODE_POOL_LIST: Op = list("node-pool.list", Need::NodePool("read"));
/// Read a node pool.
pub const NODE_POOL_READ: Op = op("node-pool.read", Need::NodePool("read"));
/// Create or update a node pool.
pub const NODE_POOL_WRITE: Op = op("node-pool.write", Need::NodePool("write"));
/// Delete a node pool.
pub const NODE_POOL_DELETE: Op = op("node-pool.delete", Need::NodePool("delete"));
/// List a node pool's nodes.
pub const NODE_POOL_NODES: Op = op("node-pool.nodes", Need::PoolNodes);
/// List a node pool's jobs.
pub const NODE_POOL_JOBS: Op = list("node-pool.jobs", Need::PoolJobs);

// Namespaces: reads show what the token is granted anything in (the
// handlers filter); writes are a management token's, as Nomad's.
/// List namespaces.
pub const NAMESPACE_LIST: Op = op("namespace.list", Need::Public);
/// Read a namespace.
pub const NAMESPACE_READ: Op = op("namespace.read", Need::NamespaceAny);
/// Create or update a namespace.
pub const NAMESPACE_WRITE: Op = op("namespace.write", Need::Management);
/// Delete a namespace.
pub const NAMESPACE_DELETE: Op = op("namespace.delete", Need::Management);

// Deployments.
/// List deployments.
pub const DEPLOYMENT_LIST: Op = list("deployment.list", READ_JOB);
/// Read a deployment.
pub const DEPLOYMENT_READ: Op = op("deployment.read", READ_JOB);
/// List a deployment's allocations.
pub const DEPLOYMENT_ALLOCATIONS: Op = op("deployment.allocations", READ_JOB);
/// Promote a deployment's canaries.
pub const DEPLOYMENT_PROMOTE: Op = op("deployment.promote", SUBMIT_JOB);
/// Fail a deployment.
pub const DEPLOYMENT_FAIL: Op = op("deployment.fail", SUBMIT_JOB);
/// Pause or resume a deployment.
pub const DEPLOYMENT_PAUSE: Op = op("deployment.pause", SUBMIT_JOB);
/// Set the health of a deployment's allocations.
pub const DEPLOYMENT_ALLOC_HEALTH: Op = op("deployment.alloc-health", SUBMIT_JOB);

// Operator, system and status.
/// Read the scheduler configuration.
pub const SCHEDULER_CONFIG_READ: Op = op("operator.scheduler.read", Need::OperatorRead);
/// Update the scheduler configuration.
pub const SCHEDULER_CONFIG_WRITE: Op = op("operator.scheduler.write", Need::OperatorWrite);
/// Read the raft configuration.
pub const RAFT_CONFIG_READ: Op = op("operator.raft.read", Need::OperatorRead);
/// Run a garbage collection.
pub const SYSTEM_GC: Op = op("system.gc", Need::Management);
/// Name the leader.
pub const STATUS_LEADER: Op = op("status.leader", Need::Public);
/// Name the peers.
pub const STATUS_PEERS: Op = op("status.peers", Need::Public);
/// List the regions.
pub const REGIONS: Op = op("regions.list", Need::Public);
/// The metrics, which scrapers read without a token.
pub const METRICS: Op = op("metrics", Need::Public);

// The agent.
/// The agent's health: load balancers and orchestrators probe it without
/// a token, as Nomad allows.
pub const AGENT_HEALTH: Op = op("agent.health", Need::Public);
/// Read the agent's own configuration.
pub const AGENT_SELF: Op = op("agent.self", Need::AgentRead);
/// List the cluster's members.
pub const AGENT_MEMBERS: Op = op("agent.members", Need::NodeRead);
/// List the agent's servers.
pub const AGENT_SERVERS_READ: Op = op("agent.servers.read", Need::AgentRead);
/// Set the agent's servers.
pub const AGENT_SERVERS_WRITE: Op = op("agent.servers.write", Need::AgentWrite);
/// Join the agent to others.
pub const AGENT_JOIN: Op = op("agent.join", Need::AgentWrite);
/// Force a member to leave.
pub const AGENT_FORCE_LEAVE: Op = op("agent.force-leave", Need::AgentWrite);

// Scaling policies.
/// List scaling policies.
pub const SCALING_POLICY_LIST: Op = list("scaling-policy.list", Need::Ns("list-scaling-policies"));
/// Read a scaling policy.
pub const SCALING_POLICY_READ: Op = op("scaling-policy.read", Need::Ns("read-scaling-policy"));

// Reads across kinds, kept to what the token may read (see
// `crate::search` and `crate::events`).
/// Search by prefix.
pub const SEARCH: Op = op("search", Need::AnyRead);
/// Search by fuzzy match.
pub const SEARCH_FUZZY: Op = op("search.fuzzy", Need::AnyRead);
/// Stream events.
pub const EVENT_STREAM: Op = op("event.stream", Need::AnyRead);

// Workload identity verification keys and OIDC discovery: public.
/// The workload identity signing keys.
pub const IDENTITY_KEYS: Op = op("identity.keys", Need::Public);
/// The OIDC discovery document.
pub const IDENTITY_DISCOVERY: Op = op("identity.discovery", Need::Public);

// Service discovery, as Nomad's: reading a service is reading jobs (or
// holding a workload identity); removing an instance takes submit-job.
/// List services.
pub const SERVICE_LIST: Op = list("service.list", Need::ServiceRead);
/// Read a service's instances.
pub const SERVICE_READ: Op = op("service.read", Need::ServiceRead);
/// Remove a service instance.
pub const SERVICE_DELETE: Op = op("service.delete", SUBMIT_JOB);

// Variables.
/// List variables.
pub const VAR_LIST: Op = list("var.list", Need::Var("list"));
/// Read a variable.
pub const VAR_READ: Op = op("var.read", Need::Var("read"));
/// Write a variable.
pub const VAR_WRITE: Op = op("var.write", Need::Var("write"));
/// Delete a variable.
pub const VAR_DELETE: Op = op("var.delete", Need::Var("destroy"));

// ACL policies and tokens.
/// Bootstrap the ACL system: anyone, once.
pub const ACL_BOOTSTRAP: Op = op("acl.bootstrap", Need::Public);
/// List policies (a client token sees its own).
pub const ACL_POLICY_LIST: Op = op("acl.policy.list", Need::Token);
/// Read a policy (a client token reads its own).
pub const ACL_POLICY_READ: Op = op("acl.policy.read", Need::Token);
/// Create or update a policy.
pub const ACL_POLICY_WRITE: Op = op("acl.policy.write", Need::Management);
/// Delete a policy.
pub const ACL_POLICY_DELETE: Op = op("acl.policy.delete", Need::Management);
/// List tokens.
pub const ACL_TOKEN_LIST: Op = op("acl.token.list", Need::Management);
/// Read a token (a client token reads itself).
pub const ACL_TOKEN_READ: Op = op("acl.token.read", Need::Token);
/// Read the caller's own token.
pub const ACL_TOKEN_SELF: Op = op("acl.token.self", Need::Token);
/// Create or update a token.
pub const ACL_TOKEN_WRITE: Op = op("acl.token.write", Need::Management);
/// Delete a token.
pub const ACL_TOKEN_DELETE: Op = op("acl.token.delete", Need::Management);

/// A route that lacks the name or id it needs: it only answers 400 or
/// 404, so anyone may hear that.
pub const INCOMPLETE: Op = op("incomplete", Need::Public);
