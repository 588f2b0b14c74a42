//! Collection functions: lists, maps and sets.

use std::collections::BTreeMap;

use super::{FResult, FuncError, arity, at_least, int, list, map, number, string, strings};
use crate::hcl::eval::value::{Value, make_set};

pub(super) fn call(name: &str, args: &[Value]) -> Option<FResult> {
    Some(match name {
        "length" => (|| {
            arity(args, 1)?;
            Ok(Value::from(match &args[0] {
                Value::String(s) => s.chars().count(),
                Value::List(items) => items.len(),
                Value::Object(fields) => fields.len(),
                Value::Null => return Err(FuncError::Arg(0, "argument must not be null".into())),
                other => {
                    return Err(FuncError::Arg(
                        0,
                        format!(
                            "collection or structural type is required, not {}",
                            other.type_name()
                        ),
                    ));
                }
            } as i64))
        })(),
        "keys" => (|| {
            arity(args, 1)?;
            Ok(Value::List(
                map(args, 0)?
                    .keys()
                    .map(|k| Value::from(k.as_str()))
                    .collect(),
            ))
        })(),
        "values" => (|| {
            arity(args, 1)?;
            Ok(Value::List(map(args, 0)?.values().cloned().collect()))
        })(),
        "lookup" => (|| {
            if !(2..=3).contains(&args.len()) {
                return Err(FuncError::Arity(format!(
                    "expects 2 or 3 argument(s), got {}",
                    args.len()
                )));
            }
            let m = map(args, 0)?;
            let key = string(args, 1)?;
            match (m.get(&key), args.get(2)) {
                (Some(v), _) => Ok(v.clone()),
                (None, Some(default)) => Ok(default.clone()),
                (None, None) => Err(FuncError::Failed(format!(
                    "lookup failed to find key {key:?}"
                ))),
            }
        })(),
        "merge" => (|| {
            let mut out = BTreeMap::new();
            for (i, a) in args.iter().enumerate() {
                match a {
                    Value::Null => {}
                    Value::Object(fields) => {
                        out.extend(fields.iter().map(|(k, v)| (k.clone(), v.clone())));
                    }
                    other => {
                        return Err(FuncError::Arg(
                            i,
                            format!(
                                "arguments must be maps or objects, got {:?}",
                                other.type_name()
                            ),
                        ));
                    }
                }
            }
            Ok(Value::Object(out))
        })(),
        "concat" => (|| {
            at_least(args, 1)?;
            let mut out = Vec::new();
            for i in 0..args.len() {
                out.extend(list(args, i)?.iter().cloned());
            }
            Ok(Value::List(out))
        })(),
        "contains" => (|| {
            arity(args, 2)?;
            Ok(Value::Bool(list(args, 0)?.contains(&args[1])))
        })(),
        "distinct" => (|| {
            arity(args, 1)?;
            let mut out: Vec<Value> = Vec::new();
            for v in list(args, 0)? {
                if !out.contains(v) {
                    out.push(v.clone());
                }
            }
            Ok(Value::List(out))
        })(),
        "element" => (|| {
            arity(args, 2)?;
            let items = list(args, 0)?;
            let i = int(args, 1)?;
            if items.is_empty() {
                return Err(FuncError::Failed(
                    "cannot use element function with an empty list".into(),
                ));
            }
            if i < 0 {
                return Err(FuncError::Failed(
                    "cannot use element function with a negative index".into(),
                ));
            }
            Ok(items[(i as usize) % items.len()].clone())
        })(),
        "index" => (|| {
            arity(args, 2)?;
            list(args, 0)?
                .iter()
                .position(|v| *v == args[1])
                .map(|i| Value::from(i as i64))
                .ok_or_else(|| FuncError::Failed("item not found".into()))
        })(),
        "flatten" => (|| {
            arity(args, 1)?;
            let mut out = Vec::new();
            flatten_into(list(args, 0)?, &mut out);
            Ok(Value::List(out))
        })(),
        "chunklist" => (|| {
            arity(args, 2)?;
            let items = list(args, 0)?;
            let size = int(args, 1)?;
            if size < 0 {
                return Err(FuncError::Arg(
                    1,
                    "the size argument must be positive".into(),
                ));
            }
            if size == 0 {
                return Ok(Value::List(vec![Value::List(items.to_vec())]));
            }
            Ok(Value::List(
                items
                    .chunks(size as usize)
                    .map(|c| Value::List(c.to_vec()))
                    .collect(),
            ))
        })(),
        "coalesce" => (|| {
            at_least(args, 1)?;
            args.iter()
                .find(|v| !v.is_null())
                .cloned()
                .ok_or_else(|| FuncError::Failed("no non-null arguments".into()))
        })(),
        "coalescelist" => (|| {
            at_least(args, 1)?;
            for (i, a) in args.iter().enumerate() {
                match a {
                    Value::Null => {}
                    Value::List(items) if items.is_empty() => {}
                    Value::List(_) => return Ok(a.clone()),
                    other => {
                        return Err(FuncError::Arg(
                            i,
                            format!(
                                "coalescelist arguments must be lists or tuples, got {}",
                                other.type_name()
                            ),
                        ));
                    }
                }
            }
            Err(FuncError::Failed("no non-null arguments".into()))
        })(),
        "compact" => (|| {
            arity(args, 1)?;
            let items = list(args, 0)?;
            let mut out = Vec::new();
            for v in items {
                match v {
                    Value::Null => {}
                    Value::String(s) if s.is_empty() => {}
                    other => {
                        out.push(Value::String(other.to_str().ok_or_else(|| {
                            FuncError::Arg(0, "list of string required".into())
                        })?))
                    }
                }
            }
            Ok(Value::List(out))
        })(),
        "reverse" => (|| {
            arity(args, 1)?;
            Ok(Value::List(list(args, 0)?.iter().rev().cloned().collect()))
        })(),
        "slice" => (|| {
            arity(args, 3)?;
            let items = list(args, 0)?;
            let (start, end) = (int(args, 1)?, int(args, 2)?);
            if start < 0 {
                return Err(FuncError::Arg(
                    1,
                    "the starting index must not be negative".into(),
                ));
            }
            if end as usize > items.len() || end < 0 {
                return Err(FuncError::Arg(
                    2,
                    "end index must not be greater than the length of the list".into(),
                ));
            }
            if start > end {
                return Err(FuncError::Arg(
                    1,
                    "the start index must not be greater than the end index".into(),
                ));
            }
            Ok(Value::List(items[start as usize..end as usize].to_vec()))
        })(),
        "sort" => (|| {
            arity(args, 1)?;
            let mut s = strings(args, 0)?;
            s.sort();
            Ok(Value::List(s.into_iter().map(Value::String).collect()))
        })(),
        "range" => range(args),
        "setunion" => (|| {
            at_least(args, 1)?;
            let mut all = Vec::new();
            for i in 0..args.len() {
                all.extend(list(args, i)?.iter().cloned());
            }
            Ok(Value::List(make_set(all)))
        })(),
        "setintersection" => (|| {
            at_least(args, 1)?;
            let mut acc = make_set(list(args, 0)?.to_vec());
            for i in 1..args.len() {
                let other = list(args, i)?;
                acc.retain(|v| other.contains(v));
            }
            Ok(Value::List(acc))
        })(),
        "setproduct" => (|| {
            at_least(args, 2)?;
            let mut acc: Vec<Vec<Value>> = vec![Vec::new()];
            let mut total: usize = 1;
            for i in 0..args.len() {
                let items = list(args, i)?;
                total = total.saturating_mul(items.len());
                if total > 1_000_000 {
                    return Err(FuncError::Failed(
                        "the product would have more than 1000000 elements".into(),
                    ));
                }
                let mut next = Vec::with_capacity(acc.len() * items.len());
                for prefix in &acc {
                    for item in items {
                        let mut row = prefix.clone();
                        row.push(item.clone());
                        next.push(row);
                    }
                }
                acc = next;
            }
            Ok(Value::List(acc.into_iter().map(Value::List).collect()))
        })(),
        "zipmap" => (|| {
            arity(args, 2)?;
            let keys = strings(args, 0)?;
            let values = list(args, 1)?;
            if keys.len() != values.len() {
                return Err(FuncError::Failed(format!(
                    "number of keys ({}) does not match number of values ({})",
                    keys.len(),
                    values.len()
                )));
            }
            Ok(Value::Object(
                keys.into_iter().zip(values.iter().cloned()).collect(),
            ))
        })(),
        "max" | "min" => (|| {
            at_least(args, 1)?;
            let mut best = number(args, 0)?;
            for i in 1..args.len() {
                let n = number(args, i)?;
                let better = if name == "max" { n > best } else { n < best };
                if better {
                    best = n;
                }
            }
            Ok(Value::Number(best))
        })(),
        _ => return None,
    })
}

