//! The cluster's scheduler configuration: read from the cache, written with
//! an optional check-and-set on its mod revision.

use caravan_proto::{PreemptionConfig, SchedulerAlgorithm, SchedulerConfiguration};
use caravan_state::encode;
use caravan_store::{Compare, CompareOp, Op, Revision, Txn};

use crate::error::{GatewayError, Result};
use crate::gateway::Gateway;

/// The configuration in force when none was ever written: binpack, and
/// preemption for system jobs only.
pub fn default_config() -> SchedulerConfiguration {
    let mut config = SchedulerConfiguration {
        preemption_config: Some(PreemptionConfig {
            system_scheduler_enabled: true,
            ..Default::default()
        }),
        ..Default::default()
    };
    config.set_scheduler_algorithm(SchedulerAlgorithm::Binpack);
    config
}

/// The configuration in force, from the cache.
pub fn get(gw: &Gateway) -> (SchedulerConfiguration, Revision) {
    let snap = gw.cache.snapshot();
    let config = snap.scheduler_config().map_or_else(default_config, |c| **c);
    (config, snap.revision())
}

/// Writes `config`; with `cas`, only if the stored configuration's mod
/// revision equals it (0: only if none was written). Returns whether it was
/// written and the revision.
pub async fn set(
    gw: &Gateway,
    mut config: SchedulerConfiguration,
    cas: Option<Revision>,
) -> Result<(bool, Revision)> {
    if SchedulerAlgorithm::try_from(config.scheduler_algorithm).is_err() {
        return Err(GatewayError::field(
            "SchedulerAlgorithm",
            "invalid scheduler algorithm",
        ));
    }
    if config.scheduler_algorithm() == SchedulerAlgorithm::Unspecified {
        config.set_scheduler_algorithm(SchedulerAlgorithm::Binpack);
    }
    config.create_revision = 0;
    config.modify_revision = 0;
    let key = gw.keys.scheduler_config();
    let mut txn = Txn::new();
    if let Some(cas) = cas {
        txn = txn.when(if cas == 0 {
            Compare::absent(key.clone())
        } else {
            Compare::mod_revision(key.clone(), CompareOp::Equal, cas)
        });
    }
    let result = gw
        .store
        .txn(txn.and_then(Op::put(key, encode(&config))))
        .await?;
    if result.succeeded {
        gw.settle(result.revision).await;
    }
    Ok((result.succeeded, result.revision))
}
