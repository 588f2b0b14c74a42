//! The cluster's identity signing keys: Ed25519 key pairs stored as one
//! JSON value at `acl/keyring`, written by the first gateway that needs one
//! (a create-if-absent txn, so concurrent gateways agree on the winner's),
//! and read by every other. Tokens name their key by `kid`, which is how
//! a verifier (this gateway, or a third party reading
//! `/.well-known/jwks.json`) picks the public key.
//!
//! Ed25519 (EdDSA) rather than RS256: ring, the tree's one crypto stack,
//! generates Ed25519 keys but not RSA ones, and its signatures are small
//! and fast to make on every task start.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use caravan_state::Keyspace;
use caravan_store::{Compare, Op, OpResult, Range, Store, Txn};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use ring::signature::{Ed25519KeyPair, KeyPair};
use serde::{Deserialize, Serialize};

use super::claims::{DEFAULT_AUDIENCE, IdentityClaims};
use crate::error::{GatewayError, Result};

/// The algorithm every key signs with, as JWTs and JWKS name it.
pub const ALGORITHM: &str = "EdDSA";

/// Seconds of clock skew tolerated on `nbf` and `exp`.
const LEEWAY_SECS: u64 = 5;

/// The keyring as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredKeyring {
    /// The key new tokens are signed with.
    active: String,
    keys: Vec<StoredKey>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredKey {
    kid: String,
    algorithm: String,
    /// The PKCS#8 document of the key pair, base64.
    private_pkcs8: String,
    create_time: i64,
}

/// A public key, as a verifier needs it.
struct PublicKey {
    x: Vec<u8>,
    decoding: DecodingKey,
}

/// The signing keys of the cluster. Cheap to share behind an `Arc`.
pub struct Keyring {
    active_kid: String,
    signing: EncodingKey,
    public: BTreeMap<String, PublicKey>,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring")
            .field("active_kid", &self.active_kid)
            .field("kids", &self.public.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// Why a presented token is not a valid workload identity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// Not a JWT, a key this cluster does not have, a bad signature.
    #[error("invalid workload identity token: {0}")]
    Invalid(String),
    /// Past its `exp` (or before its `nbf`).
    #[error("workload identity token is expired")]
    Expired,
    /// Not meant for this API.
    #[error("workload identity token is not for audience {DEFAULT_AUDIENCE:?}")]
    Audience,
}

fn damaged(message: impl std::fmt::Display) -> GatewayError {
    GatewayError::Keyring(format!("the identity keyring is damaged: {message}"))
}

impl Keyring {
    fn from_stored(stored: &StoredKeyring) -> Result<Keyring> {
        let mut public = BTreeMap::new();
        let mut signing = None;
        for key in &stored.keys {
            if key.algorithm != ALGORITHM {
                return Err(damaged(format!(
                    "key {} has algorithm {:?}",
                    key.kid, key.algorithm
                )));
            }
            let der = STANDARD
                .decode(&key.private_pkcs8)
                .map_err(|e| damaged(format!("key {}: {e}", key.kid)))?;
            let pair = Ed25519KeyPair::from_pkcs8(&der)
                .map_err(|e| damaged(format!("key {}: {e}", key.kid)))?;
            let x = pair.public_key().as_ref().to_vec();
            if key.kid == stored.active {
                signing = Some(EncodingKey::from_ed_der(&der));
            }
            public.insert(
                key.kid.clone(),
                PublicKey {
                    decoding: DecodingKey::from_ed_der(&x),
                    x,
                },
            );
        }
        let signing = signing
            .ok_or_else(|| damaged(format!("the active key {} is missing", stored.active)))?;
        Ok(Keyring {
            active_kid: stored.active.clone(),
            signing,
            public,
        })
    }

    /// A keyring of one fresh key (tests and first start).
    fn generate() -> Result<StoredKeyring> {
        let rng = ring::rand::SystemRandom::new();
        let der = Ed25519KeyPair::generate_pkcs8(&rng)
            .map_err(|_| GatewayError::Keyring("generating an Ed25519 key failed".into()))?;
        let kid = uuid::Uuid::new_v4().to_string();
        Ok(StoredKeyring {
            active: kid.clone(),
            keys: vec![StoredKey {
                kid,
                algorithm: ALGORITHM.into(),
                private_pkcs8: STANDARD.encode(der.as_ref()),
                create_time: caravan_model::now_unix_ns(),
            }],
        })
    }

    /// Signs `claims` with the active key.
    pub fn sign(&self, claims: &IdentityClaims) -> Result<String> {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(self.active_kid.clone());
        jsonwebtoken::encode(&header, claims, &self.signing)
            .map_err(|e| GatewayError::Keyring(format!("signing a workload identity: {e}")))
    }

