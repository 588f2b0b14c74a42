//! Conversions between the crate's data and template values, argument checks for functions,
//! and JSON in and out.

use std::collections::BTreeMap;
use std::sync::Arc;

use gotmpl::Value;

use crate::deps::{ServiceInstance, ServiceStub, VariableMeta};

/// A function's error, as the template engine carries it.
pub(crate) type FnResult = Result<Value, gotmpl::TemplateError>;

/// An error from the named template function.
pub(crate) fn fn_err(func: &str, msg: impl std::fmt::Display) -> gotmpl::TemplateError {
    gotmpl::TemplateError::Exec(format!("{func}: {msg}"))
}

/// Checks a function got between `min` and `max` arguments.
pub(crate) fn arity(
    func: &str,
    args: &[Value],
    min: usize,
    max: usize,
) -> Result<(), gotmpl::TemplateError> {
    if args.len() < min || args.len() > max {
        let want = if min == max {
            min.to_string()
        } else {
            format!("{min} to {max}")
        };
        return Err(fn_err(
            func,
            format!("wrong number of arguments: want {want}, got {}", args.len()),
        ));
    }
    Ok(())
}

/// Argument `i` as a string (Go's functions take `string` there and refuse other types).
pub(crate) fn str_arg<'a>(
    func: &str,
    args: &'a [Value],
    i: usize,
) -> Result<&'a str, gotmpl::TemplateError> {
    match args.get(i) {
        Some(Value::String(s)) => Ok(s),
        Some(v) => Err(fn_err(
            func,
            format!("argument {}: expected string, got {}", i + 1, v.type_name()),
        )),
        None => Err(fn_err(func, format!("argument {} is missing", i + 1))),
    }
}

/// Argument `i` as an integer.
pub(crate) fn int_arg(func: &str, args: &[Value], i: usize) -> Result<i64, gotmpl::TemplateError> {
    match args.get(i) {
        Some(Value::Int(n)) => Ok(*n),
        Some(Value::Uint(n)) => i64::try_from(*n).map_err(|_| fn_err(func, "integer out of range")),
        Some(v) => Err(fn_err(
            func,
            format!(
                "argument {}: expected integer, got {}",
                i + 1,
                v.type_name()
            ),
        )),
        None => Err(fn_err(func, format!("argument {} is missing", i + 1))),
    }
}

/// A string value.
pub(crate) fn string(s: impl Into<Arc<str>>) -> Value {
    Value::String(s.into())
}

/// A map value from string keys.
pub(crate) fn map(entries: impl IntoIterator<Item = (String, Value)>) -> Value {
    Value::Map(Arc::new(
        entries
            .into_iter()
            .map(|(k, v)| (Arc::from(k), v))
            .collect(),
    ))
}

/// A list value.
pub(crate) fn list(items: impl IntoIterator<Item = Value>) -> Value {
    Value::List(items.into_iter().collect::<Vec<_>>().into())
}

fn tags(t: &[String]) -> Value {
    let mut t = t.to_vec();
    t.sort();
    list(t.into_iter().map(string))
}

/// A variable's items: a map of key to value, so `.key`, `index` and `range $k, $v` work.
pub(crate) fn items(items: &BTreeMap<String, String>) -> Value {
    map(items.iter().map(|(k, v)| (k.clone(), string(v.as_str()))))
}

/// One `nomadVarList` entry, with the field names the language's users write.
pub(crate) fn var_meta(m: &VariableMeta) -> Value {
    map([
        ("Namespace".to_string(), string(m.namespace.as_str())),
        ("Path".to_string(), string(m.path.as_str())),
        ("CreateIndex".to_string(), Value::Uint(m.create_index)),
        ("ModifyIndex".to_string(), Value::Uint(m.modify_index)),
    ])
}

/// One `nomadService` entry (tags sorted, as the reference sorts them).
pub(crate) fn service(s: &ServiceInstance) -> Value {
    map([
        ("ID".to_string(), string(s.id.as_str())),
        ("Name".to_string(), string(s.service_name.as_str())),
        ("Namespace".to_string(), string(s.namespace.as_str())),
        ("Node".to_string(), string(s.node_id.as_str())),
        ("Address".to_string(), string(s.address.as_str())),
        ("Port".to_string(), Value::Int(i64::from(s.port))),
        ("Datacenter".to_string(), string(s.datacenter.as_str())),
        ("Tags".to_string(), tags(&s.tags)),
        ("JobID".to_string(), string(s.job_id.as_str())),
        ("AllocID".to_string(), string(s.alloc_id.as_str())),
    ])
}

