//! The variables key: AES-256-GCM sealing of a variable's items at rest,
//! bound to the variable's namespace and path, and the key's fingerprint
//! stored beside each sealed value so a wrong key is named, not guessed.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::Rng;
use sha2::{Digest, Sha256};

use crate::error::GatewayError;

/// Bytes of a key.
pub const KEY_BYTES: usize = 32;

/// Bytes of the nonce that starts every sealed value.
const NONCE_BYTES: usize = 12;

/// Why a key could not be read or a value could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// The configured key is not a base64 encoding of 32 bytes.
    #[error("{source_name}: {message}")]
    BadKey {
        /// Where the key came from (`variables_key`, or the file's path).
        source_name: String,
        /// What is wrong with it.
        message: String,
    },
    /// The value was sealed with another key.
    #[error(
        "variable {what} was encrypted with key {stored}, but this gateway holds key {held}: \
         configure the key it was written with"
    )]
    WrongKey {
        /// `namespace/path` of the variable.
        what: String,
        /// The fingerprint stored with the value.
        stored: String,
        /// This gateway's key's fingerprint.
        held: String,
    },
    /// The items could not be encrypted (beyond AES-GCM's input bound).
    #[error("variable {what} could not be encrypted")]
    Unsealable {
        /// `namespace/path` of the variable.
        what: String,
    },
    /// The value does not open with the key that claims to have sealed it.
    #[error("variable {what} could not be decrypted: its stored value is damaged")]
    Damaged {
        /// `namespace/path` of the variable.
        what: String,
    },
}

impl From<SealError> for GatewayError {
    fn from(err: SealError) -> Self {
        GatewayError::Keyring(err.to_string())
    }
}

/// The key variables are sealed with. Cheap to share behind an `Arc`.
#[derive(Clone)]
pub struct VariableKey {
    cipher: Aes256Gcm,
    id: String,
}

impl std::fmt::Debug for VariableKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VariableKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl VariableKey {
    /// A key from its base64 text (surrounding whitespace ignored);
    /// `source_name` names where it came from in errors.
    pub fn from_base64(text: &str, source_name: &str) -> Result<Self, SealError> {
        let bad = |message: String| SealError::BadKey {
            source_name: source_name.to_string(),
            message,
        };
        let bytes = STANDARD
            .decode(text.trim())
            .map_err(|e| bad(format!("not valid base64: {e}")))?;
        if bytes.len() != KEY_BYTES {
            return Err(bad(format!(
                "the key is {} bytes; an AES-256 key is {KEY_BYTES} bytes (base64 of 32 random bytes)",
                bytes.len()
            )));
        }
        let cipher = Aes256Gcm::new_from_slice(&bytes)
            .map_err(|_| bad(format!("the key must be {KEY_BYTES} bytes")))?;
        let digest = Sha256::new()
            .chain_update(b"caravan variables key\0")
            .chain_update(&bytes)
            .finalize();
        let id = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        Ok(VariableKey { cipher, id })
    }

    /// The key the configuration names: `inline` (the gateway's
    /// `variables_key`) or the contents of the file `file`
    /// (`variables_key_file`), if either is set; both set is an error.
    pub fn configured(inline: &str, file: &str) -> Result<Option<Self>, String> {
        match (inline.trim().is_empty(), file.is_empty()) {
            (true, true) => Ok(None),
            (false, false) => {
                Err("set one of variables_key and variables_key_file, not both".into())
            }
            (false, true) => VariableKey::from_base64(inline, "variables_key")
                .map(Some)
                .map_err(|e| e.to_string()),
            (true, false) => {
                let text = std::fs::read_to_string(file)
                    .map_err(|e| format!("variables_key_file {file}: {e}"))?;
                VariableKey::from_base64(&text, &format!("variables_key_file {file}"))
                    .map(Some)
                    .map_err(|e| e.to_string())
            }
        }
    }

    /// A fresh random key, in the base64 form [`VariableKey::from_base64`] reads.
    pub fn generate() -> String {
        let mut bytes = [0u8; KEY_BYTES];
        rand::rng().fill(&mut bytes[..]);
        STANDARD.encode(bytes)
    }

