//! HCL expressions → plain values, keeping `${…}` interpolations verbatim.
//!
//! Nomad interpolates `${NOMAD_…}`, `${attr.…}`, `${meta.…}` and `${node.…}` at run time
//! on the client, so a template string must reach the job as the operator wrote it. Only
//! literals are evaluated here; variables, functions and operators are rejected with a
//! message rather than guessed at.

use std::collections::HashSet;

use crate::duration::parse_duration;
use hcl_edit::Span;
use hcl_edit::expr::{Expression, ObjectKey, UnaryOperator};
use hcl_edit::template::Element;

/// A literal HCL value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Val {
    Null,
    Bool(bool),
    Number(hcl_edit::Number),
    Str(String),
    List(Vec<Val>),
    Object(Vec<(String, Val)>),
}

impl Val {
    /// The value's type as HCL names it, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Val::Null => "null",
            Val::Bool(_) => "bool",
            Val::Number(_) => "number",
            Val::Str(_) => "string",
            Val::List(_) => "list",
            Val::Object(_) => "object",
        }
    }
}

const NOT_LITERAL: &str = "only literal values are supported here: HCL variables, functions and \
                           operators are not evaluated (write `${...}` inside a string to pass \
                           it through to the client)";

/// Evaluates a literal expression; `src` is the file the expression was parsed from.
pub(crate) fn eval(expr: &Expression, src: &str) -> Result<Val, String> {
    match expr {
        Expression::Null(_) => Ok(Val::Null),
        Expression::Bool(b) => Ok(Val::Bool(*b.value())),
        Expression::Number(n) => Ok(Val::Number(*n.value())),
        Expression::String(s) => Ok(Val::Str(s.value().clone())),
        Expression::Array(items) => items
            .iter()
            .map(|e| eval(e, src))
            .collect::<Result<_, _>>()
            .map(Val::List),
        Expression::Object(obj) => {
            let mut fields = Vec::with_capacity(obj.len());
            let mut seen: HashSet<String> = HashSet::with_capacity(obj.len());
            for (key, value) in obj.iter() {
                let key = match key {
                    ObjectKey::Ident(ident) => ident.as_str().to_string(),
                    ObjectKey::Expression(e) => match eval(e, src)? {
                        Val::Str(s) => s,
                        Val::Number(n) => n.to_string(),
                        other => {
                            return Err(format!(
                                "object keys must be strings, found {}",
                                other.kind()
                            ));
                        }
                    },
                };
                if !seen.insert(key.clone()) {
                    return Err(format!("duplicate object key {key:?}"));
                }
                fields.push((key, eval(value.expr(), src)?));
            }
            Ok(Val::Object(fields))
        }
        Expression::StringTemplate(t) => render(t.iter(), src).map(Val::Str),
        Expression::HeredocTemplate(h) => render(h.template.iter(), src).map(Val::Str),
        Expression::Parenthesis(p) => eval(p.inner(), src),
        Expression::UnaryOp(op) => match (op.operator.value(), eval(&op.expr, src)?) {
            (UnaryOperator::Neg, Val::Number(n)) => negate(n).map(Val::Number),
            (UnaryOperator::Not, Val::Bool(b)) => Ok(Val::Bool(!b)),
            (_, other) => Err(format!("operator cannot be applied to a {}", other.kind())),
        },
        _ => Err(NOT_LITERAL.to_string()),
    }
}

fn negate(n: hcl_edit::Number) -> Result<hcl_edit::Number, String> {
    if let Some(i) = n.as_i64()
        && let Some(neg) = i.checked_neg()
    {
        return Ok(hcl_edit::Number::from(neg));
    }
    n.as_f64()
        .and_then(|f| hcl_edit::Number::from_f64(-f))
        .ok_or_else(|| format!("cannot negate {n}"))
}

