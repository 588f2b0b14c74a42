//! The handle state a driver persists to find its task again: opaque bytes
//! the client stores without reading, tagged with the driver that wrote
//! them and the version of their format, as Nomad's `TaskHandle` carries
//! `DriverState` and `Version`.

use std::borrow::Cow;
use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A driver's persisted handle of one running task.
#[derive(Clone, PartialEq, Eq)]
pub struct HandleState {
    driver: Cow<'static, str>,
    version: u32,
    bytes: Box<[u8]>,
}

/// The version of records written before handle states were opaque: the
/// driver's fields at the top level of the record, beside `"driver"`.
pub const LEGACY_VERSION: u32 = 0;

impl HandleState {
    /// A state written by `driver` in format `version`.
    pub fn new(driver: &'static str, version: u32, bytes: impl Into<Box<[u8]>>) -> Self {
        HandleState {
            driver: Cow::Borrowed(driver),
            version,
            bytes: bytes.into(),
        }
    }

    /// The driver that wrote it (and recovers from it).
    pub fn driver(&self) -> &str {
        &self.driver
    }

    /// The version of the format of [`bytes`](Self::bytes).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// What the driver wrote.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl fmt::Debug for HandleState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("HandleState");
        d.field("driver", &self.driver)
            .field("version", &self.version);
        match std::str::from_utf8(&self.bytes) {
            Ok(text) => d.field("state", &text),
            Err(_) => d.field("state", &format_args!("{} bytes", self.bytes.len())),
        };
        d.finish()
    }
}

#[derive(Serialize, Deserialize)]
struct Stored<'a> {
    driver: Cow<'a, str>,
    version: u32,
    /// Base64.
    state: Cow<'a, str>,
}

impl Serialize for HandleState {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Stored {
            driver: Cow::Borrowed(&self.driver),
            version: self.version,
            state: Cow::Owned(STANDARD.encode(&self.bytes)),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for HandleState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = serde_json::Value::deserialize(d)?;
        let serde_json::Value::Object(map) = &value else {
            return Err(D::Error::custom("a handle state is an object"));
        };
        let Some(driver) = map.get("driver").and_then(|v| v.as_str()) else {
            return Err(D::Error::custom("a handle state names its driver"));
        };
        let driver = Cow::Owned(driver.to_string());
        if map.contains_key("version") && map.contains_key("state") {
            let stored: Stored<'_> =
                serde_json::from_value(value.clone()).map_err(D::Error::custom)?;
            let bytes = STANDARD
                .decode(stored.state.as_bytes())
                .map_err(|e| D::Error::custom(format!("handle state: {e}")))?;
            return Ok(HandleState {
                driver,
                version: stored.version,
                bytes: bytes.into(),
            });
        }
        // A record of a client from before opaque handle states: the
        // driver reads its old fields from the JSON as it stands.
        let bytes = serde_json::to_vec(&value).map_err(D::Error::custom)?;
        Ok(HandleState {
            driver,
            version: LEGACY_VERSION,
            bytes: bytes.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_opaque_bytes_with_driver_and_version() {
        let h = HandleState::new("docker", 3, vec![0u8, 255, 7]);
        let json = serde_json::to_string(&h).unwrap();
        let back: HandleState = serde_json::from_str(&json).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.driver(), "docker");
        assert_eq!(back.version(), 3);
        assert_eq!(back.bytes(), &[0, 255, 7]);
    }

    #[test]
    fn legacy_records_keep_their_fields_for_the_driver() {
        let legacy = r#"{"driver":"raw_exec","pid":42,"start_ticks":7,"started_at_unix_ns":9}"#;
        let h: HandleState = serde_json::from_str(legacy).unwrap();
        assert_eq!(h.driver(), "raw_exec");
        assert_eq!(h.version(), LEGACY_VERSION);
        let fields: serde_json::Value = serde_json::from_slice(h.bytes()).unwrap();
        assert_eq!(fields["pid"], 42);
        assert!(serde_json::from_str::<HandleState>(r#"{"pid":1}"#).is_err());
    }
}