fn flatten_into(items: &[Value], out: &mut Vec<Value>) {
    for v in items {
        match v {
            Value::List(inner) => flatten_into(inner, out),
            other => out.push(other.clone()),
        }
    }
}

/// cty's `range([start,] limit [, step])`.
fn range(args: &[Value]) -> FResult {
    let (start, limit, step) = match args.len() {
        1 => (0.0, number(args, 0)?.as_f64(), 1.0),
        2 => {
            let (s, l) = (number(args, 0)?.as_f64(), number(args, 1)?.as_f64());
            (s, l, if l < s { -1.0 } else { 1.0 })
        }
        3 => (
            number(args, 0)?.as_f64(),
            number(args, 1)?.as_f64(),
            number(args, 2)?.as_f64(),
        ),
        n => {
            return Err(FuncError::Arity(format!(
                "expects 1, 2 or 3 argument(s), got {n}"
            )));
        }
    };
    if step == 0.0 {
        return Err(FuncError::Arg(2, "step must not be zero".into()));
    }
    if (limit > start && step < 0.0) || (limit < start && step > 0.0) {
        return Err(FuncError::Failed(if step < 0.0 {
            "step must be positive when start is less than limit".into()
        } else {
            "step must be negative when start is greater than limit".into()
        }));
    }
    let mut out = Vec::new();
    let mut v = start;
    while (step > 0.0 && v < limit) || (step < 0.0 && v > limit) {
        if out.len() >= 1024 {
            return Err(FuncError::Failed("more than 1024 values were generated; either decrease the difference between start and limit or use a smaller step".into()));
        }
        out.push(
            crate::hcl::eval::value::Number::from_f64(v)
                .map(Value::Number)
                .unwrap_or(Value::Null),
        );
        v += step;
    }
    Ok(Value::List(out))
}
