//! The tiers of the dev cluster: services started in this process through
//! the runtime's one way to run a service, stopped tier by tier.

use std::net::SocketAddr;

use caravan_runtime::service::{Running, Service};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// A service task's name and outcome.
pub(crate) type Served = (&'static str, anyhow::Result<()>);

/// Services that stop together, on one token.
#[derive(Debug, Default)]
pub(crate) struct Tier {
    stop: CancellationToken,
    running: JoinSet<Served>,
    /// The leader-elected services started here.
    leaders: Vec<&'static str>,
}

impl Tier {
    /// Starts `service` with `config` on `store` and waits until it is up;
    /// returns what it reported and where it listens.
    pub(crate) async fn start<S>(
        &mut self,
        service: S,
        config: S::Config,
        store: S::Store,
    ) -> anyhow::Result<(S::Ready, SocketAddr)>
    where
        S: Service,
        S::Ready: Clone,
    {
        let running: Running<S> =
            caravan_runtime::service::start(service, config, store, self.stop.clone()).await?;
        if S::LEADER_ELECTED {
            self.leaders.push(S::NAME);
        }
        let started = (running.ready.clone(), running.local_addr);
        self.running
            .spawn(async move { (S::NAME, running.stopped().await) });
        Ok(started)
    }

    /// The leader-elected services of this tier.
    pub(crate) fn leaders(&self) -> &[&'static str] {
        &self.leaders
    }

    /// The next service to stop, once one does.
    pub(crate) async fn next_stopped(&mut self) -> Option<Served> {
        match self.running.join_next().await? {
            Ok(served) => Some(served),
            Err(e) => Some(("a service", Err(anyhow::anyhow!("task failed: {e}")))),
        }
    }

    /// Stops every service of the tier and waits for them; the first
    /// failure, naming its service.
    pub(crate) async fn stop(&mut self) -> anyhow::Result<()> {
        self.stop.cancel();
        let mut result = Ok(());
        while let Some((name, served)) = self.next_stopped().await {
            if let Err(e) = served
                && result.is_ok()
            {
                result = Err(e.context(name));
            }
        }
        result
    }
}

/// The dev cluster's services by tier, in the order they stop.
#[derive(Debug, Default)]
pub(crate) struct Tiers {
    /// The client node: stopped first, so its tasks are killed while the
    /// services it reports to still run.
    pub(crate) edge: Tier,
    /// The gateway and the scheduler worker: stopped before the services
    /// they call, so no eval is left mid-flight waiting for a leader.
    pub(crate) front: Tier,
    /// The leader-elected services: the eval broker, the plan applier and
    /// the deployment watcher.
    pub(crate) back: Tier,
}

impl Tiers {
    /// The next service to stop, in any tier, once one does.
    pub(crate) async fn next_stopped(&mut self) -> Served {
        tokio::select! {
            Some(done) = self.edge.next_stopped() => done,
            Some(done) = self.front.next_stopped() => done,
            Some(done) = self.back.next_stopped() => done,
            else => std::future::pending().await,
        }
    }

    /// Stops tier after tier; the first failure.
    pub(crate) async fn stop(&mut self) -> anyhow::Result<()> {
        let mut result = Ok(());
        for tier in [&mut self.edge, &mut self.front, &mut self.back] {
            let stopped = tier.stop().await;
            if result.is_ok() {
                result = stopped;
            }
        }
        result
    }
}
