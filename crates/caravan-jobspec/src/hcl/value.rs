//! Evaluated HCL values → the field types of Nomad's job (numbers, strings, durations,
//! lists and maps), converting as Nomad's decoder does.

use super::eval::Value;
use crate::duration::parse_duration;

/// A whole number as `i64`, from a number or a numeric string (HCL converts both).
pub(crate) fn to_i64(v: &Value) -> Result<i64, String> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .ok_or_else(|| format!("expected a whole number, found {n}")),
        Value::String(s) => s
            .trim()
            .parse()
            .map_err(|_| format!("expected a whole number, found string {s:?}")),
        other => Err(format!("expected a number, found {}", other.type_name())),
    }
}

/// A bool, from a bool or the strings `"true"`/`"false"` (HCL converts both).
pub(crate) fn to_bool(v: &Value) -> Result<bool, String> {
    v.to_bool()
        .ok_or_else(|| format!("expected a bool, found {}", describe(v)))
}

/// A string; numbers and bools convert as HCL converts them.
pub(crate) fn to_string(v: &Value) -> Result<String, String> {
    v.to_str()
        .ok_or_else(|| format!("expected a string, found {}", v.type_name()))
}

/// A duration in nanoseconds, from a Go duration string (`"30s"`) or a number of nanoseconds.
pub(crate) fn to_duration(v: &Value) -> Result<i64, String> {
    match v {
        Value::String(s) => parse_duration(s),
        Value::Number(n) => n
            .as_i64()
            .ok_or_else(|| format!("expected a duration such as \"30s\", found {n}")),
        other => Err(format!(
            "expected a duration such as \"30s\", found {}",
            other.type_name()
        )),
    }
}

/// A list of strings.
pub(crate) fn to_string_list(v: &Value) -> Result<Vec<String>, String> {
    match v {
        Value::List(items) => items.iter().map(to_string).collect(),
        other => Err(format!(
            "expected a list of strings, found {}",
            other.type_name()
        )),
    }
}

/// A map of strings (an object whose values are strings, numbers or bools).
pub(crate) fn to_string_map(v: &Value) -> Result<Vec<(String, String)>, String> {
    match v {
        Value::Object(fields) => fields
            .iter()
            .map(|(k, v)| {
                to_string(v)
                    .map(|s| (k.clone(), s))
                    .map_err(|e| format!("{k}: {e}"))
            })
            .collect(),
        other => Err(format!(
            "expected a map of strings, found {}",
            other.type_name()
        )),
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::String(s) => format!("string {s:?}"),
        other => other.type_name().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(src: &str) -> Value {
        let expr: hcl_edit::expr::Expression = src.parse().expect("parses");
        crate::hcl::eval::constant(&expr).expect("constant")
    }

    #[test]
    fn conversions_follow_hcl() {
        assert_eq!(to_i64(&Value::String("8080".into())), Ok(8080));
        assert!(to_i64(&v("1.5")).is_err());
        assert_eq!(to_bool(&Value::String("true".into())), Ok(true));
        assert_eq!(to_string(&v("8080")), Ok("8080".into()));
        assert_eq!(
            to_duration(&Value::String("1h30m".into())),
            Ok(5_400_000_000_000)
        );
        assert!(to_duration(&Value::String("soon".into())).is_err());
        assert!(to_string_list(&Value::String("dc1".into())).is_err());
        assert_eq!(
            to_string_map(&v("{a = 1, b = true}")),
            Ok(vec![("a".into(), "1".into()), ("b".into(), "true".into())])
        );
    }
}
