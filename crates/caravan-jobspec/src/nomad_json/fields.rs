//! Taking typed fields out of a raw JSON object of Nomad's API, each misfit reported by
//! its path, for the blocks converted from loose JSON (volumes, services).

use super::to_proto::Conversion;
use crate::error::join_path as join;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

pub(super) fn take_str(
    fields: &mut Map<String, Value>,
    name: &str,
    path: &str,
    conv: &mut Conversion,
) -> String {
    match fields.remove(name) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s,
        Some(other) => {
            conv.err(join(path, name), format!("must be a string (got {other})"));
            String::new()
        }
    }
}

pub(super) fn take_bool(
    fields: &mut Map<String, Value>,
    name: &str,
    path: &str,
    conv: &mut Conversion,
) -> bool {
    match fields.remove(name) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => b,
        Some(other) => {
            conv.err(
                join(path, name),
                format!("must be true or false (got {other})"),
            );
            false
        }
    }
}

/// An integer that fits `T` (a count, or a duration in nanoseconds).
pub(super) fn take_int<T: TryFrom<i64> + Default>(
    fields: &mut Map<String, Value>,
    name: &str,
    path: &str,
    conv: &mut Conversion,
) -> T {
    match fields.remove(name) {
        None | Some(Value::Null) => T::default(),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(v) => conv.narrow(join(path, name), v),
            None => {
                conv.err(join(path, name), format!("must be an integer (got {n})"));
                T::default()
            }
        },
        Some(other) => {
            conv.err(
                join(path, name),
                format!("must be an integer (got {other})"),
            );
            T::default()
        }
    }
}

pub(super) fn take_str_list(
    fields: &mut Map<String, Value>,
    name: &str,
    path: &str,
    conv: &mut Conversion,
) -> Vec<String> {
    match fields.remove(name) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, v) in items.into_iter().enumerate() {
                match v {
                    Value::String(s) => out.push(s),
                    other => conv.err(
                        join(path, &format!("{name}[{i}]")),
                        format!("must be a string (got {other})"),
                    ),
                }
            }
            out
        }
        Some(other) => {
            conv.err(
                join(path, name),
                format!("must be a list of strings (got {other})"),
            );
            Vec::new()
        }
    }
}

pub(super) fn take_str_map(
    fields: &mut Map<String, Value>,
    name: &str,
    path: &str,
    conv: &mut Conversion,
) -> BTreeMap<String, String> {
    match fields.remove(name) {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(Value::Object(map)) => {
            let mut out = BTreeMap::new();
            for (k, v) in map {
                match v {
                    Value::String(s) => {
                        out.insert(k, s);
                    }
                    other => conv.err(
                        join(&join(path, name), &k),
                        format!("must be a string (got {other})"),
                    ),
                }
            }
            out
        }
        Some(other) => {
            conv.err(
                join(path, name),
                format!("must be an object of strings (got {other})"),
            );
            BTreeMap::new()
        }
    }
}
