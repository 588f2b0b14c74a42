//! Caravan end to end: the real service binaries as child processes around a
//! real etcd, for the integration tests and the end-to-end benchmark.

pub mod batch_once;
pub mod binaries;
pub mod clock;
pub mod cluster;
pub mod cost;
pub mod docker;
pub mod etcd;
pub mod etcd_cluster;
pub mod etcd_traffic;
pub mod fault_proxy;
pub mod fuse_disk;
pub mod http;
pub mod jobs;
pub mod overcommit;
pub mod process;
pub mod prom;
pub mod service_traffic;
pub mod state;
pub mod tls;
pub mod wait;

pub use cluster::{Cluster, GatewayAddrs, Service};
pub use cost::ProcessCost;
pub use etcd::{EtcdProcess, EtcdTlsFiles};
pub use etcd_cluster::{EtcdCluster, EtcdClusterOptions};
pub use fault_proxy::FaultProxy;
pub use fuse_disk::FuseDisk;
pub use http::{HttpApi, HttpReply};
pub use state::ClusterState;
pub use wait::{Progress, wait_for, wait_for_pids};
