//! String functions: case, trimming, splitting, substrings, `format` and `formatlist`,
//! replacement (plain and by regular expression).

use super::{FResult, FuncError, arity, at_least, int, string, strings};
use crate::hcl::eval::MAX_STRING;

fn too_long() -> FuncError {
    FuncError::Failed(format!("the result would exceed {MAX_STRING} bytes"))
}
use crate::hcl::eval::value::{Number, Value};

pub(super) fn call(name: &str, args: &[Value]) -> Option<FResult> {
    let s1 = |f: fn(&str) -> String| -> FResult {
        arity(args, 1)?;
        Ok(Value::String(f(&string(args, 0)?)))
    };
    Some(match name {
        "upper" => s1(|s| s.to_uppercase()),
        "lower" => s1(|s| s.to_lowercase()),
        "title" => s1(title),
        "trimspace" => s1(|s| s.trim().to_string()),
        "strrev" => s1(|s| s.chars().rev().collect()),
        "chomp" => s1(|s| s.trim_end_matches(['\r', '\n']).to_string()),
        "strlen" => (|| {
            arity(args, 1)?;
            Ok(Value::from(string(args, 0)?.chars().count() as i64))
        })(),
        "indent" => (|| {
            arity(args, 2)?;
            let n = usize::try_from(int(args, 0)?)
                .map_err(|_| FuncError::Arg(0, "must not be negative".into()))?;
            let s = string(args, 1)?;
            let lines = s.matches('\n').count();
            if n.saturating_mul(lines).saturating_add(s.len()) > MAX_STRING {
                return Err(too_long());
            }
            let pad = " ".repeat(n);
            Ok(Value::String(s.replace('\n', &format!("\n{pad}"))))
        })(),
        "trim" => (|| {
            arity(args, 2)?;
            let cutset: Vec<char> = string(args, 1)?.chars().collect();
            Ok(Value::String(
                string(args, 0)?.trim_matches(cutset.as_slice()).to_string(),
            ))
        })(),
        "trimprefix" => (|| {
            arity(args, 2)?;
            let (s, p) = (string(args, 0)?, string(args, 1)?);
            Ok(Value::String(
                s.strip_prefix(p.as_str()).unwrap_or(&s).to_string(),
            ))
        })(),
        "trimsuffix" => (|| {
            arity(args, 2)?;
            let (s, p) = (string(args, 0)?, string(args, 1)?);
            Ok(Value::String(
                s.strip_suffix(p.as_str()).unwrap_or(&s).to_string(),
            ))
        })(),
        "split" => (|| {
            arity(args, 2)?;
            let (sep, s) = (string(args, 0)?, string(args, 1)?);
            let parts: Vec<Value> = if sep.is_empty() {
                s.chars().map(|c| Value::String(c.to_string())).collect()
            } else {
                s.split(sep.as_str()).map(Value::from).collect()
            };
            Ok(Value::List(parts))
        })(),
        "join" => (|| {
            at_least(args, 2)?;
            let sep = string(args, 0)?;
            let mut parts = Vec::new();
            for i in 1..args.len() {
                parts.extend(strings(args, i)?);
            }
            Ok(Value::String(parts.join(&sep)))
        })(),
        "replace" => (|| {
            arity(args, 3)?;
            let (s, from, to) = (string(args, 0)?, string(args, 1)?, string(args, 2)?);
            let hits = if from.is_empty() {
                s.chars().count() + 1
            } else {
                s.matches(from.as_str()).count()
            };
            if hits.saturating_mul(to.len()).saturating_add(s.len()) > MAX_STRING {
                return Err(too_long());
            }
            Ok(Value::String(s.replace(&from, &to)))
        })(),
        "regex_replace" => (|| {
            arity(args, 3)?;
            let (s, pattern, to) = (string(args, 0)?, string(args, 1)?, string(args, 2)?);
            let re = regex::Regex::new(&pattern)
                .map_err(|e| FuncError::Arg(1, format!("invalid regular expression: {e}")))?;
            let hits = re.find_iter(&s).count();
            if hits.saturating_mul(to.len()).saturating_add(s.len()) > MAX_STRING {
                return Err(too_long());
            }
            Ok(Value::String(re.replace_all(&s, to.as_str()).into_owned()))
        })(),
        "substr" => (|| {
            arity(args, 3)?;
            let s = string(args, 0)?;
            Ok(Value::String(substr(&s, int(args, 1)?, int(args, 2)?)))
        })(),
        "format" => (|| {
            at_least(args, 1)?;
            format(&string(args, 0)?, &args[1..]).map(Value::String)
        })(),
        "formatlist" => formatlist(args),
        _ => return None,
    })
}

