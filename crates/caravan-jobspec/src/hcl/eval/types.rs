//! Type constraints (`type = list(object({ port = number }))`) and the conversions they make.
//!
//! A variable's `type` is read from its expression without evaluating it, as HCL's
//! `typeexpr` does, and every value given to the variable is converted to it with cty's
//! rules: numbers and bools to strings, numeric strings to numbers, `"true"`/`"1"` to bools,
//! tuples to lists, objects to maps, sets sorted and deduplicated, attributes an object type
//! does not name dropped, and missing `optional(...)` attributes set to null or their default.

use std::collections::BTreeMap;

use hcl_edit::expr::{Expression, ObjectKey};

use super::value::{Value, make_set};

/// A type constraint.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Type {
    /// `any`: whatever the value is.
    Any,
    /// `string`.
    String,
    /// `number`.
    Number,
    /// `bool`.
    Bool,
    /// `list(T)`.
    List(Box<Type>),
    /// `set(T)`.
    Set(Box<Type>),
    /// `map(T)`.
    Map(Box<Type>),
    /// `tuple([T, ...])`.
    Tuple(Vec<Type>),
    /// `object({ name = T, ... })`.
    Object(BTreeMap<String, Attr>),
}

/// One attribute of an object type.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Attr {
    pub ty: Type,
    /// Written as `optional(T)` or `optional(T, default)`.
    pub optional: bool,
    pub default: Option<Value>,
}

impl Type {
    /// The type as HCL names it in messages (`list of string`).
    pub fn name(&self) -> String {
        match self {
            Type::Any => "any type".into(),
            Type::String => "string".into(),
            Type::Number => "number".into(),
            Type::Bool => "bool".into(),
            Type::List(t) => format!("list of {}", t.name()),
            Type::Set(t) => format!("set of {}", t.name()),
            Type::Map(t) => format!("map of {}", t.name()),
            Type::Tuple(_) => "tuple".into(),
            Type::Object(_) => "object".into(),
        }
    }

    /// Whether a value of this type is a string, number or bool, which `-var` and
    /// `NOMAD_VAR_` give as plain text rather than as an HCL expression.
    pub fn is_primitive(&self) -> bool {
        matches!(self, Type::String | Type::Number | Type::Bool)
    }

    /// The type a value has, used when a variable declares no type but has a default.
    pub fn of(v: &Value) -> Type {
        match v {
            Value::Null => Type::Any,
            Value::Bool(_) => Type::Bool,
            Value::Number(_) => Type::Number,
            Value::String(_) => Type::String,
            Value::List(items) => Type::Tuple(items.iter().map(Type::of).collect()),
            Value::Object(fields) => Type::Object(
                fields
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            Attr {
                                ty: Type::of(v),
                                optional: false,
                                default: None,
                            },
                        )
                    })
                    .collect(),
            ),
        }
    }
}

/// Why a type expression is not one.
pub(crate) type TypeError = (String, Option<std::ops::Range<usize>>);

const NOT_A_TYPE: &str = "A type specification is either a primitive type keyword (bool, number, \
                          string) or a complex type constructor call, like list(string).";

/// Reads a type constraint from its expression (`string`, `map(number)`, `object({...})`).
pub(crate) fn parse_type(expr: &Expression) -> Result<Type, TypeError> {
    use hcl_edit::Span;
    let at = || expr.span();
    match expr {
        Expression::Variable(v) => match v.as_str() {
            "string" => Ok(Type::String),
            "number" => Ok(Type::Number),
            "bool" => Ok(Type::Bool),
            "any" => Ok(Type::Any),
            kw @ ("list" | "set" | "map") => Err((
                format!("The {kw} type constructor requires one argument specifying the element type."),
                at(),
            )),
            "object" => Err((
                "The object type constructor requires one argument specifying the attribute types as a map.".into(),
                at(),
            )),
            "tuple" => Err((
                "The tuple type constructor requires one argument specifying the element types as a list.".into(),
                at(),
            )),
            other => Err((
                format!("The keyword {other:?} is not a valid type specification."),
                at(),
            )),
        },
        Expression::Parenthesis(p) => parse_type(p.inner()),
        Expression::FuncCall(call) => {
            let name = call.name.name.as_str();
            let args: Vec<&Expression> = call.args.iter().collect();
            if matches!(name, "string" | "number" | "bool") {
                return Err((
                    format!("Primitive type keyword {name:?} does not expect arguments."),
                    at(),
                ));
            }
            if name == "any" {
                return Err((
                    format!("Type constraint keyword {name:?} does not expect arguments."),
                    at(),
                ));
            }
            let [arg] = args.as_slice() else {
                return Err(match name {
                    "list" | "set" | "map" => (
                        format!("The {name} type constructor requires one argument specifying the element type."),
                        at(),
                    ),
                    "object" => ("The object type constructor requires one argument specifying the attribute types as a map.".into(), at()),
                    "tuple" => ("The tuple type constructor requires one argument specifying the element types as a list.".into(), at()),
                    "optional" => ("Optional attribute modifier is only for object attribute types.".into(), at()),
                    _ => (format!("Keyword {name:?} is not a valid type constructor."), at()),
                });
            };
            match name {
                "list" => Ok(Type::List(Box::new(parse_type(arg)?))),
                "set" => Ok(Type::Set(Box::new(parse_type(arg)?))),
                "map" => Ok(Type::Map(Box::new(parse_type(arg)?))),
                "tuple" => match arg {
                    Expression::Array(items) => Ok(Type::Tuple(
                        items.iter().map(parse_type).collect::<Result<_, _>>()?,
                    )),
                    _ => Err((
                        "Tuple type constructor requires a list of element types.".into(),
                        arg.span(),
                    )),
                },
                "object" => parse_object(arg),
                "optional" => Err((
                    "Optional attribute modifier is only for object attribute types.".into(),
                    at(),
                )),
                _ => Err((
                    format!("Keyword {name:?} is not a valid type constructor."),
                    at(),
                )),
            }
        }
        _ => Err((NOT_A_TYPE.into(), at())),
    }
}

