//! Traversal steps (attributes, indexes), operators, and Nomad's pass-through text of a
//! reference to an unknown name.

use std::ops::Range;

use hcl_edit::expr::BinaryOperator;

use super::EvalError;
use super::value::{Number, Value};

type Result<T> = std::result::Result<T, EvalError>;

/// Nomad's text for a reference to an unknown name: the reference as written, inside the
/// `${ ... }` that encloses it (spaces kept), or wrapped in a new `${}` when it stands alone.
pub(super) fn passthrough(src: &str, span: Range<usize>) -> String {
    let body = src.as_bytes();
    let (start, end) = (span.start, span.end.min(body.len()));
    let mut v = src.get(start..end).unwrap_or_default().to_string();
    let mut bracketed = false;
    let mut i = start;
    while i >= 2 {
        i -= 1;
        if body[i] == b'{' && body[i - 1] == b'$' {
            bracketed = true;
            v = format!("{}{v}", src.get(i - 1..start).unwrap_or_default());
            break;
        } else if body[i] != b' ' {
            break;
        }
    }
    if !bracketed {
        return format!("${{{v}}}");
    }
    // The same scan as Nomad's, so that what reaches the client is byte for byte the same.
    let mut j = end + 1;
    while j < body.len() {
        if body[j] == b'}' {
            v.push_str(src.get(end..j).unwrap_or_default());
        } else if body[j] != b' ' {
            v.push('}');
            break;
        }
        j += 1;
    }
    v
}

pub(super) fn get_attr(value: Value, name: &str, span: Option<Range<usize>>) -> Result<Value> {
    match value {
        Value::Object(mut fields) => fields.remove(name).ok_or_else(|| {
            EvalError::new(
                format!(
                    "Unsupported attribute: This object does not have an attribute named {name:?}."
                ),
                span,
            )
        }),
        Value::Null => Err(EvalError::new(
            "Attempt to get attribute from null value: This value is null, so it does not have any attributes.",
            span,
        )),
        Value::List(_) => Err(EvalError::new(
            format!(
                "Unsupported attribute: Can't access attributes on a list of objects. Did you mean to access attribute {name:?} for a specific element of the list, or across all elements of the list?"
            ),
            span,
        )),
        other => Err(EvalError::new(
            format!(
                "Unsupported attribute: Can't access attributes on a primitive-typed value ({}).",
                other.type_name()
            ),
            span,
        )),
    }
}

pub(super) fn index(value: Value, key: &Value, span: Option<Range<usize>>) -> Result<Value> {
    const MISSING: &str =
        "Invalid index: The given key does not identify an element in this collection value";
    match value {
        Value::List(mut items) => {
            let Some(i) = key.to_number().and_then(Number::as_i64) else {
                return Err(EvalError::new(
                    format!(
                        "Invalid index: The given key does not identify an element in this collection value: a whole number is required, not {}.",
                        key.type_name()
                    ),
                    span,
                ));
            };
            if i < 0 {
                return Err(EvalError::new(
                    format!("{MISSING}: a negative number is not a valid index for a sequence."),
                    span,
                ));
            }
            let len = items.len();
            match usize::try_from(i).ok().filter(|i| *i < len) {
                Some(i) => Ok(items.swap_remove(i)),
                None => Err(EvalError::new(
                    format!(
                        "{MISSING}: the given index is greater than or equal to the length of the collection."
                    ),
                    span,
                )),
            }
        }
        Value::Object(mut fields) => {
            let Some(k) = key.to_str() else {
                return Err(EvalError::new(
                    format!(
                        "Invalid index: The given key does not identify an element in this collection value: string required, not {}.",
                        key.type_name()
                    ),
                    span,
                ));
            };
            fields
                .remove(&k)
                .ok_or_else(|| EvalError::new(format!("{MISSING}."), span))
        }
        Value::Null => Err(EvalError::new(
            "Attempt to index null value: This value is null, so it does not have any indices.",
            span,
        )),
        other => Err(EvalError::new(
            format!(
                "Invalid index: This value does not have any indices (it is a {}).",
                other.type_name()
            ),
            span,
        )),
    }
}

pub(super) fn binary(
    op: BinaryOperator,
    lhs: Value,
    rhs: Value,
    lspan: Option<Range<usize>>,
    rspan: Option<Range<usize>>,
) -> Result<Value> {
    use BinaryOperator as B;
    let num_side = |v: &Value, span: &Option<Range<usize>>, side: &str| {
        v.to_number().ok_or_else(|| {
            EvalError::new(
                format!(
                    "Invalid operand: Unsuitable value for {side} operand: a number is required, not {}.",
                    v.type_name()
                ),
                span.clone(),
            )
        })
    };
    let nums = || -> Result<(Number, Number)> {
        Ok((
            num_side(&lhs, &lspan, "left")?,
            num_side(&rhs, &rspan, "right")?,
        ))
    };
    let boolean = |v: &Value, span: &Option<Range<usize>>, side: &str| {
        v.to_bool().ok_or_else(|| {
            EvalError::new(
                format!(
                    "Invalid operand: Unsuitable value for {side} operand: a bool is required, not {}.",
                    v.type_name()
                ),
                span.clone(),
            )
        })
    };
    let whole = lspan
        .clone()
        .zip(rspan.clone())
        .map(|(l, r)| l.start..r.end);
    let arith = |r: std::result::Result<Number, String>| {
        r.map(Value::Number)
            .map_err(|e| EvalError::new(format!("Error in arithmetic: {e}."), whole.clone()))
    };
    match op {
        B::Eq => Ok(Value::Bool(equal(&lhs, &rhs))),
        B::NotEq => Ok(Value::Bool(!equal(&lhs, &rhs))),
        B::And => Ok(Value::Bool(
            boolean(&lhs, &lspan, "left")? & boolean(&rhs, &rspan, "right")?,
        )),
        B::Or => Ok(Value::Bool(
            boolean(&lhs, &lspan, "left")? | boolean(&rhs, &rspan, "right")?,
        )),
        B::Less | B::LessEq | B::Greater | B::GreaterEq => {
            let (a, b) = nums()?;
            Ok(Value::Bool(match op {
                B::Less => a < b,
                B::LessEq => a <= b,
                B::Greater => a > b,
                _ => a >= b,
            }))
        }
        B::Plus => {
            let (a, b) = nums()?;
            arith(a.add(b))
        }
        B::Minus => {
            let (a, b) = nums()?;
            arith(a.sub(b))
        }
        B::Mul => {
            let (a, b) = nums()?;
            arith(a.mul(b))
        }
        B::Div => {
            let (a, b) = nums()?;
            arith(a.div(b))
        }
        B::Mod => {
            let (a, b) = nums()?;
            arith(a.rem(b))
        }
    }
}

/// cty's equality: values of different kinds are unequal (`1 != "1"`).
pub(super) fn equal(a: &Value, b: &Value) -> bool {
    a == b
}