/// One `nomadServices` entry.
pub(crate) fn service_stub(s: &ServiceStub) -> Value {
    map([
        ("Name".to_string(), string(s.name.as_str())),
        ("Tags".to_string(), tags(&s.tags)),
    ])
}

/// A JSON document as a template value; numbers become floats, as Go's decoder makes them.
pub(crate) fn from_json(j: serde_json::Value) -> Value {
    match j {
        serde_json::Value::Null => Value::Nil,
        serde_json::Value::Bool(b) => Value::Bool(b),
        serde_json::Value::Number(n) => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        serde_json::Value::String(s) => string(s),
        serde_json::Value::Array(a) => list(a.into_iter().map(from_json)),
        serde_json::Value::Object(o) => map(o.into_iter().map(|(k, v)| (k, from_json(v)))),
    }
}

/// Writes a value as JSON with map keys sorted, as Go's encoder writes it; `escape_html`
/// writes `<`, `>` and `&` as `\u003c`, `\u003e` and `\u0026` (Go's default).
pub(crate) fn to_json(
    v: &Value,
    indent: Option<&str>,
    escape_html: bool,
) -> Result<String, String> {
    let mut out = String::new();
    write_json(
        v,
        &Json {
            indent,
            escape_html,
        },
        0,
        &mut out,
    )?;
    Ok(out)
}

/// Go's encoder writes a float in the shortest form, with an exponent only outside [1e-6, 1e21).
fn go_json_float(f: f64) -> String {
    let abs = f.abs();
    if abs == 0.0 || (1e-6..1e21).contains(&abs) {
        return format!("{f}");
    }
    let e = format!("{f:e}");
    match e.split_once('e') {
        Some((m, exp)) if !exp.starts_with('-') => format!("{m}e+{exp}"),
        _ => e,
    }
}

struct Json<'a> {
    indent: Option<&'a str>,
    escape_html: bool,
}

fn json_str(s: &str, opts: &Json<'_>, out: &mut String) {
    let quoted = serde_json::Value::String(s.to_string()).to_string();
    for c in quoted.chars() {
        match c {
            '<' if opts.escape_html => out.push_str("\\u003c"),
            '>' if opts.escape_html => out.push_str("\\u003e"),
            '&' if opts.escape_html => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
}

fn newline(indent: Option<&str>, depth: usize, out: &mut String) {
    if let Some(ind) = indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(ind);
        }
    }
}

fn write_json(v: &Value, opts: &Json<'_>, depth: usize, out: &mut String) -> Result<(), String> {
    let indent = opts.indent;
    match v {
        Value::Nil => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(n) => out.push_str(&n.to_string()),
        Value::Uint(n) => out.push_str(&n.to_string()),
        Value::Float(f) => {
            if !f.is_finite() {
                return Err(format!("json: unsupported value: {f}"));
            }
            out.push_str(&go_json_float(*f));
        }
        Value::String(s) => json_str(s, opts, out),
        Value::List(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(indent, depth + 1, out);
                write_json(item, opts, depth + 1, out)?;
            }
            newline(indent, depth, out);
            out.push(']');
        }
        Value::Map(m) => {
            if m.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, (k, item)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(indent, depth + 1, out);
                json_str(k, opts, out);
                out.push(':');
                if indent.is_some() {
                    out.push(' ');
                }
                write_json(item, opts, depth + 1, out)?;
            }
            newline(indent, depth, out);
            out.push('}');
        }
        Value::Function(_) => return Err("json: unsupported type: func".to_string()),
    }
    Ok(())
}

/// A value as a number for arithmetic: integers stay integers, Go's kinds kept apart.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Num {
    Int(i64),
    Uint(u64),
    Float(f64),
}

impl Num {
    pub(crate) fn of(func: &str, v: &Value) -> Result<Num, gotmpl::TemplateError> {
        match v {
            Value::Int(n) => Ok(Num::Int(*n)),
            Value::Uint(n) => Ok(Num::Uint(*n)),
            Value::Float(f) => Ok(Num::Float(*f)),
            other => Err(fn_err(
                func,
                format!("unknown type for {other} ({})", other.type_name()),
            )),
        }
    }

    pub(crate) fn as_f64(self) -> f64 {
        match self {
            Num::Int(n) => n as f64,
            Num::Uint(n) => n as f64,
            Num::Float(f) => f,
        }
    }

    pub(crate) fn value(self) -> Value {
        match self {
            Num::Int(n) => Value::Int(n),
            Num::Uint(n) => Value::Uint(n),
            Num::Float(f) => Value::Float(f),
        }
    }
}