fn parse_object(arg: &Expression) -> Result<Type, TypeError> {
    use hcl_edit::Span;
    let Expression::Object(obj) = arg else {
        return Err((
            "Object type constructor requires a map whose keys are attribute names and whose values are the corresponding attribute types.".into(),
            arg.span(),
        ));
    };
    let mut attrs = BTreeMap::new();
    for (key, value) in obj.iter() {
        let name = match key {
            ObjectKey::Ident(i) => i.as_str().to_string(),
            ObjectKey::Expression(Expression::Variable(v)) => v.as_str().to_string(),
            ObjectKey::Expression(Expression::String(s)) => s.as_str().to_string(),
            ObjectKey::Expression(e) => {
                return Err((
                    "Object constructor map keys must be attribute names.".into(),
                    e.span(),
                ));
            }
        };
        let attr = match value.expr() {
            Expression::FuncCall(call) if call.name.name.as_str() == "optional" => {
                let args: Vec<&Expression> = call.args.iter().collect();
                match args.as_slice() {
                    [ty] => Attr {
                        ty: parse_type(ty)?,
                        optional: true,
                        default: None,
                    },
                    [ty, default] => {
                        let ty = parse_type(ty)?;
                        let value = super::constant(default).map_err(|e| (e.message, e.span))?;
                        let value = convert(&value, &ty).map_err(|e| {
                            (
                                format!(
                                    "This default value is not compatible with the attribute's type constraint: {e}."
                                ),
                                default.span(),
                            )
                        })?;
                        Attr {
                            ty,
                            optional: true,
                            default: Some(value),
                        }
                    }
                    _ => {
                        return Err((
                            "Optional attribute modifier expects at most two arguments: the attribute type, and a default value.".into(),
                            call.span(),
                        ));
                    }
                }
            }
            other => Attr {
                ty: parse_type(other)?,
                optional: false,
                default: None,
            },
        };
        attrs.insert(name, attr);
    }
    Ok(Type::Object(attrs))
}