/// Go's `strings.Title`: the first letter of every word in upper case.
fn title(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut prev = ' ';
    for c in s.chars() {
        let separator = if prev.is_ascii() {
            !(prev.is_ascii_alphanumeric() || prev == '_')
        } else {
            prev.is_whitespace()
        };
        if separator {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
        prev = c;
    }
    out
}

/// cty's `substr`: an offset from the start, or from the end when negative, and a length
/// (`-1`: to the end), counted in characters.
fn substr(s: &str, offset: i64, length: i64) -> String {
    let chars: Vec<char> = s.chars().collect();
    let total = chars.len() as i64;
    let offset = if offset < 0 { offset + total } else { offset };
    if length == 0 || offset >= total {
        return String::new();
    }
    let start = offset.max(0) as usize;
    let end = if length < 0 {
        chars.len()
    } else {
        start.saturating_add(length as usize).min(chars.len())
    };
    chars[start..end].iter().collect()
}

/// One `%` verb of a format string.
struct Verb {
    minus: bool,
    plus: bool,
    zero: bool,
    space: bool,
    sharp: bool,
    width: Option<usize>,
    precision: Option<usize>,
    verb: char,
}

/// cty's `format`: Go's verbs (`%s %d %f %v %q %t %x %X %o %b %e %g %#v`), flags, width,
/// precision and `%[n]` argument indexes.
pub(super) fn format(fmt: &str, args: &[Value]) -> Result<String, FuncError> {
    let mut out = String::new();
    let mut chars = fmt.chars().peekable();
    let mut next_arg = 0usize;
    let mut used = 0usize;
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            out.push('%');
            continue;
        }
        let mut v = Verb {
            minus: false,
            plus: false,
            zero: false,
            space: false,
            sharp: false,
            width: None,
            precision: None,
            verb: ' ',
        };
        while let Some(&f) = chars.peek() {
            match f {
                '-' => v.minus = true,
                '+' => v.plus = true,
                '0' => v.zero = true,
                ' ' => v.space = true,
                '#' => v.sharp = true,
                _ => break,
            }
            chars.next();
        }
        if chars.peek() == Some(&'[') {
            chars.next();
            let digits: String =
                std::iter::from_fn(|| chars.next_if(|c| c.is_ascii_digit())).collect();
            if chars.next() != Some(']') {
                return Err(FuncError::Failed("unterminated argument index".into()));
            }
            let n: usize = digits
                .parse()
                .map_err(|_| FuncError::Failed("invalid argument index".into()))?;
            next_arg = n.saturating_sub(1);
        }
        let width: String = std::iter::from_fn(|| chars.next_if(|c| c.is_ascii_digit())).collect();
        v.width = width.parse().ok();
        if v.width.is_some_and(|w| w > 10_000) {
            return Err(FuncError::Failed("width too large: at most 10000".into()));
        }
        if chars.peek() == Some(&'.') {
            chars.next();
            let p: String = std::iter::from_fn(|| chars.next_if(|c| c.is_ascii_digit())).collect();
            v.precision = Some(p.parse().unwrap_or(0));
            if v.precision.is_some_and(|p| p > 10_000) {
                return Err(FuncError::Failed(
                    "precision too large: at most 10000".into(),
                ));
            }
        }
        let Some(verb) = chars.next() else {
            return Err(FuncError::Failed(
                "invalid format string: unterminated verb".into(),
            ));
        };
        v.verb = verb;
        let Some(arg) = args.get(next_arg) else {
            return Err(FuncError::Failed(format!(
                "not enough arguments for \"%{verb}\": need index {} but have {} total",
                next_arg + 1,
                args.len()
            )));
        };
        out.push_str(&pad(&v, one_verb(&v, arg, next_arg)?));
        next_arg += 1;
        used = used.max(next_arg);
    }
    if used < args.len() {
        return Err(FuncError::Failed(format!(
            "too many arguments; only {used} used by format string"
        )));
    }
    Ok(out)
}

fn pad(v: &Verb, s: String) -> String {
    let Some(width) = v.width else {
        return s;
    };
    let len = s.chars().count();
    if len >= width {
        return s;
    }
    let fill = width - len;
    if v.minus {
        format!("{s}{}", " ".repeat(fill))
    } else if v.zero
        && matches!(
            v.verb,
            'd' | 'f' | 'F' | 'e' | 'E' | 'g' | 'G' | 'x' | 'X' | 'o' | 'b'
        )
    {
        let (sign, digits) = match s.strip_prefix('-') {
            Some(rest) => ("-", rest.to_string()),
            None => ("", s),
        };
        format!("{sign}{}{digits}", "0".repeat(fill))
    } else {
        format!("{}{s}", " ".repeat(fill))
    }
}

