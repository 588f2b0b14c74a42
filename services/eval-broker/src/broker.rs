//! The broker of one replica across leadership terms: the watch cache it
//! keeps warm while standing by, the current term while leading, and the
//! not-leader answer (naming the leader) while not.

use std::sync::Arc;
use std::time::Duration;

use caravan_runtime::term::CurrentTerm;
use caravan_state::Informer;
use caravan_store::{Leadership, Store};
use tokio_util::sync::CancellationToken;

use crate::compact;
use crate::config::EvalBrokerConfig;
use crate::drain::enforcer::DrainEnforcer;
use crate::error::BrokerError;
use crate::follow::Follower;
use crate::gc::collector;
use crate::metrics;
use crate::periodic::launcher::PeriodicLauncher;
use crate::term::LeaderTerm;
use crate::writes::EvalWriter;

/// How long a new leader waits for its cache to reach the store's revision.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(30);

/// One replica of the eval broker.
pub struct EvalBroker {
    store: Arc<dyn Store>,
    informer: Arc<Informer>,
    config: Arc<EvalBrokerConfig>,
    terms: CurrentTerm<LeaderTerm>,
}

impl EvalBroker {
    /// A replica following `informer`, campaigning in `election` as
    /// `advertise_addr`.
    pub fn new(
        store: Arc<dyn Store>,
        informer: Arc<Informer>,
        config: Arc<EvalBrokerConfig>,
        election: String,
        advertise_addr: String,
    ) -> Self {
        EvalBroker {
            terms: CurrentTerm::new(Arc::clone(&store), election, advertise_addr),
            store,
            informer,
            config,
        }
    }

    /// The current term, or the not-leader error naming the leader.
    pub async fn term(&self) -> Result<Arc<LeaderTerm>, BrokerError> {
        self.terms
            .current_or_not_leader()
            .await
            .map_err(|leader| BrokerError::NotLeader { leader })
    }

    /// Leads one term: waits for the cache to reach the store, restores the
    /// queues, serves until leadership is lost or `stop` fires, then drops
    /// every in-memory queue.
    pub async fn lead(&self, leadership: Arc<Leadership>, stop: CancellationToken) {
        if !self.terms.catch_up(&self.informer, CATCH_UP_TIMEOUT).await {
            return;
        }
        let writer = EvalWriter::new(
            leadership,
            Arc::clone(&self.store),
            self.informer.keyspace().clone(),
            self.config.max_txn_ops,
        );
        let (term, effects) = LeaderTerm::new(
            writer,
            Arc::clone(&self.informer),
            Arc::clone(&self.config),
            stop.child_token(),
        );
        let follower = Follower::restore(Arc::clone(&term), effects);
        let launcher = PeriodicLauncher::new(Arc::clone(&term));
        let enforcer = DrainEnforcer::new(Arc::clone(&term));
        self.terms.begin(Arc::clone(&term), term.stop.clone());
        tracing::info!(address = %self.terms.advertise_addr(), "eval broker leading");
        // The term's tasks run side by side; the first to fail ends them all.
        let until_failed = |name: &'static str, result: Result<(), BrokerError>| {
            match &result {
                Ok(()) => {}
                Err(err) if err.is_deposed() => {
                    tracing::warn!(task = name, "deposed; dropping the eval queues");
                }
                Err(err) => tracing::error!(task = name, error = %err, "eval broker term failed"),
            }
            if result.is_err() {
                term.stop.cancel();
            }
        };
        tokio::join!(
            async { until_failed("queues", follower.run().await) },
            async { until_failed("periodic launcher", launcher.run().await) },
            async { until_failed("drain deadlines", enforcer.run().await) },
            async { until_failed("garbage collector", collector::run(Arc::clone(&term)).await) },
            async { until_failed("compactor", compact::run(Arc::clone(&term)).await) },
            async { until_failed("queue metrics", metrics::run(&term).await) },
        );
        term.stop.cancel();
        self.terms.end();
        term.ready.notify_waiters();
        tracing::info!("eval broker term ended");
    }
}
