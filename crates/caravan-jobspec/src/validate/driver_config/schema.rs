//! A driver's config schema (Nomad's `TaskConfigSchema`) and the check of a
//! config block against it: every key must be one the driver knows, with a
//! value of its type; a key the driver knows but Caravan does not honour is
//! refused with the reason. Values convert as Nomad's HCL decoding converts
//! them (a number where a string is wanted, `"true"` for a bool, …).

use prost_types::value::Kind;
use prost_types::{Struct, Value};

use super::super::Errors;

/// The type of a config value.
#[derive(Debug, Clone, Copy)]
pub enum Ty {
    /// A string (numbers and bools convert).
    Str,
    /// A bool (or `"true"`/`"false"`).
    Bool,
    /// A number (or a string of one).
    Num,
    /// A duration string (`"10s"`) or nanoseconds.
    Duration,
    /// A list of strings.
    StrList,
    /// A map of strings: an object, or blocks of them (`labels { … }`).
    StrMap,
    /// A map of numbers, likewise.
    NumMap,
    /// One block of these fields.
    Block(&'static [Field]),
    /// Blocks of these fields.
    Blocks(&'static [Field]),
}

/// One key of a schema.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// Its name.
    pub name: &'static str,
    /// Its type.
    pub ty: Ty,
    /// It must be set.
    pub required: bool,
    /// The driver has it, Caravan does not honour it: why.
    pub unsupported: Option<&'static str>,
}

/// An optional key.
pub const fn opt(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        required: false,
        unsupported: None,
    }
}

/// A required key.
pub const fn req(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        required: true,
        unsupported: None,
    }
}

/// A key of the driver Caravan refuses, and why.
pub const fn no(name: &'static str, why: &'static str) -> Field {
    Field {
        name,
        ty: Ty::Str,
        required: false,
        unsupported: Some(why),
    }
}

/// A driver's schema.
#[derive(Debug)]
pub struct Schema {
    /// The driver's name.
    pub driver: &'static str,
    /// Its keys.
    pub fields: &'static [Field],
}

fn kind(v: &Value) -> Option<&Kind> {
    v.kind.as_ref().filter(|k| !matches!(k, Kind::NullValue(_)))
}

fn describe(k: &Kind) -> &'static str {
    match k {
        Kind::NullValue(_) => "null",
        Kind::NumberValue(_) => "a number",
        Kind::StringValue(_) => "a string",
        Kind::BoolValue(_) => "a bool",
        Kind::StructValue(_) => "a block",
        Kind::ListValue(_) => "a list",
    }
}

fn scalar(k: &Kind) -> bool {
    matches!(
        k,
        Kind::StringValue(_) | Kind::NumberValue(_) | Kind::BoolValue(_)
    )
}

fn number(k: &Kind) -> bool {
    match k {
        Kind::NumberValue(n) => n.is_finite(),
        Kind::StringValue(s) => s.trim().parse::<f64>().is_ok_and(f64::is_finite),
        _ => false,
    }
}

