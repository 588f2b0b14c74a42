//! What drivers left behind for allocs this node no longer runs (a
//! container whose alloc record was lost, or whose alloc was gone when the
//! client came back) is removed once the node knows its allocs, and every
//! few minutes after, as Nomad's docker driver reconciles dangling
//! containers.

use std::sync::Arc;
use std::time::Duration;

use crate::alloc_runner::NodeContext;

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
}
