//! Values of HCL expressions, modelled on HCL's type system (cty) as far as job files see it.
//!
//! Lists, tuples and sets are all sequences here, and maps and objects are both maps with
//! their keys in lexical order, which is the order cty iterates them in (`keys`, `for`,
//! `jsonencode` all see sorted keys). Numbers are whole numbers while arithmetic keeps them
//! whole, and floating point otherwise.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

/// An evaluated HCL value.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) enum Value {
    /// `null`.
    #[default]
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number.
    Number(Number),
    /// A string.
    String(String),
    /// A tuple, list or set.
    List(Vec<Value>),
    /// An object or map.
    Object(BTreeMap<String, Value>),
}

/// A number: whole while it stays whole, floating point otherwise.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Number {
    /// A whole number.
    Int(i64),
    /// Anything else.
    Float(f64),
}

impl Number {
    /// The number as `f64`.
    pub fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }

    /// The number as `i64` when it is whole and fits.
    pub fn as_i64(self) -> Option<i64> {
        match self {
            Number::Int(i) => Some(i),
            Number::Float(f) if f.fract() == 0.0 && f.abs() < 9.223_372_036_854_775e18 => {
                Some(f as i64)
            }
            Number::Float(_) => None,
        }
    }

    /// A number from an `f64`, whole when it is whole; `None` for infinities and NaN.
    pub fn from_f64(f: f64) -> Option<Number> {
        if !f.is_finite() {
            return None;
        }
        if f.fract() == 0.0 && f.abs() < 9.0e15 {
            return Some(Number::Int(f as i64));
        }
        Some(Number::Float(f))
    }

    /// Parses a number as HCL and cty read them (`12`, `-1.5`, `1e3`).
    pub fn parse(text: &str) -> Option<Number> {
        let t = text.trim();
        if t.is_empty() {
            return None;
        }
        if let Ok(i) = t.parse::<i64>() {
            return Some(Number::Int(i));
        }
        // Go's big.Float parsing accepts what Rust's f64 parser does, minus the words.
        if t.chars()
            .any(|c| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        {
            return None;
        }
        t.parse::<f64>().ok().and_then(Number::from_f64)
    }

    pub fn add(self, other: Number) -> Result<Number, String> {
        if let (Number::Int(a), Number::Int(b)) = (self, other)
            && let Some(r) = a.checked_add(b)
        {
            return Ok(Number::Int(r));
        }
        finite(self.as_f64() + other.as_f64())
    }

    pub fn sub(self, other: Number) -> Result<Number, String> {
        if let (Number::Int(a), Number::Int(b)) = (self, other)
            && let Some(r) = a.checked_sub(b)
        {
            return Ok(Number::Int(r));
        }
        finite(self.as_f64() - other.as_f64())
    }

    pub fn mul(self, other: Number) -> Result<Number, String> {
        if let (Number::Int(a), Number::Int(b)) = (self, other)
            && let Some(r) = a.checked_mul(b)
        {
            return Ok(Number::Int(r));
        }
        finite(self.as_f64() * other.as_f64())
    }

    pub fn div(self, other: Number) -> Result<Number, String> {
        // cty answers an infinity here, which no job field accepts: say so at once.
        if other.as_f64() == 0.0 {
            return Err("can't divide by zero".into());
        }
        if let (Number::Int(a), Number::Int(b)) = (self, other)
            && a.checked_rem(b) == Some(0)
            && let Some(r) = a.checked_div(b)
        {
            return Ok(Number::Int(r));
        }
        finite(self.as_f64() / other.as_f64())
    }

    /// The remainder of a division that truncates towards zero; `x % 0` is `x`, as in cty.
    pub fn rem(self, other: Number) -> Result<Number, String> {
        if other.as_f64() == 0.0 {
            return Ok(self);
        }
        if let (Number::Int(a), Number::Int(b)) = (self, other)
            && let Some(r) = a.checked_rem(b)
        {
            return Ok(Number::Int(r));
        }
        finite(self.as_f64() % other.as_f64())
    }

    pub fn neg(self) -> Number {
        match self {
            Number::Int(i) => i
                .checked_neg()
                .map_or(Number::Float(-(i as f64)), Number::Int),
            Number::Float(f) => Number::Float(-f),
        }
    }
}

fn finite(f: f64) -> Result<Number, String> {
    Number::from_f64(f).ok_or_else(|| "the result is not a finite number".to_string())
}

impl PartialEq for Number {
    fn eq(&self, other: &Number) -> bool {
        match (self, other) {
            (Number::Int(a), Number::Int(b)) => a == b,
            _ => self.as_f64() == other.as_f64(),
        }
    }
}