    /// Verifies `token`: a key of this keyring by its `kid`, the signature,
    /// `nbf` and `exp`, and the API's audience.
    pub fn verify(&self, token: &str) -> Result<IdentityClaims, VerifyError> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| VerifyError::Invalid(e.to_string()))?;
        if header.alg != Algorithm::EdDSA {
            return Err(VerifyError::Invalid(format!(
                "algorithm {:?} is not {ALGORITHM}",
                header.alg
            )));
        }
        let kid = header
            .kid
            .ok_or_else(|| VerifyError::Invalid("no key id (kid)".into()))?;
        let key = self
            .public
            .get(&kid)
            .ok_or_else(|| VerifyError::Invalid(format!("unknown key id {kid:?}")))?;
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.leeway = LEEWAY_SECS;
        validation.validate_nbf = true;
        validation.required_spec_claims.clear();
        validation.set_audience(&[DEFAULT_AUDIENCE]);
        let data = jsonwebtoken::decode::<IdentityClaims>(token, &key.decoding, &validation)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature
                | jsonwebtoken::errors::ErrorKind::ImmatureSignature => VerifyError::Expired,
                jsonwebtoken::errors::ErrorKind::InvalidAudience => VerifyError::Audience,
                _ => VerifyError::Invalid(e.to_string()),
            })?;
        // jsonwebtoken skips the audience check of a token without `aud`.
        if !data.claims.aud.iter().any(|a| a == DEFAULT_AUDIENCE) {
            return Err(VerifyError::Audience);
        }
        Ok(data.claims)
    }

    /// The public keys as a JSON Web Key Set (`/.well-known/jwks.json`).
    pub fn jwks(&self) -> serde_json::Value {
        let keys: Vec<serde_json::Value> = self
            .public
            .iter()
            .map(|(kid, key)| {
                serde_json::json!({
                    "kty": "OKP",
                    "crv": "Ed25519",
                    "x": URL_SAFE_NO_PAD.encode(&key.x),
                    "kid": kid,
                    "alg": ALGORITHM,
                    "use": "sig",
                })
            })
            .collect();
        serde_json::json!({ "keys": keys })
    }
}

/// Reads the keyring at `acl/keyring`, creating it first if absent: the
/// create is a txn guarded on the key's absence, so of two gateways racing
/// the loser reads (and uses) the winner's keys.
pub async fn load_or_create(store: &dyn Store, keys: &Keyspace) -> Result<Keyring> {
    let key = keys.acl("keyring");
    let listed = store.range(Range::key(key.clone())).await?;
    if let Some(kv) = listed.kvs.first() {
        return decode(&kv.value);
    }
    let fresh = Keyring::generate()?;
    let bytes = serde_json::to_vec(&fresh).map_err(|e| damaged(e.to_string()))?;
    let result = store
        .txn(
            Txn::new()
                .when(Compare::absent(key.clone()))
                .and_then(Op::put(key.clone(), bytes))
                .or_else(Op::get(key)),
        )
        .await?;
    if result.succeeded {
        tracing::info!(kid = %fresh.active, "created the workload identity keyring");
        return Keyring::from_stored(&fresh);
    }
    match result.results.first() {
        Some(OpResult::Get(range)) => match range.kvs.first() {
            Some(kv) => decode(&kv.value),
            None => Err(GatewayError::Conflict(
                "the identity keyring was created and removed concurrently; try again".into(),
            )),
        },
        _ => Err(damaged("the keyring read returned no value")),
    }
}

fn decode(bytes: &[u8]) -> Result<Keyring> {
    let stored: StoredKeyring = serde_json::from_slice(bytes).map_err(damaged)?;
    Keyring::from_stored(&stored)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keyring() -> Keyring {
        Keyring::from_stored(&Keyring::generate().unwrap()).unwrap()
    }

    fn claims(aud: &[&str], exp: Option<i64>) -> IdentityClaims {
        let now = caravan_model::now_unix_ns() / 1_000_000_000;
        IdentityClaims {
            nomad_namespace: "default".into(),
            nomad_job_id: "web".into(),
            nomad_allocation_id: "a1".into(),
            nomad_task: "t".into(),
            iss: String::new(),
            sub: "global:default:web:g:t:default".into(),
            aud: aud.iter().map(|a| a.to_string()).collect(),
            iat: now,
            nbf: now,
            exp,
            jti: "j".into(),
        }
    }

    #[test]
    fn signed_tokens_verify_with_their_keyring_only() {
        let ring = keyring();
        let token = ring.sign(&claims(&[DEFAULT_AUDIENCE], None)).unwrap();
        assert_eq!(token.split('.').count(), 3);
        assert_eq!(ring.verify(&token).unwrap().nomad_job_id, "web");
        let other = keyring();
        assert!(matches!(other.verify(&token), Err(VerifyError::Invalid(_))));
        let mut tampered = token.clone();
        tampered.insert(token.rfind('.').unwrap() + 1, 'A');
        assert!(ring.verify(&tampered).is_err());
        assert!(matches!(ring.verify("a.b.c"), Err(VerifyError::Invalid(_))));
    }

    #[test]
    fn expiry_and_audience_are_checked() {
        let ring = keyring();
        let past = caravan_model::now_unix_ns() / 1_000_000_000 - 60;
        let expired = ring.sign(&claims(&[DEFAULT_AUDIENCE], Some(past))).unwrap();
        assert_eq!(ring.verify(&expired), Err(VerifyError::Expired));
        let vault = ring.sign(&claims(&["vault.io"], None)).unwrap();
        assert_eq!(ring.verify(&vault), Err(VerifyError::Audience));
        let none = ring.sign(&claims(&[], None)).unwrap();
        assert_eq!(ring.verify(&none), Err(VerifyError::Audience));
    }

    #[test]
    fn the_jwks_names_each_key() {
        let ring = keyring();
        let jwks = ring.jwks();
        let key = &jwks["keys"][0];
        assert_eq!(key["kid"], ring.active_kid);
        assert_eq!(key["kty"], "OKP");
        assert_eq!(key["alg"], "EdDSA");
        assert_eq!(key["use"], "sig");
        let x = key["x"].as_str().unwrap();
        assert_eq!(URL_SAFE_NO_PAD.decode(x).unwrap().len(), 32);
    }

    #[tokio::test]
    async fn racing_gateways_share_the_first_keyring() {
        let store = caravan_store::MemStore::new();
        let keys = Keyspace::new("/t-keyring");
        let a = load_or_create(&store, &keys).await.unwrap();
        let b = load_or_create(&store, &keys).await.unwrap();
        assert_eq!(a.active_kid, b.active_kid);
        let token = a.sign(&claims(&[DEFAULT_AUDIENCE], None)).unwrap();
        assert!(b.verify(&token).is_ok());
    }
}
