//! What drivers left behind for allocs this node no longer runs (a
//! container whose alloc record was lost, or whose alloc was gone when the
//! client came back), and the network namespaces of such allocs, are removed once the node knows its allocs, and every
//! few minutes after, as Nomad's docker driver reconciles dangling
//! containers.

use std::sync::Arc;
use std::time::Duration;

use crate::alloc_runner::NodeContext;
use crate::network::{self, Networks};

/// Time between two sweeps.
const PERIOD: Duration = Duration::from_secs(300);

/// Sweeps now and every [`PERIOD`] until the client stops.
pub fn sweep_periodically(ctx: Arc<NodeContext>) {
    tokio::spawn(async move {
        loop {
            sweep(&ctx).await;
            tokio::select! {
                _ = tokio::time::sleep(PERIOD) => {}
                _ = ctx.shutdown.cancelled() => return,
            }
        }
    });
}

/// Asks every driver to remove what it left for allocs without a runner.
pub async fn sweep(ctx: &NodeContext) {
    let live = ctx.live.clone();
    let is_live = move |id: &str| live.contains(id);
    for (_, driver) in ctx.drivers.iter() {
        driver.remove_orphans(&is_live).await;
    }
    sweep_networks(ctx).await;
}

/// Tears down the network namespaces (and their CNI attachments) of allocs
/// without a runner: left by a client that died, or whose teardown failed.
async fn sweep_networks(ctx: &NodeContext) {
    let Some(data_dir) = ctx.data_dir.clone().filter(|_| !ctx.simulated) else {
        return;
    };
    let live = ctx.live.clone();
    let swept = tokio::task::spawn_blocking(move || {
        let networks = Networks::new(&data_dir, network::DEFAULT_PLUGIN_DIR);
        for alloc in networks.allocs() {
            if live.contains(&alloc) {
                continue;
            }
            match networks.teardown(&alloc) {
                Ok(()) => tracing::info!(%alloc, "removed the network of a gone alloc"),
                Err(e) => {
                    tracing::warn!(%alloc, error = %e, "cannot remove the network of a gone alloc")
                }
            }
        }
    })
    .await;
    if let Err(e) = swept {
        tracing::warn!(error = %e, "network sweep");
    }
}
