//! Workload identities: the cluster's signing keyring (kept in the store,
//! created once by the first gateway that needs it), the claims of a task's
//! identity, signing them for the node that runs the task, and verifying a
//! presented token. The ACL side (what a verified token may do) lives in
//! `acl::workload`.

pub mod claims;
pub mod keyring;
pub mod sign;

pub use keyring::Keyring;

use std::sync::Arc;

use crate::error::Result;
use crate::gateway::Gateway;

/// The keyring, loaded (or created) on first use and kept for the life of
/// the gateway: keys are never rotated or removed, so a copy cannot go stale.
pub async fn keyring(gw: &Gateway) -> Result<Arc<Keyring>> {
    gw.keyring
        .get_or_try_init(|| async {
            keyring::load_or_create(gw.store.as_ref(), &gw.keys)
                .await
                .map(Arc::new)
        })
        .await
        .cloned()
}