/// Converts a value to a type as cty does, or says why it cannot (`element 0: string required`).
pub(crate) fn convert(v: &Value, ty: &Type) -> Result<Value, String> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    match ty {
        Type::Any => Ok(v.clone()),
        Type::String => v
            .to_str()
            .map(Value::String)
            .ok_or_else(|| "string required".to_string()),
        Type::Number => match v {
            Value::Number(_) => Ok(v.clone()),
            Value::String(s) => crate::hcl::eval::value::Number::parse(s)
                .map(Value::Number)
                .ok_or_else(|| "a number is required".to_string()),
            _ => Err("number required".into()),
        },
        Type::Bool => match v {
            Value::Bool(_) => Ok(v.clone()),
            Value::String(s) => match s.as_str() {
                "true" | "1" => Ok(Value::Bool(true)),
                "false" | "0" => Ok(Value::Bool(false)),
                other if other.eq_ignore_ascii_case("true") => {
                    Err("a bool is required; to convert from string, use lowercase \"true\"".into())
                }
                other if other.eq_ignore_ascii_case("false") => Err(
                    "a bool is required; to convert from string, use lowercase \"false\"".into(),
                ),
                _ => Err("a bool is required".into()),
            },
            _ => Err("bool required".into()),
        },
        Type::List(elem) | Type::Set(elem) => {
            let Value::List(items) = v else {
                return Err(format!("{} required", ty.name()));
            };
            let items = items
                .iter()
                .enumerate()
                .map(|(i, item)| convert(item, elem).map_err(|e| format!("element {i}: {e}")))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Value::List(if matches!(ty, Type::Set(_)) {
                make_set(items)
            } else {
                items
            }))
        }
        Type::Map(elem) => {
            let Value::Object(fields) = v else {
                return Err(format!("{} required", ty.name()));
            };
            fields
                .iter()
                .map(|(k, item)| {
                    convert(item, elem)
                        .map(|c| (k.clone(), c))
                        .map_err(|e| format!("element {k:?}: {e}"))
                })
                .collect::<Result<_, _>>()
                .map(Value::Object)
        }
        Type::Tuple(elems) => {
            let Value::List(items) = v else {
                return Err("tuple required".into());
            };
            if items.len() != elems.len() {
                return Err(format!(
                    "tuple required with {} elements, but have {}",
                    elems.len(),
                    items.len()
                ));
            }
            items
                .iter()
                .zip(elems)
                .enumerate()
                .map(|(i, (item, t))| convert(item, t).map_err(|e| format!("element {i}: {e}")))
                .collect::<Result<_, _>>()
                .map(Value::List)
        }
        Type::Object(attrs) => {
            let Value::Object(fields) = v else {
                return Err("object required".into());
            };
            let missing: Vec<&String> = attrs
                .iter()
                .filter(|(k, a)| !a.optional && !fields.contains_key(*k))
                .map(|(k, _)| k)
                .collect();
            match missing.as_slice() {
                [] => {}
                [one] => return Err(format!("attribute {one:?} is required")),
                [a, b] => return Err(format!("attributes {a:?} and {b:?} are required")),
                [init @ .., last] => {
                    let list: Vec<String> = init.iter().map(|k| format!("{k:?}")).collect();
                    return Err(format!(
                        "attributes {}, and {last:?} are required",
                        list.join(", ")
                    ));
                }
            }
            let mut out = BTreeMap::new();
            for (k, a) in attrs {
                let value = match fields.get(k) {
                    Some(Value::Null) | None => a.default.clone().unwrap_or(Value::Null),
                    Some(given) => {
                        convert(given, &a.ty).map_err(|e| format!("attribute {k:?}: {e}"))?
                    }
                };
                out.insert(k.clone(), value);
            }
            Ok(Value::Object(out))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(src: &str) -> Result<Type, String> {
        let expr: Expression = src.parse().expect("parses");
        parse_type(&expr).map_err(|e| e.0)
    }

    fn val(src: &str) -> Value {
        let expr: Expression = src.parse().expect("parses");
        crate::hcl::eval::constant(&expr).expect("constant")
    }

    #[test]
    fn type_expressions() {
        assert_eq!(ty("string"), Ok(Type::String));
        assert_eq!(ty("list(number)"), Ok(Type::List(Box::new(Type::Number))));
        assert!(matches!(
            ty("object({a = string, b = optional(number, 3)})"),
            Ok(Type::Object(_))
        ));
        assert!(ty("list").unwrap_err().contains("requires one argument"));
        assert!(
            ty("strin")
                .unwrap_err()
                .contains("not a valid type specification")
        );
        assert!(
            ty("\"string\"")
                .unwrap_err()
                .contains("primitive type keyword")
        );
        assert!(
            ty("object({a = optional(number, \"x\")})")
                .unwrap_err()
                .contains("not compatible")
        );
    }

    #[test]
    fn conversions_follow_cty() {
        assert_eq!(convert(&val("8080"), &Type::String), Ok("8080".into()));
        assert_eq!(convert(&val("\"3\""), &Type::Number), Ok(Value::from(3)));
        assert_eq!(convert(&val("\"1\""), &Type::Bool), Ok(true.into()));
        assert!(
            convert(&val("\"True\""), &Type::Bool)
                .unwrap_err()
                .contains("lowercase")
        );
        assert_eq!(
            convert(&val("[\"b\", \"a\", \"b\"]"), &ty("set(string)").unwrap()),
            Ok(val("[\"a\", \"b\"]"))
        );
        assert_eq!(
            convert(&val("[1, \"x\"]"), &ty("list(number)").unwrap()),
            Err("element 1: a number is required".into())
        );
        let t = ty(
            "object({name = string, port = optional(number, 80), tags = optional(list(string))})",
        )
        .unwrap();
        assert_eq!(
            convert(&val("{name = \"web\", extra = true}"), &t),
            Ok(val("{name = \"web\", port = 80, tags = null}"))
        );
        assert_eq!(
            convert(&val("{port = 1}"), &t),
            Err("attribute \"name\" is required".into())
        );
        assert_eq!(
            convert(&val("{a = 1, b = \"2\"}"), &ty("map(number)").unwrap()),
            Ok(val("{a = 1, b = 2}"))
        );
    }
}