/// The objects of a map or block value: one object, or a list of them.
pub fn objects(k: &Kind) -> Option<Vec<&Struct>> {
    match k {
        Kind::StructValue(s) => Some(vec![s]),
        Kind::ListValue(l) => l
            .values
            .iter()
            .map(|v| match kind(v) {
                Some(Kind::StructValue(s)) => Some(s),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// The string a scalar value reads as.
pub fn as_string(v: &Value) -> Option<String> {
    match kind(v)? {
        Kind::StringValue(s) => Some(s.clone()),
        Kind::NumberValue(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => {
            Some(format!("{}", *n as i64))
        }
        Kind::NumberValue(n) => Some(n.to_string()),
        Kind::BoolValue(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The strings of a list value.
pub fn as_strings(v: &Value) -> Vec<String> {
    match kind(v) {
        Some(Kind::ListValue(l)) => l.values.iter().filter_map(as_string).collect(),
        _ => Vec::new(),
    }
}

/// The entries of a map value.
pub fn as_map(v: &Value) -> Vec<(String, &Value)> {
    kind(v)
        .and_then(objects)
        .unwrap_or_default()
        .into_iter()
        .flat_map(|o| o.fields.iter().map(|(k, v)| (k.clone(), v)))
        .collect()
}

/// Checks `config` against `schema`; errors go under `path` (`…: config`).
pub fn check(schema: &Schema, config: &Struct, path: &str, e: &mut Errors) {
    check_fields(schema.driver, schema.fields, config, path, "", e);
}

fn check_fields(
    driver: &str,
    fields: &[Field],
    obj: &Struct,
    path: &str,
    prefix: &str,
    e: &mut Errors,
) {
    for (key, value) in &obj.fields {
        let name = format!("{prefix}{key}");
        let Some(field) = fields.iter().find(|f| f.name == key) else {
            e.at(
                path,
                &name,
                format!("the {driver} driver has no option {key:?}"),
            );
            continue;
        };
        if let Some(why) = field.unsupported {
            e.at(
                path,
                &name,
                format!("not supported by Caravan's {driver} driver: {why}"),
            );
            continue;
        }
        let Some(k) = kind(value) else {
            continue;
        };
        check_value(driver, field.ty, k, path, &name, e);
    }
    for f in fields.iter().filter(|f| f.required) {
        let set = obj
            .fields
            .get(f.name)
            .and_then(kind)
            .is_some_and(|k| !matches!(k, Kind::StringValue(s) if s.trim().is_empty()));
        if !set {
            e.at(path, &format!("{prefix}{}", f.name), "required");
        }
    }
}

fn check_value(driver: &str, ty: Ty, k: &Kind, path: &str, name: &str, e: &mut Errors) {
    let mut wrong = |want: &str| {
        e.at(path, name, format!("expected {want}, got {}", describe(k)));
    };
    match ty {
        Ty::Str => {
            if !scalar(k) {
                wrong("a string");
            }
        }
        Ty::Bool => {
            let ok = match k {
                Kind::BoolValue(_) => true,
                Kind::StringValue(s) => matches!(s.trim(), "true" | "false"),
                _ => false,
            };
            if !ok {
                wrong("a bool");
            }
        }
        Ty::Num => {
            if !number(k) {
                wrong("a number");
            }
        }
        Ty::Duration => match k {
            Kind::StringValue(s) => {
                if s.trim().parse::<i64>().is_err()
                    && let Err(why) = crate::parse_duration(s.trim())
                {
                    e.at(path, name, format!("expected a duration: {why}"));
                }
            }
            Kind::NumberValue(n) if *n >= 0.0 && n.fract() == 0.0 => {}
            _ => wrong("a duration such as \"30s\""),
        },
        Ty::StrList => match k {
            Kind::ListValue(l) => {
                for (i, v) in l.values.iter().enumerate() {
                    if !kind(v).is_some_and(scalar) {
                        e.at(path, &format!("{name}[{i}]"), "expected a string");
                    }
                }
            }
            _ => wrong("a list of strings"),
        },
        Ty::StrMap | Ty::NumMap => match objects(k) {
            Some(objs) => {
                for o in objs {
                    for (key, v) in &o.fields {
                        let good = kind(v).is_some_and(|k| match ty {
                            Ty::NumMap => number(k),
                            _ => scalar(k),
                        });
                        if !good {
                            let want = if matches!(ty, Ty::NumMap) {
                                "a number"
                            } else {
                                "a string"
                            };
                            e.at(path, &format!("{name}.{key}"), format!("expected {want}"));
                        }
                    }
                }
            }
            None => wrong("a map"),
        },
        Ty::Block(fields) => match objects(k).as_deref() {
            Some([one]) => check_fields(driver, fields, one, path, &format!("{name}."), e),
            Some([]) => {}
            _ => wrong("one block"),
        },
        Ty::Blocks(fields) => match objects(k) {
            Some(objs) => {
                for (i, o) in objs.into_iter().enumerate() {
                    check_fields(driver, fields, o, path, &format!("{name}[{i}]."), e);
                }
            }
            None => wrong("blocks"),
        },
    }
}