fn one_verb(v: &Verb, arg: &Value, index: usize) -> Result<String, FuncError> {
    let bad = |want: &str| {
        FuncError::Failed(format!(
            "unsupported value for \"%{}\" at {}: {want} required",
            v.verb,
            index + 1
        ))
    };
    let num = || arg.to_number().ok_or_else(|| bad("number"));
    let sign = |n: f64, s: String| {
        if n >= 0.0 && v.plus {
            format!("+{s}")
        } else if n >= 0.0 && v.space {
            format!(" {s}")
        } else {
            s
        }
    };
    Ok(match v.verb {
        'v' if v.sharp => serde_json::to_string(&arg.to_json()).unwrap_or_default(),
        'v' => match arg {
            Value::Null => "null".into(),
            Value::List(_) | Value::Object(_) => {
                serde_json::to_string(&arg.to_json()).unwrap_or_default()
            }
            other => other.to_str().unwrap_or_default(),
        },
        's' => {
            let s = match arg {
                Value::Null => return Err(bad("string")),
                other => other.to_str().ok_or_else(|| bad("string"))?,
            };
            match v.precision {
                Some(p) => s.chars().take(p).collect(),
                None => s,
            }
        }
        'q' => {
            let s = arg.to_str().ok_or_else(|| bad("string"))?;
            serde_json::to_string(&s).unwrap_or_default()
        }
        't' => match arg.to_bool() {
            Some(b) => b.to_string(),
            None => return Err(bad("bool")),
        },
        'd' => {
            let n = num()?;
            let i = n.as_i64().ok_or_else(|| bad("integer"))?;
            sign(i as f64, i.to_string())
        }
        'b' | 'o' | 'x' | 'X' => {
            if let (Value::String(s), 'x' | 'X') = (arg, v.verb) {
                let hex: String = s.bytes().map(|b| format!("{b:02x}")).collect();
                return Ok(if v.verb == 'X' {
                    hex.to_uppercase()
                } else {
                    hex
                });
            }
            let i = num()?.as_i64().ok_or_else(|| bad("integer"))?;
            let (neg, abs) = (i < 0, i.unsigned_abs());
            let body = match v.verb {
                'b' => format!("{abs:b}"),
                'o' => format!("{abs:o}"),
                'x' => format!("{abs:x}"),
                _ => format!("{abs:X}"),
            };
            let body = if v.sharp {
                match v.verb {
                    'o' => format!("0{body}"),
                    'x' => format!("0x{body}"),
                    'X' => format!("0X{body}"),
                    _ => body,
                }
            } else {
                body
            };
            if neg {
                format!("-{body}")
            } else {
                sign(1.0, body)
            }
        }
        'f' | 'F' => {
            let n = num()?.as_f64();
            sign(n, format!("{n:.*}", v.precision.unwrap_or(6)))
        }
        'e' | 'E' => {
            let n = num()?.as_f64();
            let s = go_exp(n, v.precision.unwrap_or(6));
            sign(n, if v.verb == 'E' { s.to_uppercase() } else { s })
        }
        'g' | 'G' => {
            let n = num()?;
            let s = match (v.precision, n) {
                (None, Number::Int(i)) => i.to_string(),
                (None, Number::Float(f)) => format!("{f}"),
                (Some(p), _) => {
                    let f = n.as_f64();
                    let digits = format!("{f:.*e}", p.saturating_sub(1));
                    let parsed: f64 = digits.parse().unwrap_or(f);
                    format!("{parsed}")
                }
            };
            sign(n.as_f64(), if v.verb == 'G' { s.to_uppercase() } else { s })
        }
        other => {
            return Err(FuncError::Failed(format!(
                "unrecognized format character {other:?} at offset {}",
                index + 1
            )));
        }
    })
}

/// Go's `%e`: `1.234560e+03`.
fn go_exp(n: f64, precision: usize) -> String {
    let s = format!("{n:.precision$e}");
    match s.split_once('e') {
        Some((mantissa, exp)) => {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

/// cty's `formatlist`: `format` once per element of the list arguments, which must all
/// have the same length; other arguments repeat.
fn formatlist(args: &[Value]) -> FResult {
    at_least(args, 1)?;
    let fmt = string(args, 0)?;
    let mut len: Option<usize> = None;
    for (i, a) in args.iter().enumerate().skip(1) {
        if let Value::List(items) = a {
            match len {
                Some(l) if l != items.len() => {
                    return Err(FuncError::Arg(
                        i,
                        format!(
                            "argument {} has length {}, which is inconsistent with argument {} of length {l}",
                            i + 1,
                            items.len(),
                            i
                        ),
                    ));
                }
                _ => len = Some(items.len()),
            }
        }
    }
    let n = len.unwrap_or(1);
    let mut out = Vec::with_capacity(n);
    for k in 0..n {
        let row: Vec<Value> = args[1..]
            .iter()
            .map(|a| match a {
                Value::List(items) => items[k].clone(),
                other => other.clone(),
            })
            .collect();
        out.push(Value::String(format(&fmt, &row).map_err(|e| match e {
            FuncError::Failed(m) => {
                FuncError::Failed(format!("error on format iteration {k}: {m}"))
            }
            other => other,
        })?));
    }
    Ok(Value::List(out))
}
