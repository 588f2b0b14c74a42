//! Caravan's plan-applier service: the one writer of placements.
//!
//! The leader (elected on `<prefix>/leader/plan-applier`, fenced) takes the
//! plans of the scheduler workers from a priority queue, checks each plan's
//! delivery token with the eval broker, refuses plans computed before the
//! last change to their job, verifies every node in parallel against its
//! watch cache plus the plans it committed that the cache has not seen yet,
//! and commits what fits in fenced transactions, split by node when over
//! budget. Verification of the next plan overlaps the commit of the
//! previous one. Followers answer UNAVAILABLE naming the leader.
//! [`PlanApplierService`] is how a process or `caravan dev` runs it.

mod applier;
mod commit;
mod config;
mod error;
pub mod metrics;
mod mutation;
mod overlay;
mod queue;
mod service;
mod tokens;
mod verify;

#[cfg(test)]
mod fixtures;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use caravan_proto::plan_applier_service_server::{self, PlanApplierServiceServer};
use caravan_runtime::leader::{Candidate, LeaderChannel, serve_and_lead};
use caravan_runtime::names::{EVAL_BROKER, PLAN_APPLIER};
use caravan_runtime::service::{Service, Serving};
use caravan_store::Store;

pub use applier::{PlanApplier, Settings};
pub use config::PlanApplierConfig;
pub use error::ApplierError;
pub use tokens::TokenCheck;

use crate::service::PlanApplierGrpc;
use crate::tokens::BrokerTokens;

/// The largest plan message accepted: a plan of thousands of allocations is
/// well over tonic's default of 4 MiB.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// The plan applier as a service: serves gRPC and campaigns for
/// leadership, applying plans while it leads. By default it checks delivery
/// tokens with the eval broker's leader.
#[derive(Clone, Default)]
pub struct PlanApplierService {
    tokens: Option<Arc<dyn TokenCheck>>,
}

impl PlanApplierService {
    /// An applier that checks delivery tokens with `tokens` instead of the
    /// eval broker (tests and benchmarks use fakes).
    pub fn with_tokens(tokens: Arc<dyn TokenCheck>) -> Self {
        PlanApplierService {
            tokens: Some(tokens),
        }
    }
}

impl std::fmt::Debug for PlanApplierService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanApplierService")
            .field("own_token_check", &self.tokens.is_some())
            .finish()
    }
}

impl Service for PlanApplierService {
    const NAME: &'static str = PLAN_APPLIER;
    const LEADER_ELECTED: bool = true;
    const GRPC_SERVICES: &'static [&'static str] = &[plan_applier_service_server::SERVICE_NAME];
    type Config = PlanApplierConfig;
    type Store = Arc<dyn Store>;
    type Ready = ();

    async fn serve(
        self,
        config: PlanApplierConfig,
        store: Arc<dyn Store>,
        serving: Serving<()>,
    ) -> anyhow::Result<()> {
        metrics::register();
        let prefix = config.store.prefix.clone();
        let tokens = self.tokens.unwrap_or_else(|| {
            Arc::new(BrokerTokens::new(
                LeaderChannel::new(store.clone(), &prefix, EVAL_BROKER),
                Duration::from_millis(config.broker_timeout_ms),
            ))
        });
        let applier = Arc::new(PlanApplier::new(
            store.clone(),
            &prefix,
            tokens,
            Settings::from(&config),
        ));
        let handler = Arc::new(PlanApplierGrpc::new(applier.clone()));
        let grpc = PlanApplierServiceServer::from_arc(handler.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        // Workers of this process hand plans to the handler the port serves
        // as they stand, without encoding a thousand allocations to decode
        // them again.
        let handler: Arc<dyn plan_applier_service_server::PlanApplierService> = handler;
        let _direct = caravan_runtime::local::register(&serving.advertise_addr, grpc.clone())
            .map(|r| r.with_handler(handler));
        let router = serving.router.add_service(grpc);
        let (local, address) = (serving.local_addr, serving.advertise_addr);
        tracing::info!(%local, %address, prefix, "plan-applier serving");
        serving.ready.report(());
        let candidate = Candidate {
            store,
            prefix,
            service: PLAN_APPLIER,
            address,
            ttl: Duration::from_millis(config.leader_ttl_ms.max(1_000)),
        };
        serve_and_lead(
            router,
            serving.listener,
            candidate,
            serving.shutdown,
            |leadership, stop| {
                let applier = applier.clone();
                async move { applier.lead(leadership, stop).await }
            },
        )
        .await
        .context("grpc server")?;
        Ok(())
    }
}
