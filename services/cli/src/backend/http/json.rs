//! Nomad's JSON read leniently: a field left out, null or of another type
//! reads as its zero, Go's times as Unix nanoseconds, status names as
//! Caravan's enums.

use std::collections::BTreeMap;

use caravan_model::NomadName;
use serde_json::Value;

/// A JSON value read leniently.
#[derive(Debug, Clone, Copy)]
pub struct J<'a>(pub &'a Value);

static NULL: Value = Value::Null;

impl<'a> J<'a> {
    /// The field `key` (null when absent).
    pub fn get(self, key: &str) -> J<'a> {
        J(self.0.get(key).unwrap_or(&NULL))
    }

    /// A string field; empty when absent or not a string.
    pub fn s(self, key: &str) -> String {
        self.get(key).0.as_str().unwrap_or_default().to_string()
    }

    /// A field holding Nomad's name of an `E`; unset when absent or of no
    /// value.
    pub fn named<E: NomadName + Default>(self, key: &str) -> E {
        self.get(key)
            .0
            .as_str()
            .and_then(E::from_nomad_name)
            .unwrap_or_default()
    }

    /// A boolean field.
    pub fn b(self, key: &str) -> bool {
        self.get(key).0.as_bool().unwrap_or(false)
    }

    /// An optional boolean field (null reads as unset).
    pub fn ob(self, key: &str) -> Option<bool> {
        self.get(key).0.as_bool()
    }

    /// A signed integer field (floats truncated).
    pub fn i(self, key: &str) -> i64 {
        let v = self.get(key).0;
        v.as_i64()
            .or_else(|| v.as_u64().map(|u| i64::try_from(u).unwrap_or(i64::MAX)))
            .or_else(|| v.as_f64().map(|f| f as i64))
            .unwrap_or(0)
    }

    /// An unsigned integer field.
    pub fn u(self, key: &str) -> u64 {
        u64::try_from(self.i(key).max(0)).unwrap_or(0)
    }

    /// A 32-bit unsigned field, saturated.
    pub fn u32(self, key: &str) -> u32 {
        u32::try_from(self.u(key)).unwrap_or(u32::MAX)
    }

    /// A 32-bit signed field, saturated.
    pub fn i32(self, key: &str) -> i32 {
        i32::try_from(self.i(key)).unwrap_or(if self.i(key) < 0 { i32::MIN } else { i32::MAX })
    }

    /// A float field.
    pub fn f(self, key: &str) -> f64 {
        self.get(key).0.as_f64().unwrap_or(0.0)
    }

    /// A Go `time.Time` field (RFC 3339) as Unix nanoseconds; Go's zero time reads as 0.
    pub fn time(self, key: &str) -> i64 {
        match self.get(key).0 {
            Value::String(s) => go_time(s),
            Value::Number(n) => n.as_i64().unwrap_or(0),
            _ => 0,
        }
    }

    /// A list field's items.
    pub fn list(self, key: &str) -> Vec<J<'a>> {
        match self.get(key).0 {
            Value::Array(items) => items.iter().map(J).collect(),
            _ => Vec::new(),
        }
    }

    /// A list of strings.
    pub fn strings(self, key: &str) -> Vec<String> {
        self.list(key)
            .into_iter()
            .filter_map(|v| v.0.as_str().map(str::to_string))
            .collect()
    }

    /// An object field's entries, sorted by key.
    pub fn entries(self, key: &str) -> Vec<(String, J<'a>)> {
        match self.get(key).0 {
            Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), J(v))).collect(),
            _ => Vec::new(),
        }
    }

    /// A map of strings.
    pub fn string_map(self, key: &str) -> BTreeMap<String, String> {
        self.entries(key)
            .into_iter()
            .filter_map(|(k, v)| v.0.as_str().map(|s| (k, s.to_string())))
            .collect()
    }

    /// A map of counts.
    pub fn count_map(self, key: &str) -> BTreeMap<String, u32> {
        self.entries(key)
            .into_iter()
            .map(|(k, v)| {
                (
                    k,
                    u32::try_from(v.0.as_u64().unwrap_or(0)).unwrap_or(u32::MAX),
                )
            })
            .collect()
    }

    /// Whether the value is an object.
    pub fn is_object(self) -> bool {
        self.0.is_object()
    }
}

/// An RFC 3339 time as Unix nanoseconds; unparsable or before 1970's epoch
/// by more than i64 allows reads as 0, as does Go's zero time.
pub fn go_time(text: &str) -> i64 {
    if text.starts_with("0001-01-01T00:00:00") {
        return 0;
    }
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .and_then(|t| t.timestamp_nanos_opt())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_times_read_as_unix_nanoseconds() {
        assert_eq!(go_time("0001-01-01T00:00:00Z"), 0);
        assert_eq!(go_time("2023-11-14T22:13:20Z"), 1_700_000_000_000_000_000);
        assert_eq!(go_time("2023-11-14T22:13:20.5Z"), 1_700_000_000_500_000_000);
        assert_eq!(go_time("not a time"), 0);
    }
}
