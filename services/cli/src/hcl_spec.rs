//! Small HCL specifications (`namespace apply`, `node pool apply`) read into
//! the JSON Nomad's API takes: literal values only (strings, numbers,
//! booleans, lists, objects), blocks as objects, keys from `snake_case` to
//! Nomad's `PascalCase` names, a `meta` block's keys kept as written. A key
//! the specification does not know is refused by name, never dropped.

use serde_json::{Map, Value};

use hcl_edit::expr::{Expression, ObjectKey};
use hcl_edit::structure::{Body, Structure};

use crate::error::CliError;

/// What one specification accepts: its attributes and blocks with their
/// API names; a block's own schema is looked up by its HCL name.
#[derive(Debug, Clone, Copy)]
pub struct Schema {
    /// The specification's name, for messages (`namespace`).
    pub what: &'static str,
    /// `(hcl name, api name, nested schema)`; a nested schema makes it a block.
    pub fields: &'static [(&'static str, &'static str, Option<&'static Schema>)],
}

/// A block whose keys are kept as written (`meta { owner = "sre" }`): a
/// schema without fields.
pub static FREE_FORM: Schema = Schema {
    what: "meta",
    fields: &[],
};

fn literal(expr: &Expression, field: &str) -> Result<Value, CliError> {
    let refuse = || {
        CliError::Usage(format!(
            "{field}: only literal strings, numbers, booleans, lists and objects are allowed"
        ))
    };
    Ok(match expr {
        Expression::Null(_) => Value::Null,
        Expression::Bool(b) => Value::Bool(*b.value()),
        Expression::String(s) => Value::String(s.value().clone()),
        Expression::Number(n) => {
            serde_json::from_str(&n.value().to_string()).map_err(|_| refuse())?
        }
        Expression::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| literal(item, field))
                .collect::<Result<_, _>>()?,
        ),
        Expression::Object(object) => {
            let mut out = Map::new();
            for (key, value) in object.iter() {
                let name = match key {
                    ObjectKey::Ident(i) => i.as_str().to_string(),
                    ObjectKey::Expression(Expression::String(s)) => s.value().clone(),
                    ObjectKey::Expression(_) => return Err(refuse()),
                };
                let v = literal(value.expr(), &format!("{field}.{name}"))?;
                out.insert(name, v);
            }
            Value::Object(out)
        }
        _ => return Err(refuse()),
    })
}

/// A body read against `schema`.
fn body(body: &Body, schema: &Schema, path: &str) -> Result<Map<String, Value>, CliError> {
    let mut out = Map::new();
    for structure in body.iter() {
        let (name, is_block) = match structure {
            Structure::Attribute(a) => (a.key.as_str(), false),
            Structure::Block(b) => (b.ident.as_str(), true),
        };
        let field = if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}.{name}")
        };
        let free = schema.fields.is_empty();
        let (api_name, nested) = if free {
            (name, None)
        } else {
            let Some((_, api, nested)) = schema.fields.iter().find(|(h, _, _)| *h == name) else {
                return Err(CliError::Usage(format!(
                    "{field}: not a field of a {} specification",
                    schema.what
                )));
            };
            (*api, *nested)
        };
        let value = match structure {
            Structure::Attribute(a) => literal(&a.value, &field)?,
            Structure::Block(b) => {
                if !b.labels.is_empty() {
                    return Err(CliError::Usage(format!("{field}: a block without labels")));
                }
                let Some(nested) = nested else {
                    return Err(CliError::Usage(format!(
                        "{field}: an attribute, not a block"
                    )));
                };
                Value::Object(self::body(&b.body, nested, &field)?)
            }
        };
        if !is_block && nested.is_some_and(|n| !n.fields.is_empty()) {
            return Err(CliError::Usage(format!(
                "{field}: a block, not an attribute"
            )));
        }
        out.insert(api_name.to_string(), value);
    }
    Ok(out)
}

fn parse(text: &str) -> Result<Body, CliError> {
    hcl_edit::parser::parse_body(text)
        .map_err(|e| CliError::Usage(format!("Error parsing the specification: {e}")))
}

/// A specification written as a bare body (`name = "x"` …).
pub fn bare(text: &str, schema: &Schema) -> Result<Value, CliError> {
    Ok(Value::Object(body(&parse(text)?, schema, "")?))
}

/// A specification written as one labelled block (`node_pool "x" { … }`):
/// its body with the label as `label_field`.
pub fn labelled(
    text: &str,
    block: &str,
    label_field: &str,
    schema: &Schema,
) -> Result<Value, CliError> {
    let parsed = parse(text)?;
    let mut found = None;
    for structure in parsed.iter() {
        match structure {
            Structure::Block(b) if b.ident.as_str() == block && found.is_none() => found = Some(b),
            Structure::Block(b) => {
                return Err(CliError::Usage(format!(
                    "{}: the specification holds one {block} block",
                    b.ident.as_str()
                )));
            }
            Structure::Attribute(a) => {
                return Err(CliError::Usage(format!(
                    "{}: the specification holds one {block} block",
                    a.key.as_str()
                )));
            }
        }
    }
    let Some(b) = found else {
        return Err(CliError::Usage(format!("no {block} block found")));
    };
    let label = match b.labels.as_slice() {
        [one] => one.as_str().to_string(),
        _ => {
            return Err(CliError::Usage(format!(
                "{block}: the block takes its name as its one label"
            )));
        }
    };
    let mut out = body(&b.body, schema, block)?;
    out.insert(label_field.to_string(), Value::String(label));
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    static INNER: Schema = Schema {
        what: "inner",
        fields: &[("enabled_task_drivers", "EnabledTaskDrivers", None)],
    };
    static OUTER: Schema = Schema {
        what: "thing",
        fields: &[
            ("name", "Name", None),
            ("size", "Size", None),
            ("capabilities", "Capabilities", Some(&INNER)),
            ("meta", "Meta", Some(&FREE_FORM)),
        ],
    };

    #[test]
    fn bodies_become_nomads_json() {
        let v = bare(
            "name = \"x\"\nsize = 3\ncapabilities {\n  enabled_task_drivers = [\"docker\"]\n}\nmeta {\n  owner_team = \"sre\"\n}\n",
            &OUTER,
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"Name": "x", "Size": 3, "Capabilities": {"EnabledTaskDrivers": ["docker"]}, "Meta": {"owner_team": "sre"}})
        );
        let v = labelled("thing \"x\" {\n  size = 1\n}\n", "thing", "Name", &OUTER).unwrap();
        assert_eq!(v, json!({"Name": "x", "Size": 1}));
    }

    #[test]
    fn unknown_keys_and_expressions_are_refused_by_name() {
        let err = bare("colour = \"red\"\n", &OUTER).unwrap_err().to_string();
        assert!(err.contains("colour: not a field of a thing"), "{err}");
        let err = bare("name = upper(\"x\")\n", &OUTER)
            .unwrap_err()
            .to_string();
        assert!(err.contains("name: only literal"), "{err}");
        let err = bare("capabilities {\n  sizes = 1\n}\n", &OUTER)
            .unwrap_err()
            .to_string();
        assert!(err.contains("capabilities.sizes"), "{err}");
        assert!(labelled("other \"x\" {}\n", "thing", "Name", &OUTER).is_err());
    }
}
