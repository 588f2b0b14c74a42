//! Number functions.

use super::{FResult, FuncError, arity, int, number, string};
use crate::hcl::eval::value::{Number, Value};

fn float(f: f64) -> FResult {
    Number::from_f64(f)
        .map(Value::Number)
        .ok_or_else(|| FuncError::Failed("the result is not a finite number".into()))
}

pub(super) fn call(name: &str, args: &[Value]) -> Option<FResult> {
    Some(match name {
        "abs" => (|| {
            arity(args, 1)?;
            match number(args, 0)? {
                Number::Int(i) => Ok(Value::Number(Number::Int(i).neg()))
                    .map(|v| if i < 0 { v } else { Value::from(i) }),
                Number::Float(f) => float(f.abs()),
            }
        })(),
        "ceil" => (|| {
            arity(args, 1)?;
            float(number(args, 0)?.as_f64().ceil())
        })(),
        "floor" => (|| {
            arity(args, 1)?;
            float(number(args, 0)?.as_f64().floor())
        })(),
        "signum" => (|| {
            arity(args, 1)?;
            let n = number(args, 0)?.as_f64();
            Ok(Value::from(if n > 0.0 {
                1
            } else if n < 0.0 {
                -1
            } else {
                0
            }))
        })(),
        "log" => (|| {
            arity(args, 2)?;
            let (n, base) = (number(args, 0)?.as_f64(), number(args, 1)?.as_f64());
            float(n.ln() / base.ln())
        })(),
        "pow" => (|| {
            arity(args, 2)?;
            let (n, p) = (number(args, 0)?, number(args, 1)?);
            if let (Number::Int(b), Number::Int(e)) = (n, p)
                && let Ok(e) = u32::try_from(e)
                && let Some(r) = b.checked_pow(e)
            {
                return Ok(Value::from(r));
            }
            float(n.as_f64().powf(p.as_f64()))
        })(),
        "parseint" => (|| {
            arity(args, 2)?;
            let s = string(args, 0)?;
            let base = int(args, 1)?;
            if !(2..=62).contains(&base) {
                return Err(FuncError::Arg(
                    1,
                    "base must be a whole number between 2 and 62 inclusive".into(),
                ));
            }
            parse_int(&s, base as u32).map(Value::from).ok_or_else(|| {
                FuncError::Failed(format!("cannot parse {s:?} as a base {base} integer"))
            })
        })(),
        _ => return None,
    })
}

/// Go's `big.Int.SetString` for bases up to 62: digits, then lower-case, then upper-case
/// letters (bases up to 36 take either case).
fn parse_int(s: &str, base: u32) -> Option<i64> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if digits.is_empty() {
        return None;
    }
    let mut acc: i64 = 0;
    for c in digits.chars() {
        let d = match c {
            '0'..='9' => c as u32 - '0' as u32,
            'a'..='z' => c as u32 - 'a' as u32 + 10,
            'A'..='Z' if base <= 36 => c as u32 - 'A' as u32 + 10,
            'A'..='Z' => c as u32 - 'A' as u32 + 36,
            _ => return None,
        };
        if d >= base {
            return None;
        }
        acc = acc
            .checked_mul(i64::from(base))?
            .checked_add(i64::from(d))?;
    }
    Some(if neg { -acc } else { acc })
}