/// Renders a template: literals as parsed (escapes already resolved, `$${` already `${`),
/// interpolations and directives copied from the source byte for byte.
fn render<'a>(elements: impl Iterator<Item = &'a Element>, src: &str) -> Result<String, String> {
    let mut out = String::new();
    for element in elements {
        match element {
            Element::Literal(lit) => out.push_str(lit.value()),
            Element::Interpolation(i) => out.push_str(source_of(i.span(), src)?),
            Element::Directive(d) => out.push_str(source_of(d.span(), src)?),
        }
    }
    Ok(out)
}

fn source_of(span: Option<std::ops::Range<usize>>, src: &str) -> Result<&str, String> {
    span.and_then(|r| src.get(r))
        .ok_or_else(|| "template interpolation without source position".to_string())
}

/// A whole number as `i64`, from a number or a numeric string (HCL converts both).
pub(crate) fn to_i64(v: &Val) -> Result<i64, String> {
    match v {
        Val::Number(n) => n
            .as_i64()
            .ok_or_else(|| format!("expected a whole number, found {n}")),
        Val::Str(s) => s
            .trim()
            .parse()
            .map_err(|_| format!("expected a whole number, found string {s:?}")),
        other => Err(format!("expected a number, found {}", other.kind())),
    }
}

/// A bool, from a bool or the strings `"true"`/`"false"` (HCL converts both).
pub(crate) fn to_bool(v: &Val) -> Result<bool, String> {
    match v {
        Val::Bool(b) => Ok(*b),
        Val::Str(s) if s == "true" => Ok(true),
        Val::Str(s) if s == "false" => Ok(false),
        other => Err(format!("expected a bool, found {}", describe(other))),
    }
}

/// A string; numbers and bools convert as HCL converts them.
pub(crate) fn to_string(v: &Val) -> Result<String, String> {
    match v {
        Val::Str(s) => Ok(s.clone()),
        Val::Number(n) => Ok(n.to_string()),
        Val::Bool(b) => Ok(b.to_string()),
        other => Err(format!("expected a string, found {}", other.kind())),
    }
}

/// A duration in nanoseconds, from a Go duration string (`"30s"`) or a number of nanoseconds.
pub(crate) fn to_duration(v: &Val) -> Result<i64, String> {
    match v {
        Val::Str(s) => parse_duration(s),
        Val::Number(n) => n
            .as_i64()
            .ok_or_else(|| format!("expected a duration such as \"30s\", found {n}")),
        other => Err(format!(
            "expected a duration such as \"30s\", found {}",
            other.kind()
        )),
    }
}

/// A list of strings.
pub(crate) fn to_string_list(v: &Val) -> Result<Vec<String>, String> {
    match v {
        Val::List(items) => items.iter().map(to_string).collect(),
        other => Err(format!(
            "expected a list of strings, found {}",
            other.kind()
        )),
    }
}

/// A map of strings (an object whose values are strings, numbers or bools).
pub(crate) fn to_string_map(v: &Val) -> Result<Vec<(String, String)>, String> {
    match v {
        Val::Object(fields) => fields
            .iter()
            .map(|(k, v)| {
                to_string(v)
                    .map(|s| (k.clone(), s))
                    .map_err(|e| format!("{k}: {e}"))
            })
            .collect(),
        other => Err(format!("expected a map of strings, found {}", other.kind())),
    }
}

/// The value as JSON, the form task `config` travels in before it becomes a `Struct`.
pub(crate) fn to_json(v: &Val) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Val::Null => Value::Null,
        Val::Bool(b) => Value::Bool(*b),
        Val::Number(n) => match n.as_i64() {
            Some(i) => Value::from(i),
            None => n
                .as_f64()
                .and_then(serde_json::Number::from_f64)
                .map_or(Value::Null, Value::Number),
        },
        Val::Str(s) => Value::String(s.clone()),
        Val::List(items) => Value::Array(items.iter().map(to_json).collect()),
        Val::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect(),
        ),
    }
}

