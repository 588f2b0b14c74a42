//! The api-gateway's domain core: the state handles ([`gateway::Gateway`]:
//! store, keyspace, watch cache, configuration, shutdown) and the
//! operations every surface calls: jobs, evaluations, allocations, nodes,
//! deployments, variables, ACLs, search, scaling, the operator's verbs and
//! the event stream. Nothing here knows a transport: Nomad's HTTP API
//! (`caravan-gateway-http`), the public gRPC API (`caravan-gateway-grpc`)
//! and the node-facing API (`caravan-gateway-node`) are crates over this
//! one, so the compiler keeps the core from importing them.

pub mod acl;
pub mod alloc_exec;
pub mod allocs;
pub mod broker;
pub mod cas;
pub mod client_fs;
pub mod config;
pub mod deployments;
pub mod error;
pub mod evals;
pub mod events;
pub mod gateway;
pub mod identity;
pub mod jobs;
pub mod lane;
pub mod logs;
pub mod metrics;
pub mod namespaces;
pub mod node_fan_out;
pub mod node_pools;
pub mod nodes;
pub mod operator;
pub mod query;
pub mod scaling;
pub mod search;
pub mod service_registry;
pub mod status;
pub mod store_health;
pub mod uncached;
pub mod vars;
pub mod waiting;

use std::net::SocketAddr;

use caravan_state::{AllocDetail, InformerConfig};

pub use gateway::Gateway;

/// The addresses a running gateway listens on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// The gRPC API.
    pub grpc: SocketAddr,
    /// The HTTP API.
    pub http: SocketAddr,
    /// The heartbeat listener, when `heartbeat_addr` asks for one.
    pub heartbeat: Option<SocketAddr>,
}

/// The gateway's watch cache keeps allocations without their placement
/// metrics: lists, client streams and status bookkeeping never read them,
/// and the answers that show one whole allocation read it from the store.
/// The status writer writes only an allocation's status key, so it needs
/// nothing of the record the cache leaves out.
pub fn cache_config() -> InformerConfig {
    InformerConfig {
        alloc_detail: AllocDetail::WithoutMetrics,
        ..InformerConfig::default()
    }
}
