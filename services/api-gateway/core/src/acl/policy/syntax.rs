//! A policy document's syntax: HCL or its JSON form read into one shape,
//! a [`Body`] of attributes and (at most once-labelled) blocks, before
//! [`super::parse`] gives the blocks their meaning.

use hcl_edit::expr::Expression;
use hcl_edit::structure::{Body as HclBody, Structure};
use serde_json::Value;

use super::{PolicyError, err};

/// One block or body of the policy, from HCL or JSON alike.
#[derive(Debug, Default)]
pub(super) struct Body {
    /// The attributes, in order.
    pub(super) attrs: Vec<(String, Value)>,
    /// The nested blocks, in order.
    pub(super) blocks: Vec<Block>,
}

/// One block: `ident "label" { body }`.
#[derive(Debug)]
pub(super) struct Block {
    /// The block's kind (`namespace`, `node`, `path`, ...).
    pub(super) ident: String,
    /// Its one label, if it has one.
    pub(super) label: Option<String>,
    /// What it holds.
    pub(super) body: Body,
}

/// Blocks that take one label (`namespace "default" { ... }`).
pub(super) const LABELLED: &[&str] = &["namespace", "host_volume", "node_pool", "path"];
/// Blocks without a label.
const UNLABELLED: &[&str] = &[
    "agent",
    "node",
    "operator",
    "quota",
    "plugin",
    "sentinel",
    "variables",
];

/// Reads non-empty rules: JSON when the document starts with `{`, HCL
/// otherwise.
pub(super) fn read(rules: &str) -> Result<Body, PolicyError> {
    if rules.trim_start().starts_with('{') {
        read_json(rules)
    } else {
        read_hcl(rules)
    }
}

fn read_json(rules: &str) -> Result<Body, PolicyError> {
    let value: Value = serde_json::from_str(rules)
        .map_err(|e| PolicyError(format!("Failed to parse ACL Policy: {e}")))?;
    let Value::Object(object) = value else {
        return err("Failed to parse ACL Policy: the JSON document must be an object");
    };
    from_json(&object, "")
}

/// HCL 1 (Nomad's) takes blocks on one line (`variables { path "a" { ... }
/// }`); HCL 2 wants them spread over lines, so a policy that does not parse
/// is tried again with its braces on lines of their own. The error reported
/// is the first one's.
fn read_hcl(rules: &str) -> Result<Body, PolicyError> {
    let parsed = match hcl_edit::parser::parse_body(rules) {
        Ok(parsed) => parsed,
        Err(e) => hcl_edit::parser::parse_body(&spread_braces(rules)).map_err(|_| {
            PolicyError(format!(
                "Failed to parse ACL Policy: line {}, column {}: {}",
                e.location().line(),
                e.location().column(),
                e.message()
            ))
        })?,
    };
    from_hcl(&parsed)
}

fn hcl_value(expr: &Expression, field: &str) -> Result<Value, PolicyError> {
    Ok(match expr {
        Expression::Null(_) => Value::Null,
        Expression::Bool(b) => Value::Bool(*b.value()),
        Expression::String(s) => Value::String(s.value().clone()),
        Expression::Number(n) => serde_json::to_value(n.value().to_string())
            .map_err(|e| PolicyError(format!("{field}: {e}")))?,
        Expression::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| hcl_value(item, field))
                .collect::<Result<_, _>>()?,
        ),
        _ => {
            return err(format!(
                "{field}: only literal strings, numbers, booleans and lists are allowed"
            ));
        }
    })
}

fn from_hcl(body: &HclBody) -> Result<Body, PolicyError> {
    let mut out = Body::default();
    for structure in body.iter() {
        match structure {
            Structure::Attribute(a) => {
                let key = a.key.as_str().to_string();
                let value = hcl_value(&a.value, &key)?;
                out.attrs.push((key, value));
            }
            Structure::Block(b) => {
                let ident = b.ident.as_str().to_string();
                let label = match b.labels.as_slice() {
                    [] => None,
                    [one] => Some(one.as_str().to_string()),
                    _ => return err(format!("{ident}: a block takes at most one label")),
                };
                out.blocks.push(Block {
                    ident,
                    label,
                    body: from_hcl(&b.body)?,
                });
            }
        }
    }
    Ok(out)
}

/// HCL's JSON form: a labelled block is `"namespace": {"name": {...}}` (or
/// a list of such objects), an unlabelled one `"node": {...}` (or a list).
fn from_json(object: &serde_json::Map<String, Value>, at: &str) -> Result<Body, PolicyError> {
    let mut out = Body::default();
    for (key, value) in object {
        let path = if at.is_empty() {
            key.clone()
        } else {
            format!("{at}.{key}")
        };
        let labelled = LABELLED.contains(&key.as_str());
        if !labelled && !UNLABELLED.contains(&key.as_str()) {
            out.attrs.push((key.clone(), value.clone()));
            continue;
        }
        for item in json_block_items(value) {
            if labelled {
                json_labelled_blocks(key, item, &path, &mut out.blocks)?;
            } else {
                let Value::Object(body) = item else {
                    return err(format!("{path}: must be an object"));
                };
                out.blocks.push(Block {
                    ident: key.clone(),
                    label: None,
                    body: from_json(body, &path)?,
                });
            }
        }
    }
    Ok(out)
}

/// A block key's value: one block (object) or a list of them.
fn json_block_items(value: &Value) -> Vec<&Value> {
    match value {
        Value::Array(items) if items.iter().all(Value::is_object) => items.iter().collect(),
        other => vec![other],
    }
}

/// `{"label": {...}, ...}`: one `ident "label"` block per entry.
fn json_labelled_blocks(
    ident: &str,
    item: &Value,
    path: &str,
    out: &mut Vec<Block>,
) -> Result<(), PolicyError> {
    let Value::Object(labels) = item else {
        return err(format!("{path}: must be an object of named blocks"));
    };
    for (label, body) in labels {
        let Value::Object(body) = body else {
            return err(format!("{path}.{label}: must be an object"));
        };
        out.push(Block {
            ident: ident.to_string(),
            label: Some(label.clone()),
            body: from_json(body, &format!("{path}.{label}"))?,
        });
    }
    Ok(())
}

/// `text` with a line break after every `{` and before every `}` outside
/// strings and comments.
fn spread_braces(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => {
                    if let Some(next) = chars.next() {
                        out.push(next);
                    }
                }
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '#' => copy_line_comment(c, &mut chars, &mut out),
            '/' if chars.peek() == Some(&'/') => copy_line_comment(c, &mut chars, &mut out),
            '{' => out.push_str("{\n"),
            '}' => out.push_str("\n}\n"),
            _ => out.push(c),
        }
    }
    out
}

/// Copies a line comment starting with `first` through its line break (or
/// the end of the text) as written.
fn copy_line_comment(first: char, chars: &mut impl Iterator<Item = char>, out: &mut String) {
    out.push(first);
    for next in chars.by_ref() {
        out.push(next);
        if next == '\n' {
            break;
        }
    }
}