fn describe(v: &Val) -> String {
    match v {
        Val::Str(s) => format!("string {s:?}"),
        other => other.kind().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcl_edit::structure::Structure;

    fn attr_value(src: &str) -> Result<Val, String> {
        let body = hcl_edit::parser::parse_body(src).expect("parses");
        let Some(Structure::Attribute(a)) = body.iter().next() else {
            panic!("no attribute")
        };
        eval(&a.value, src)
    }

    #[test]
    fn duplicate_keys_are_found_among_many() {
        let keys: Vec<String> = (0..2_000).map(|i| format!("k{i} = {i}")).collect();
        // The same key spelled as a string: the parser lets it through.
        let src = format!("a = {{\n{}\n\"k1999\" = 0\n}}", keys.join("\n"));
        assert_eq!(
            attr_value(&src),
            Err("duplicate object key \"k1999\"".into())
        );
        let src = format!("a = {{\n{}\n}}", keys.join("\n"));
        let Ok(Val::Object(fields)) = attr_value(&src) else {
            panic!("an object");
        };
        assert_eq!(fields.len(), 2_000);
        assert_eq!(fields[1_999].0, "k1999", "order is kept");
    }

    #[test]
    fn interpolations_survive_verbatim() {
        assert_eq!(
            attr_value(r#"a = "${NOMAD_PORT_http}""#),
            Ok(Val::Str("${NOMAD_PORT_http}".into()))
        );
        assert_eq!(
            attr_value(r#"a = "http://${ attr.unique.network.ip-address }:${NOMAD_PORT_http}/x""#),
            Ok(Val::Str(
                "http://${ attr.unique.network.ip-address }:${NOMAD_PORT_http}/x".into()
            ))
        );
        assert_eq!(
            attr_value(r#"a = "%{ if true }y%{ endif } ${meta.rack}""#),
            Ok(Val::Str("%{ if true }y%{ endif } ${meta.rack}".into()))
        );
    }

    #[test]
    fn escapes_resolve_but_interpolations_do_not() {
        assert_eq!(
            attr_value(r#"a = "tab\there \"q\" $${lit}""#),
            Ok(Val::Str("tab\there \"q\" ${lit}".into()))
        );
    }

    #[test]
    fn heredocs_keep_interpolations_and_strip_indent() {
        let src = "a = <<-EOT\n    echo ${NOMAD_ALLOC_ID}\n      done\n    EOT\n";
        assert_eq!(
            attr_value(src),
            Ok(Val::Str("echo ${NOMAD_ALLOC_ID}\n  done\n".into()))
        );
    }

    #[test]
    fn negative_numbers_and_not() {
        assert_eq!(to_i64(&attr_value("a = -5").unwrap()), Ok(-5));
        assert_eq!(attr_value("a = !true"), Ok(Val::Bool(false)));
        assert!(attr_value("a = -\"x\"").is_err());
    }

    #[test]
    fn variables_and_functions_are_rejected() {
        for src in [
            "a = var.count",
            "a = upper(\"x\")",
            "a = 1 + 2",
            "a = true ? 1 : 2",
        ] {
            assert!(attr_value(src).is_err(), "{src} should be rejected");
        }
    }

    #[test]
    fn conversions_follow_hcl() {
        assert_eq!(to_i64(&Val::Str("8080".into())), Ok(8080));
        assert!(to_i64(&attr_value("a = 1.5").unwrap()).is_err());
        assert!(to_i64(&attr_value("a = 99999999999999999999999").unwrap()).is_err());
        assert_eq!(to_bool(&Val::Str("true".into())), Ok(true));
        assert_eq!(
            to_string(&attr_value("a = 8080").unwrap()),
            Ok("8080".into())
        );
        assert_eq!(
            to_duration(&Val::Str("1h30m".into())),
            Ok(5_400_000_000_000)
        );
        assert!(to_duration(&Val::Str("soon".into())).is_err());
        assert!(to_string_list(&Val::Str("dc1".into())).is_err());
    }
}
