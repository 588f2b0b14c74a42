//! The gateway's flows across services, in one binary: work forwarded to the
//! broker, conflicting writes, the event stream, job operations and ACLs
//! over both APIs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

mod acl;
mod acl_node_pools;
mod acl_transports;
mod broker;
mod client_fs;
mod conflicts;
mod events;
mod grpc_acl;
mod job_ops;
mod register_reads;
mod simulated_nodes;
mod workload_identity;
