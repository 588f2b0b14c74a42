//! Typed reads of a task's driver `config` block (a protobuf `Struct`).

use std::collections::BTreeMap;
use std::time::Duration;

use prost_types::Struct;
#[cfg(test)]
use prost_types::Value;
use prost_types::value::Kind;

use super::DriverError;

/// A task's driver config.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskConfig(pub Struct);

impl TaskConfig {
    fn get(&self, key: &str) -> Option<&Kind> {
        self.0
            .fields
            .get(key)
            .and_then(|v| v.kind.as_ref())
            .filter(|k| !matches!(k, Kind::NullValue(_)))
    }

    fn bad(key: &str, want: &str) -> DriverError {
        DriverError::fatal(format!("config.{key}: expected {want}"))
    }

    /// A string (numbers and booleans are written out).
    pub fn string(&self, key: &str) -> Result<Option<String>, DriverError> {
        match self.get(key) {
            None => Ok(None),
            Some(k) => scalar(k)
                .map(Some)
                .ok_or_else(|| Self::bad(key, "a string")),
        }
    }

    /// A list of strings; a single string is a list of one.
    pub fn strings(&self, key: &str) -> Result<Vec<String>, DriverError> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Kind::ListValue(l)) => l
                .values
                .iter()
                .map(|v| {
                    v.kind
                        .as_ref()
                        .and_then(scalar)
                        .ok_or_else(|| Self::bad(key, "a list of strings"))
                })
                .collect(),
            Some(k) => scalar(k)
                .map(|s| vec![s])
                .ok_or_else(|| Self::bad(key, "a list of strings")),
        }
    }

    /// An integer (a number, or a string of digits).
    pub fn int(&self, key: &str) -> Result<Option<i64>, DriverError> {
        match self.get(key) {
            None => Ok(None),
            Some(Kind::NumberValue(n)) if n.fract() == 0.0 && n.abs() < 9.0e15 => {
                Ok(Some(*n as i64))
            }
            Some(Kind::StringValue(s)) => s
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| Self::bad(key, "an integer")),
            Some(_) => Err(Self::bad(key, "an integer")),
        }
    }

    /// A boolean (or `"true"`/`"false"`).
    pub fn boolean(&self, key: &str) -> Result<Option<bool>, DriverError> {
        match self.get(key) {
            None => Ok(None),
            Some(Kind::BoolValue(b)) => Ok(Some(*b)),
            Some(Kind::StringValue(s)) => s
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| Self::bad(key, "a boolean")),
            Some(_) => Err(Self::bad(key, "a boolean")),
        }
    }

    /// Blocks of `key`: an object, or a list of objects (a repeated block).
    pub fn blocks(&self, key: &str) -> Result<Vec<&Struct>, DriverError> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Kind::StructValue(s)) => Ok(vec![s]),
            Some(Kind::ListValue(l)) => l
                .values
                .iter()
                .map(|v| match &v.kind {
                    Some(Kind::StructValue(s)) => Ok(s),
                    _ => Err(Self::bad(key, "a block or a list of blocks")),
                })
                .collect(),
            Some(_) => Err(Self::bad(key, "a block or a list of blocks")),
        }
    }

    /// A map of strings: an object, or a list of objects merged in order
    /// (`labels { … }` blocks or `labels = [{ … }]`).
    pub fn string_map(&self, key: &str) -> Result<BTreeMap<String, String>, DriverError> {
        let mut out = BTreeMap::new();
        for block in self.blocks(key)? {
            for (k, v) in &block.fields {
                let value = v
                    .kind
                    .as_ref()
                    .and_then(scalar)
                    .ok_or_else(|| Self::bad(&format!("{key}.{k}"), "a string"))?;
                out.insert(k.clone(), value);
            }
        }
        Ok(out)
    }

    /// A duration: a Go duration string (`"10s"`) or integer nanoseconds.
    pub fn duration(&self, key: &str) -> Result<Option<Duration>, DriverError> {
        let ns = match self.get(key) {
            None => return Ok(None),
            Some(Kind::StringValue(s)) => match s.trim().parse::<i64>() {
                Ok(n) => n,
                Err(_) => caravan_jobspec::parse_duration(s.trim())
                    .map_err(|e| DriverError::fatal(format!("config.{key}: {e}")))?,
            },
            Some(Kind::NumberValue(_)) => self.int(key)?.unwrap_or(0),
            Some(_) => return Err(Self::bad(key, "a duration")),
        };
        u64::try_from(ns)
            .map(|n| Some(Duration::from_nanos(n)))
            .map_err(|_| Self::bad(key, "a non-negative duration"))
    }

    /// Builds a config from key/value pairs.
    #[cfg(test)]
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, Value)>) -> TaskConfig {
        TaskConfig(Struct {
            fields: pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        })
    }
}

/// A scalar as a string (numbers and booleans written out).
pub fn scalar(k: &Kind) -> Option<String> {
    match k {
        Kind::StringValue(s) => Some(s.clone()),
        Kind::NumberValue(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => {
            Some(format!("{}", *n as i64))
        }
        Kind::NumberValue(n) => Some(n.to_string()),
        Kind::BoolValue(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A string value.
#[cfg(test)]
pub fn string_value(s: &str) -> Value {
    Value {
        kind: Some(Kind::StringValue(s.to_string())),
    }
}

/// A number value.
#[cfg(test)]
pub fn number_value(n: f64) -> Value {
    Value {
        kind: Some(Kind::NumberValue(n)),
    }
}

/// A list of strings.
#[cfg(test)]
pub fn list_value(items: &[&str]) -> Value {
    Value {
        kind: Some(Kind::ListValue(prost_types::ListValue {
            values: items.iter().map(|s| string_value(s)).collect(),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_reads() {
        let c = TaskConfig::from_pairs([
            ("command", string_value("/bin/sh")),
            ("args", list_value(&["-c", "echo hi"])),
            ("port", number_value(8080.0)),
            ("run_for", string_value("1.5s")),
            ("run_ns", number_value(2_000_000.0)),
            ("flag", string_value("true")),
        ]);
        assert_eq!(c.string("command").unwrap().as_deref(), Some("/bin/sh"));
        assert_eq!(c.strings("args").unwrap(), vec!["-c", "echo hi"]);
        assert_eq!(c.strings("command").unwrap(), vec!["/bin/sh"]);
        assert_eq!(c.string("port").unwrap().as_deref(), Some("8080"));
        assert_eq!(c.int("port").unwrap(), Some(8080));
        assert_eq!(
            c.duration("run_for").unwrap(),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            c.duration("run_ns").unwrap(),
            Some(Duration::from_millis(2))
        );
        assert_eq!(c.boolean("flag").unwrap(), Some(true));
        assert_eq!(c.string("missing").unwrap(), None);
    }

    #[test]
    fn wrong_types_name_the_key() {
        let c = TaskConfig::from_pairs([
            ("args", number_value(1.5)),
            ("run_for", string_value("soon")),
            ("exit_code", string_value("x")),
        ]);
        assert_eq!(c.strings("args").unwrap(), vec!["1.5"]);
        let e = c.duration("run_for").unwrap_err();
        assert!(e.message.starts_with("config.run_for"), "{e}");
        assert!(!e.recoverable);
        assert!(
            c.int("exit_code")
                .unwrap_err()
                .message
                .contains("exit_code")
        );
        let neg = TaskConfig::from_pairs([("d", number_value(-5.0))]);
        assert!(neg.duration("d").is_err());
    }
}