impl PartialOrd for Number {
    fn partial_cmp(&self, other: &Number) -> Option<Ordering> {
        match (self, other) {
            (Number::Int(a), Number::Int(b)) => Some(a.cmp(b)),
            _ => self.as_f64().partial_cmp(&other.as_f64()),
        }
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Number::Int(i) => write!(f, "{i}"),
            Number::Float(x) => {
                if x.fract() == 0.0 && x.abs() < 1e21 {
                    write!(f, "{x:.0}")
                } else {
                    write!(f, "{x}")
                }
            }
        }
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::Number(Number::Int(i))
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl Value {
    /// The value's type as HCL names it in messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::List(_) => "tuple",
            Value::Object(_) => "object",
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The value as a string, converting numbers and bools as HCL does.
    pub fn to_str(&self) -> Option<String> {
        match self {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }

    /// The value as a number, converting numeric strings as HCL does.
    pub fn to_number(&self) -> Option<Number> {
        match self {
            Value::Number(n) => Some(*n),
            Value::String(s) => Number::parse(s),
            _ => None,
        }
    }

    /// The value as a bool, converting `"true"`/`"false"` as HCL does.
    pub fn to_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            Value::String(s) if s == "true" => Some(true),
            Value::String(s) if s == "false" => Some(false),
            _ => None,
        }
    }

    /// The value as JSON: whole numbers as integers, as Nomad decodes them.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Number(Number::Int(i)) => J::from(*i),
            Value::Number(Number::Float(f)) => {
                serde_json::Number::from_f64(*f).map_or(J::Null, J::Number)
            }
            Value::String(s) => J::String(s.clone()),
            Value::List(items) => J::Array(items.iter().map(Value::to_json).collect()),
            Value::Object(fields) => J::Object(
                fields
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }

    /// A value from JSON (numbers whole when they are whole).
    pub fn from_json(j: &serde_json::Value) -> Value {
        use serde_json::Value as J;
        match j {
            J::Null => Value::Null,
            J::Bool(b) => Value::Bool(*b),
            J::Number(n) => match n.as_i64() {
                Some(i) => Value::from(i),
                None => n
                    .as_f64()
                    .and_then(Number::from_f64)
                    .map_or(Value::Null, Value::Number),
            },
            J::String(s) => Value::String(s.clone()),
            J::Array(items) => Value::List(items.iter().map(Value::from_json).collect()),
            J::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::from_json(v)))
                    .collect(),
            ),
        }
    }

    /// The value as HCL source (numbers, strings, lists, objects), for messages.
    pub fn to_hcl(&self) -> String {
        match self {
            Value::Null => "null".into(),
            Value::Bool(b) => b.to_string(),
            Value::Number(n) => n.to_string(),
            Value::String(s) => format!("{s:?}"),
            Value::List(items) => format!(
                "[{}]",
                items
                    .iter()
                    .map(Value::to_hcl)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Value::Object(fields) => format!(
                "{{{}}}",
                fields
                    .iter()
                    .map(|(k, v)| format!("{k} = {}", v.to_hcl()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// Orders values for sets and `sort`: numbers by value, strings lexically, then by kind.
pub(crate) fn compare(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Null => 0,
            Value::Bool(_) => 1,
            Value::Number(_) => 2,
            Value::String(_) => 3,
            Value::List(_) => 4,
            Value::Object(_) => 5,
        }
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.partial_cmp(y).unwrap_or(Ordering::Equal),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::List(x), Value::List(y)) => x
            .iter()
            .zip(y)
            .map(|(p, q)| compare(p, q))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or_else(|| x.len().cmp(&y.len())),
        _ => rank(a)
            .cmp(&rank(b))
            .then_with(|| a.to_hcl().cmp(&b.to_hcl())),
    }
}

/// A set from values: sorted, without duplicates, as cty orders a set.
pub(crate) fn make_set(mut items: Vec<Value>) -> Vec<Value> {
    items.sort_by(compare);
    items.dedup();
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_stays_whole_while_it_can() {
        let n = |i| Number::Int(i);
        assert_eq!(n(7).div(n(2)).unwrap().to_string(), "3.5");
        assert!(matches!(n(8).div(n(2)).unwrap(), Number::Int(4)));
        assert_eq!(n(-7).rem(n(3)).unwrap(), n(-1));
        assert!(n(1).div(n(0)).is_err());
        assert!(n(i64::MIN).div(n(-1)).is_ok(), "no overflow panic");
        assert!(matches!(n(i64::MAX).add(n(1)).unwrap(), Number::Float(_)));
        assert_eq!(Number::Float(2.0e3).to_string(), "2000");
        assert_eq!(Number::parse(" 1e3 "), Some(n(1000)));
        assert_eq!(Number::parse("0x10"), None);
        assert_eq!(Number::parse("inf"), None);
    }

    #[test]
    fn sets_are_sorted_and_unique() {
        let set = make_set(vec!["b".into(), "a".into(), "b".into()]);
        assert_eq!(set, vec![Value::from("a"), Value::from("b")]);
        let nums = make_set(vec![Value::from(10), Value::from(9)]);
        assert_eq!(nums, vec![Value::from(9), Value::from(10)]);
    }
}
