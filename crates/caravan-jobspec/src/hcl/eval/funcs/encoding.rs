//! Encoding functions: base64, JSON, YAML, CSV and URL query escaping.

use std::collections::BTreeMap;

use base64::Engine as _;

use super::{FResult, FuncError, arity, string};
use crate::hcl::eval::value::{Number, Value};

pub(super) fn call(name: &str, args: &[Value]) -> Option<FResult> {
    Some(match name {
        "base64encode" => (|| {
            arity(args, 1)?;
            Ok(Value::String(
                base64::engine::general_purpose::STANDARD.encode(string(args, 0)?),
            ))
        })(),
        "base64decode" => (|| {
            arity(args, 1)?;
            let s = string(args, 0)?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(s.as_bytes())
                .map_err(|_| FuncError::Failed(format!("failed to decode base64 data {s:?}")))?;
            String::from_utf8(bytes).map(Value::String).map_err(|_| {
                FuncError::Failed(
                    "the result of decoding the provided string is not valid UTF-8".into(),
                )
            })
        })(),
        "jsonencode" => (|| {
            arity(args, 1)?;
            Ok(Value::String(json_encode(&args[0])))
        })(),
        "jsondecode" => (|| {
            arity(args, 1)?;
            let s = string(args, 0)?;
            let j: serde_json::Value = serde_json::from_str(&s)
                .map_err(|e| FuncError::Arg(0, format!("invalid JSON: {e}")))?;
            Ok(Value::from_json(&j))
        })(),
        "urlencode" => (|| {
            arity(args, 1)?;
            Ok(Value::String(query_escape(&string(args, 0)?)))
        })(),
        "csvdecode" => (|| {
            arity(args, 1)?;
            csv_decode(&string(args, 0)?)
        })(),
        "yamldecode" => (|| {
            arity(args, 1)?;
            yaml_decode(&string(args, 0)?)
        })(),
        "yamlencode" => (|| {
            arity(args, 1)?;
            let mut out = String::new();
            yaml_encode(&args[0], 0, &mut out);
            Ok(Value::String(out))
        })(),
        _ => return None,
    })
}

/// JSON as cty encodes it: keys sorted, and `<`, `>`, `&` escaped as Go's encoder does.
pub(super) fn json_encode(v: &Value) -> String {
    let s = serde_json::to_string(&v.to_json()).unwrap_or_default();
    s.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// Go's `url.QueryEscape`.
fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

/// RFC 4180 CSV: the first row names the columns; every row becomes an object.
fn csv_decode(s: &str) -> FResult {
    let rows = csv_rows(s).map_err(FuncError::Failed)?;
    let mut rows = rows.into_iter();
    let Some(header) = rows.next() else {
        return Err(FuncError::Failed("missing header line".into()));
    };
    let mut out = Vec::new();
    for (n, row) in rows.enumerate() {
        if row.len() != header.len() {
            return Err(FuncError::Failed(format!(
                "data error: record on line {} has {} fields, but header has {}",
                n + 2,
                row.len(),
                header.len()
            )));
        }
        out.push(Value::Object(
            header
                .iter()
                .cloned()
                .zip(row.into_iter().map(Value::String))
                .collect(),
        ));
    }
    Ok(Value::List(out))
}

fn csv_rows(s: &str) -> Result<Vec<Vec<String>>, String> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut chars = s.chars().peekable();
    let mut in_quotes = false;
    let mut started = false;
    while let Some(c) = chars.next() {
        started = true;
        if in_quotes {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => in_quotes = false,
                other => field.push(other),
            }
            continue;
        }
        match c {
            '"' if field.is_empty() => in_quotes = true,
            ',' => row.push(std::mem::take(&mut field)),
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
                started = false;
            }
            other => field.push(other),
        }
    }
    if in_quotes {
        return Err("parse error: extraneous or missing \" in quoted-field".into());
    }
    if started {
        row.push(field);
        rows.push(row);
    }
    Ok(rows)
}

fn yaml_decode(s: &str) -> FResult {
    use yaml_rust2::{Yaml, YamlLoader};
    fn conv(y: &Yaml) -> Result<Value, String> {
        Ok(match y {
            Yaml::Real(r) => r
                .parse::<f64>()
                .ok()
                .and_then(Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| format!("invalid number {r}"))?,
            Yaml::Integer(i) => Value::from(*i),
            Yaml::String(s) => Value::String(s.clone()),
            Yaml::Boolean(b) => Value::Bool(*b),
            Yaml::Array(items) => Value::List(items.iter().map(conv).collect::<Result<_, _>>()?),
            Yaml::Hash(h) => {
                let mut out = BTreeMap::new();
                for (k, v) in h {
                    let key = match k {
                        Yaml::String(s) => s.clone(),
                        Yaml::Integer(i) => i.to_string(),
                        Yaml::Real(r) => r.clone(),
                        Yaml::Boolean(b) => b.to_string(),
                        other => return Err(format!("unsupported mapping key {other:?}")),
                    };
                    out.insert(key, conv(v)?);
                }
                Value::Object(out)
            }
            Yaml::Null => Value::Null,
            Yaml::Alias(_) | Yaml::BadValue => return Err("unsupported YAML value".into()),
        })
    }
    let docs = YamlLoader::load_from_str(s).map_err(|e| FuncError::Failed(e.to_string()))?;
    match docs.as_slice() {
        [] => Ok(Value::Null),
        [one] => conv(one).map_err(FuncError::Failed),
        _ => Err(FuncError::Failed(
            "on line 1, column 1: unexpected extra content after value".into(),
        )),
    }
}

/// YAML in the style of Nomad's `yamlencode`: keys and strings double-quoted, two-space
/// indentation, block sequences.
fn yaml_encode(v: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(fields) if !fields.is_empty() => {
            for (k, val) in fields {
                out.push_str(&format!("{pad}{}:", json_encode(&Value::String(k.clone()))));
                match val {
                    Value::Object(f) if !f.is_empty() => {
                        out.push('\n');
                        yaml_encode(val, indent + 2, out);
                    }
                    Value::List(items) if !items.is_empty() => {
                        out.push('\n');
                        yaml_encode(val, indent, out);
                    }
                    scalar => {
                        out.push(' ');
                        out.push_str(&yaml_scalar(scalar));
                        out.push('\n');
                    }
                }
            }
        }
        Value::List(items) if !items.is_empty() => {
            for item in items {
                out.push_str(&format!("{pad}-"));
                match item {
                    Value::Object(f) if !f.is_empty() => {
                        let mut inner = String::new();
                        yaml_encode(item, indent + 2, &mut inner);
                        out.push(' ');
                        out.push_str(inner.trim_start());
                    }
                    Value::List(l) if !l.is_empty() => {
                        let mut inner = String::new();
                        yaml_encode(item, indent + 2, &mut inner);
                        out.push(' ');
                        out.push_str(inner.trim_start());
                    }
                    scalar => {
                        out.push(' ');
                        out.push_str(&yaml_scalar(scalar));
                        out.push('\n');
                    }
                }
            }
        }
        scalar => {
            out.push_str(&pad);
            out.push_str(&yaml_scalar(scalar));
            out.push('\n');
        }
    }
}

fn yaml_scalar(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => serde_json::to_string(s).unwrap_or_default(),
        Value::List(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}
