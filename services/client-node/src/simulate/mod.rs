//! Simulated nodes: N virtual nodes in one process for load tests, each with
//! its own id, name (`sim-<i>`), heartbeat and alloc stream, running every
//! task with the mock driver. They are tokio tasks, not threads, and share
//! the process's connections: a pool for alloc streams and status updates,
//! and the heartbeat thread's for registrations and heartbeats.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::alloc_runner::NodeContext;
use crate::config::ClientConfig;
use crate::driver::Drivers;
use crate::error::ClientError;
use crate::fingerprint::{HostFacts, build_node};
use crate::gateway::Gateway;
use crate::node_agent::NodeAgent;
use crate::shared_jobs::SharedJobs;
use crate::state_dir::StateDir;
use crate::status_reporter::StatusSink;

/// Longest spread of the simulated nodes' first registrations.
const MAX_REGISTER_SPREAD: Duration = Duration::from_secs(10);

/// A stable node id for simulated node `index`, derived from `seed`.
pub fn simulated_node_id(seed: &str, index: u32) -> String {
    let hash = |salt: u64| {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ salt;
        for b in seed.bytes().chain(index.to_le_bytes()) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    };
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&hash(1).to_le_bytes());
    bytes[8..].copy_from_slice(&hash(2).to_le_bytes());
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// The secret of simulated node `index`: stable across runs of the same data
/// dir (the servers keep the hash of the first one), derived from the
/// private `secret_seed` by SHA-256 so that neither node ids nor other nodes'
/// secrets give it away.
pub fn simulated_node_secret(secret_seed: &str, index: u32) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(secret_seed.as_bytes());
    h.update(index.to_le_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Builds the agents of `config.simulate` simulated nodes.
pub async fn simulated_agents(
    config: &ClientConfig,
    state: &StateDir,
    ip: IpAddr,
    http_addr: &str,
    shutdown: &CancellationToken,
) -> Result<Vec<NodeAgent>, ClientError> {
    let n = config.simulate;
    let seed = state.stable_id("simulation-seed")?;
    let secret_seed = state.stable_secret("simulation-secret")?;
    let res = &config.simulate_resources;
    let cores = res.cores.max(1);
    let servers = config.server_addrs();
    let per_channel = config.simulate_nodes_per_channel.max(1);
    // One gateway set for every node: one TLS handshake per connection,
    // not per node, and one heartbeat thread for the process.
    let gateway = Gateway::pooled(
        &servers,
        &config.heartbeat_addrs(),
        n.div_ceil(per_channel) as usize,
    )?;
    let spread = Duration::from_millis(u64::from(n)).min(MAX_REGISTER_SPREAD);
    let drivers = Drivers::simulated();
    let fingerprints = drivers.fingerprints().await;
    let mut agents = Vec::with_capacity(n as usize);
    let jobs = Arc::new(SharedJobs::default());
    // One registry: the node API serves every simulated node's allocs.
    let live: Arc<crate::live_allocs::LiveAllocs> = Arc::default();
    for i in 0..n {
        let name = format!("sim-{i}");
        let facts = HostFacts {
            cores,
            core_mhz: Some(res.cpu_mhz / u64::from(cores)),
            cpu_model: Some("simulated".into()),
            memory_bytes: Some(res.memory_mb.saturating_mul(1024 * 1024)),
            disk_free_bytes: Some(res.disk_mb.saturating_mul(1024 * 1024)),
            kernel_name: "linux".into(),
            kernel_version: "simulated".into(),
            os_name: "simulated".into(),
            os_version: String::new(),
            hostname: name.clone(),
            ip,
            interfaces: Vec::new(),
            bridge_network: false,
            cni_plugins: Default::default(),
        };
        let node_config = ClientConfig {
            name: name.clone(),
            cpu_total_mhz: res.cpu_mhz,
            memory_mb: res.memory_mb,
            disk_mb: res.disk_mb,
            ..config.clone()
        };
        let node = build_node(
            &node_config,
            &facts,
            &simulated_node_id(&seed, i),
            http_addr,
            &fingerprints,
        );
        let ctx = Arc::new(NodeContext {
            node: Arc::new(node),
            drivers: drivers.clone(),
            data_dir: None,
            state: None,
            sink: StatusSink::new(config.update_max_batch),
            shutdown: shutdown.clone(),
            stop_on_shutdown: false,
            max_kill_timeout: Duration::from_millis(config.max_kill_timeout_ms),
            jobs: Arc::clone(&jobs),
            live: Arc::clone(&live),
            simulated: true,
            contact: Default::default(),
            api: None,
            hook_config: Default::default(),
        });
        agents.push(NodeAgent {
            ctx,
            // A few nodes per bulk connection: one HTTP/2 connection caps
            // its streams.
            gateway: gateway.for_node((i / per_channel) as usize),
            secret_id: simulated_node_secret(&secret_seed, i),
            update_interval: config.update_interval(),
            initial_delay: spread.mul_f64(f64::from(i) / f64::from(n.max(1))),
            recovered: Default::default(),
            // A simulated node's drivers never change.
            node_updates: None,
        });
    }
    Ok(agents)
}

#[cfg(test)]
mod footprint_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_distinct_uuids() {
        let a = simulated_node_id("seed", 1);
        assert_eq!(a, simulated_node_id("seed", 1));
        assert_ne!(a, simulated_node_id("seed", 2));
        assert_ne!(a, simulated_node_id("other", 1));
        assert!(uuid::Uuid::parse_str(&a).is_ok());
    }

    #[tokio::test]
    async fn agents_have_their_own_names_and_share_channels() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        let config = ClientConfig {
            simulate: 5,
            simulate_nodes_per_channel: 2,
            ..Default::default()
        };
        let agents = simulated_agents(
            &config,
            &state,
            "127.0.0.1".parse().unwrap(),
            "127.0.0.1:4660",
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(agents.len(), 5);
        let names: Vec<&str> = agents.iter().map(|a| a.ctx.node.name.as_str()).collect();
        assert_eq!(names, vec!["sim-0", "sim-1", "sim-2", "sim-3", "sim-4"]);
        let first = &agents[0].ctx.node;
        assert_eq!(first.resources.as_ref().unwrap().cpu_mhz, 16_000);
        assert_eq!(first.attributes["driver.mock"], "1");
        // Same class for all: only unique attributes differ.
        assert!(
            agents
                .iter()
                .all(|a| a.ctx.node.computed_class == first.computed_class)
        );
        assert!(agents[4].initial_delay > agents[1].initial_delay);
        // Each node has its own secret, the same on the next run.
        let secrets: std::collections::BTreeSet<&str> =
            agents.iter().map(|a| a.secret_id.as_str()).collect();
        assert_eq!(secrets.len(), 5);
        let again = simulated_agents(
            &config,
            &state,
            "127.0.0.1".parse().unwrap(),
            "127.0.0.1:4660",
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(again[3].secret_id, agents[3].secret_id);
        assert_ne!(agents[3].secret_id, agents[3].ctx.node.id);
    }
}