    /// The key's fingerprint, stored with every value it seals.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Seals `plain` for the variable at `namespace`/`path`: a fresh nonce,
    /// then the ciphertext and tag.
    pub fn seal(&self, namespace: &str, path: &str, plain: &[u8]) -> Result<Vec<u8>, SealError> {
        let mut nonce = [0u8; NONCE_BYTES];
        rand::rng().fill(&mut nonce[..]);
        let aad = associated_data(namespace, path);
        let sealed = self
            .cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: plain,
                    aad: &aad,
                },
            )
            .map_err(|_| SealError::Unsealable {
                what: format!("{namespace}/{path}"),
            })?;
        let mut out = Vec::with_capacity(NONCE_BYTES + sealed.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// Opens what [`VariableKey::seal`] sealed for `namespace`/`path` with
    /// the key fingerprinted `key_id`.
    pub fn open(
        &self,
        namespace: &str,
        path: &str,
        key_id: &str,
        sealed: &[u8],
    ) -> Result<Vec<u8>, SealError> {
        let what = format!("{namespace}/{path}");
        if key_id != self.id {
            return Err(SealError::WrongKey {
                what,
                stored: key_id.to_string(),
                held: self.id.clone(),
            });
        }
        if sealed.len() < NONCE_BYTES {
            return Err(SealError::Damaged { what });
        }
        let (nonce, body) = sealed.split_at(NONCE_BYTES);
        let aad = associated_data(namespace, path);
        self.cipher
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: body,
                    aad: &aad,
                },
            )
            .map_err(|_| SealError::Damaged { what })
    }
}

/// Binds a sealed value to where it is stored.
fn associated_data(namespace: &str, path: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(namespace.len() + path.len() + 1);
    aad.extend_from_slice(namespace.as_bytes());
    aad.push(0);
    aad.extend_from_slice(path.as_bytes());
    aad
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> VariableKey {
        VariableKey::from_base64(&VariableKey::generate(), "test").unwrap()
    }

    #[test]
    fn sealed_items_open_with_the_same_key_only() {
        let k = key();
        let sealed = k.seal("default", "a/b", b"secret").unwrap();
        assert!(!sealed.windows(6).any(|w| w == b"secret"));
        assert_eq!(
            k.open("default", "a/b", k.id(), &sealed).unwrap(),
            b"secret"
        );

        let other = key();
        assert_ne!(other.id(), k.id());
        let err = other.open("default", "a/b", k.id(), &sealed).unwrap_err();
        assert!(matches!(err, SealError::WrongKey { .. }), "{err}");
        assert!(err.to_string().contains(k.id()), "{err}");
        // A fingerprint that lies still does not open the value.
        let err = other
            .open("default", "a/b", other.id(), &sealed)
            .unwrap_err();
        assert!(matches!(err, SealError::Damaged { .. }), "{err}");
    }

    #[test]
    fn a_sealed_value_is_bound_to_its_path_and_intact() {
        let k = key();
        let sealed = k.seal("default", "a", b"x").unwrap();
        assert!(k.open("default", "b", k.id(), &sealed).is_err());
        assert!(k.open("other", "a", k.id(), &sealed).is_err());
        let mut flipped = sealed.clone();
        if let Some(last) = flipped.last_mut() {
            *last ^= 1;
        }
        assert!(k.open("default", "a", k.id(), &flipped).is_err());
        assert!(k.open("default", "a", k.id(), &sealed[..5]).is_err());
        // Two seals of the same items differ (fresh nonces).
        assert_ne!(k.seal("default", "a", b"x").unwrap(), sealed);
    }

    #[test]
    fn the_configured_key_comes_from_one_place() {
        assert!(VariableKey::configured("", "").unwrap().is_none());
        assert!(VariableKey::configured(" \n", "").unwrap().is_none());
        let key = VariableKey::generate();
        let inline = VariableKey::configured(&key, "").unwrap().unwrap();
        let dir = std::env::temp_dir().join(format!("caravan-vk-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("variables.key");
        std::fs::write(&file, format!("{key}\n")).unwrap();
        let path = file.display().to_string();
        let err = VariableKey::configured(&key, &path).unwrap_err();
        assert!(err.contains("not both"), "{err}");
        let from_file = VariableKey::configured("", &path).unwrap().unwrap();
        assert_eq!(from_file.id(), inline.id());
        std::fs::write(&file, "short").unwrap();
        let err = VariableKey::configured("", &path).unwrap_err();
        assert!(err.contains("variables_key_file"), "{err}");
        let missing = dir.join("missing").display().to_string();
        let err = VariableKey::configured("", &missing).unwrap_err();
        assert!(err.contains("missing"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_keys_are_refused_with_their_source() {
        let err = VariableKey::from_base64("not base64!", "variables_key").unwrap_err();
        assert!(err.to_string().starts_with("variables_key: "), "{err}");
        let short = STANDARD.encode([1u8; 16]);
        let err = VariableKey::from_base64(&short, "/k").unwrap_err();
        assert!(err.to_string().contains("16 bytes"), "{err}");
        let text = format!("  {}\n", STANDARD.encode([7u8; 32]));
        let a = VariableKey::from_base64(&text, "x").unwrap();
        let b = VariableKey::from_base64(&STANDARD.encode([7u8; 32]), "y").unwrap();
        assert_eq!(a.id(), b.id());
        assert_eq!(a.id().len(), 16);
    }
}
