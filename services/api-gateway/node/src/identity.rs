//! Node identity: the secret a client node generates once (Nomad's
//! `Node.SecretID`) and presents on every call. The servers keep only its
//! SHA-256, recorded at the node's first registration, so a node id alone
//! (which the public API shows) lets nobody heartbeat, report statuses or
//! read the allocations of a node.
//!
//! A node stored before node secrets existed has no hash: its calls are
//! accepted as before, and its next registration that presents a secret
//! records it (first come, first recorded). Upgrade the servers first and
//! the clients right after, so that window stays short.

use std::sync::Arc;

use caravan_proto::Node;

use caravan_gateway_core::acl::store::hash_secret;
use caravan_gateway_core::error::{GatewayError, Result};
use caravan_gateway_core::gateway::Gateway;

/// Longest secret accepted; a UUID is 36 bytes.
const MAX_SECRET_LEN: usize = 256;

/// A presented secret, hashed once per call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Presented {
    hash: Option<String>,
}

impl Presented {
    /// Hashes `secret` (empty means none was presented).
    pub fn new(secret: &str) -> Result<Presented> {
        if secret.len() > MAX_SECRET_LEN {
            return Err(GatewayError::field(
                "secret_id",
                format!("longer than {MAX_SECRET_LEN} bytes"),
            ));
        }
        Ok(Presented {
            hash: (!secret.is_empty()).then(|| hash_secret(secret)),
        })
    }

    /// The hash to record at registration; a new registration must present one.
    pub fn to_record(&self) -> Result<&str> {
        self.hash
            .as_deref()
            .ok_or_else(|| GatewayError::field("secret_id", "missing node secret"))
    }

    /// Whether the holder of this secret may act as `node`. Comparing hex
    /// digests in plain (not constant) time reveals nothing usable: timing
    /// can at most tell a prefix of a hash, never of the secret.
    pub fn verify(&self, node: &Node) -> Result<()> {
        if node.secret_hash.is_empty() {
            return Ok(());
        }
        match &self.hash {
            Some(h) if *h == node.secret_hash => Ok(()),
            Some(_) => Err(GatewayError::PermissionDenied(format!(
                "node {}: secret_id does not match the node's secret",
                node.id
            ))),
            None => Err(GatewayError::PermissionDenied(format!(
                "node {}: missing secret_id",
                node.id
            ))),
        }
    }
}

/// Checks that the caller holds `node_id`'s secret and returns the node as
/// the check saw it. The watch cache answers on the hot path (one hash and
/// one compare, no store read); only a node the cache does not have yet, or
/// whose cached copy refuses the secret (it may lag a purge and a new
/// registration), is read from the store.
pub async fn authenticate(gw: &Gateway, node_id: &str, secret: &str) -> Result<Arc<Node>> {
    authenticate_read(gw, node_id, secret)
        .await
        .map(|(node, _)| node)
}

/// [`authenticate`], also saying whether the node was read from the store
/// (so a caller needing the store's copy need not read it again).
pub async fn authenticate_read(
    gw: &Gateway,
    node_id: &str,
    secret: &str,
) -> Result<(Arc<Node>, bool)> {
    if node_id.is_empty() {
        return Err(GatewayError::field("node_id", "missing node ID"));
    }
    let presented = Presented::new(secret)?;
    if let Some(cached) = gw.cache.snapshot().node(node_id)
        && presented.verify(cached).is_ok()
    {
        return Ok((Arc::clone(cached), false));
    }
    let stored: Option<Node> = gw.read(&gw.keys.node(node_id)).await?;
    let Some(node) = stored else {
        return Err(GatewayError::NotFound(format!(
            "node not registered: {node_id}"
        )));
    };
    presented.verify(&node)?;
    Ok((Arc::new(node), true))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(hash: &str) -> Node {
        Node {
            id: "n1".into(),
            secret_hash: hash.into(),
            ..Default::default()
        }
    }

    #[test]
    fn only_the_recorded_secret_passes() {
        let right = Presented::new("s3cret").unwrap();
        let stored = node(right.to_record().unwrap());
        assert!(right.verify(&stored).is_ok());
        let wrong = Presented::new("guess")
            .unwrap()
            .verify(&stored)
            .unwrap_err();
        assert_eq!(wrong.code(), tonic::Code::PermissionDenied);
        assert!(wrong.to_string().contains("node n1"), "{wrong}");
        let none = Presented::new("").unwrap();
        let missing = none.verify(&stored).unwrap_err();
        assert!(
            missing.to_string().contains("missing secret_id"),
            "{missing}"
        );
        assert!(
            none.to_record()
                .unwrap_err()
                .to_string()
                .starts_with("secret_id")
        );
    }

    #[test]
    fn a_node_from_before_secrets_accepts_any_caller_until_one_is_recorded() {
        assert!(Presented::new("").unwrap().verify(&node("")).is_ok());
        assert!(Presented::new("x").unwrap().verify(&node("")).is_ok());
    }

    #[test]
    fn secrets_are_bounded() {
        let long = "x".repeat(MAX_SECRET_LEN + 1);
        assert!(
            Presented::new(&long)
                .unwrap_err()
                .to_string()
                .starts_with("secret_id")
        );
    }
}
