//! Cluster status: the current leader of each leader-elected service.

use std::collections::BTreeMap;

use caravan_runtime::names::LEADER_ELECTED;
use caravan_store::{Revision, current_leader};

use crate::error::Result;
use crate::gateway::Gateway;

/// Service name → leader address, for the services that have one now, and
/// the store revision the answer was read at.
pub async fn leaders(gw: &Gateway) -> Result<(BTreeMap<String, String>, Revision)> {
    let mut out = BTreeMap::new();
    for service in LEADER_ELECTED {
        if let Some(addr) = current_leader(gw.store.as_ref(), &gw.keys.leader(service)).await? {
            out.insert(service.to_string(), addr);
        }
    }
    let revision = gw.store.current_revision().await?;
    Ok((out, revision))
}
