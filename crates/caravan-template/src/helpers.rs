//! The pure helper functions of the language: strings, lists, numbers, encodings, JSON, time.

use std::sync::Arc;

use base64::Engine as _;
use gotmpl::{FuncMap, Value};

use crate::values::{self, FnResult, Num, arity, fn_err, int_arg, str_arg};

fn s1(f: &'static str, op: fn(&str) -> String) -> impl Fn(&[Value]) -> FnResult {
    move |args| {
        arity(f, args, 1, 1)?;
        Ok(values::string(op(str_arg(f, args, 0)?)))
    }
}

fn to_title(s: &str) -> String {
    // Upper-cases the first letter of every word, leaving the rest as it is.
    let mut out = String::with_capacity(s.len());
    let mut at_word_start = true;
    for c in s.chars() {
        if at_word_start && c.is_alphabetic() {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
        at_word_start = !(c.is_alphanumeric() || c == '\'' || c == '_');
    }
    out
}

fn indent(args: &[Value]) -> FnResult {
    const F: &str = "indent";
    arity(F, args, 2, 2)?;
    let n = int_arg(F, args, 0)?;
    let s = str_arg(F, args, 1)?;
    let n = usize::try_from(n).map_err(|_| fn_err(F, "indent value must be a positive integer"))?;
    let pad = " ".repeat(n);
    let mut out = String::with_capacity(s.len());
    let mut line_start = true;
    for c in s.chars() {
        if line_start && c != '\n' {
            out.push_str(&pad);
        }
        out.push(c);
        line_start = c == '\n';
    }
    Ok(values::string(out))
}

fn split(args: &[Value]) -> FnResult {
    arity("split", args, 2, 2)?;
    let sep = str_arg("split", args, 0)?;
    let s = str_arg("split", args, 1)?.trim();
    if s.is_empty() {
        return Ok(values::list([]));
    }
    if sep.is_empty() {
        // Go splits into single characters on an empty separator.
        return Ok(values::list(
            s.chars().map(|c| values::string(c.to_string())),
        ));
    }
    Ok(values::list(s.split(sep).map(values::string)))
}

fn join(args: &[Value]) -> FnResult {
    arity("join", args, 2, 2)?;
    let sep = str_arg("join", args, 0)?;
    let Value::List(items) = &args[1] else {
        return Err(fn_err(
            "join",
            format!("argument 2: expected list, got {}", args[1].type_name()),
        ));
    };
    let parts = items
        .iter()
        .map(|v| match v {
            Value::String(s) => Ok(s.to_string()),
            other => Err(fn_err(
                "join",
                format!("list element: expected string, got {}", other.type_name()),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(values::string(parts.join(sep)))
}

fn strings3(f: &'static str, op: fn(&str, &str, &str) -> String) -> impl Fn(&[Value]) -> FnResult {
    move |args| {
        arity(f, args, 3, 3)?;
        Ok(values::string(op(
            str_arg(f, args, 0)?,
            str_arg(f, args, 1)?,
            str_arg(f, args, 2)?,
        )))
    }
}

fn strings2(f: &'static str, op: fn(&str, &str) -> String) -> impl Fn(&[Value]) -> FnResult {
    move |args| {
        arity(f, args, 2, 2)?;
        Ok(values::string(op(
            str_arg(f, args, 0)?,
            str_arg(f, args, 1)?,
        )))
    }
}

/// Go's `in`: whether list `l` holds `v` (same kind and value), or string `l` contains string `v`.
fn is_in(l: &Value, v: &Value) -> bool {
    match l {
        Value::List(items) => items.iter().any(|e| match (e, v) {
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Float(a), Value::Float(b)) => a == b,
            (Value::String(a), Value::String(b)) => a == b,
            _ => false,
        }),
        Value::String(s) => matches!(v, Value::String(sub) if s.contains(sub.as_ref())),
        _ => false,
    }
}

fn contains_some(f: &'static str, ret_true: bool, invert: bool) -> impl Fn(&[Value]) -> FnResult {
    move |args| {
        arity(f, args, 2, 2)?;
        let Value::List(wanted) = &args[0] else {
            return Err(fn_err(
                f,
                format!("argument 1: expected list, got {}", args[0].type_name()),
            ));
        };
        for w in wanted.iter() {
            if is_in(&args[1], w) != invert {
                return Ok(Value::Bool(!ret_true));
            }
        }
        Ok(Value::Bool(ret_true))
    }
}

fn parse_num(
    f: &'static str,
    parse: fn(&str) -> Result<Value, String>,
) -> impl Fn(&[Value]) -> FnResult {
    move |args| {
        arity(f, args, 1, 1)?;
        let s = str_arg(f, args, 0)?;
        parse(s).map_err(|e| fn_err(f, format!("parsing {s:?}: {e}")))
    }
}

fn go_parse_bool(s: &str) -> Result<Value, String> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(Value::Bool(true)),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(Value::Bool(false)),
        _ => Err("invalid syntax".to_string()),
    }
}

/// Arithmetic with the reference's argument order (`a | add b` is `a + b`) and Go's kinds.
fn arith(
    f: &'static str,
    op: fn(Num, Num) -> Result<Num, String>,
) -> impl Fn(&[Value]) -> FnResult {
    move |args| {
        arity(f, args, 2, 2)?;
        let b = Num::of(f, &args[0])?;
        let a = Num::of(f, &args[1])?;
        op(a, b).map(Num::value).map_err(|e| fn_err(f, e))
    }
}

fn int_op(
    a: Num,
    b: Num,
    i: fn(i64, i64) -> Option<i64>,
    u: fn(u64, u64) -> Option<u64>,
    fl: fn(f64, f64) -> f64,
) -> Result<Num, String> {
    let overflow = || "integer overflow or division by zero".to_string();
    match (a, b) {
        (Num::Float(_), _) | (_, Num::Float(_)) => Ok(Num::Float(fl(a.as_f64(), b.as_f64()))),
        (Num::Uint(x), Num::Uint(y)) => u(x, y).map(Num::Uint).ok_or_else(overflow),
        (Num::Int(x), Num::Int(y)) => i(x, y).map(Num::Int).ok_or_else(overflow),
        (x, y) => {
            let conv = |n: Num| match n {
                Num::Int(v) => Some(v),
                Num::Uint(v) => i64::try_from(v).ok(),
                Num::Float(_) => None,
            };
            match (conv(x), conv(y)) {
                (Some(x), Some(y)) => i(x, y).map(Num::Int).ok_or_else(overflow),
                _ => Err(overflow()),
            }
        }
    }
}

fn add(a: Num, b: Num) -> Result<Num, String> {
    int_op(a, b, i64::checked_add, u64::checked_add, |x, y| x + y)
}
fn subtract(a: Num, b: Num) -> Result<Num, String> {
    int_op(a, b, i64::checked_sub, u64::checked_sub, |x, y| x - y)
}
fn multiply(a: Num, b: Num) -> Result<Num, String> {
    int_op(a, b, i64::checked_mul, u64::checked_mul, |x, y| x * y)
}
fn divide(a: Num, b: Num) -> Result<Num, String> {
    int_op(a, b, i64::checked_div, u64::checked_div, |x, y| x / y)
}
fn modulo(a: Num, b: Num) -> Result<Num, String> {
    if matches!(a, Num::Float(_)) || matches!(b, Num::Float(_)) {
        return Err("unknown type: modulo takes integers".to_string());
    }
    int_op(a, b, i64::checked_rem, u64::checked_rem, |x, y| x % y)
}
fn minimum(a: Num, b: Num) -> Result<Num, String> {
    Ok(if a.as_f64() < b.as_f64() { a } else { b })
}
fn maximum(a: Num, b: Num) -> Result<Num, String> {
    Ok(if a.as_f64() > b.as_f64() { a } else { b })
}

fn by_tag(args: &[Value]) -> FnResult {
    const F: &str = "byTag";
    arity(F, args, 1, 1)?;
    let items: &[Value] = match &args[0] {
        Value::Nil => &[],
        Value::List(items) => items,
        other => {
            return Err(fn_err(
                F,
                format!("wrong argument type {}", other.type_name()),
            ));
        }
    };
    let mut by: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
    for item in items {
        if let Some(Value::List(tags)) = item.field("Tags") {
            for t in tags.iter() {
                if let Value::String(t) = t {
                    by.entry(t.to_string()).or_default().push(item.clone());
                }
            }
        } else {
            return Err(fn_err(
                F,
                format!(
                    "wrong argument type: element {} has no Tags",
                    item.type_name()
                ),
            ));
        }
    }
    Ok(values::map(
        by.into_iter().map(|(k, v)| (k, values::list(v))),
    ))
}

/// Nests a map's "a/b/c" keys into maps of maps.
fn explode_map(args: &[Value]) -> FnResult {
    const F: &str = "explodeMap";
    arity(F, args, 1, 1)?;
    let Value::Map(m) = &args[0] else {
        return Err(fn_err(
            F,
            format!("expected map, got {}", args[0].type_name()),
        ));
    };
    #[derive(Default)]
    struct Tree(std::collections::BTreeMap<String, Node>);
    enum Node {
        Leaf(Value),
        Tree(Tree),
    }
    fn insert(t: &mut Tree, key: &str, v: Value, full: &str) -> Result<(), String> {
        match key.split_once('/') {
            Some((top, rest)) => {
                let node =
                    t.0.entry(top.to_string())
                        .or_insert_with(|| Node::Tree(Tree::default()));
                match node {
                    Node::Tree(sub) => insert(sub, rest, v, full),
                    Node::Leaf(old) => Err(format!(
                        "not a map: {full:?}: {top:?} already has value {old}"
                    )),
                }
            }
            None if key.is_empty() => Ok(()),
            None => {
                t.0.insert(key.to_string(), Node::Leaf(v));
                Ok(())
            }
        }
    }
    fn build(t: Tree) -> Value {
        values::map(t.0.into_iter().map(|(k, n)| {
            (
                k,
                match n {
                    Node::Leaf(v) => v,
                    Node::Tree(t) => build(t),
                },
            )
        }))
    }
    let mut t = Tree::default();
    for (k, v) in m.iter() {
        insert(&mut t, k, v.clone(), k).map_err(|e| fn_err(F, e))?;
    }
    Ok(build(t))
}

fn loop_fn(args: &[Value]) -> FnResult {
    const F: &str = "loop";
    let to_i = |v: &Value| -> Result<i64, gotmpl::TemplateError> {
        match v {
            Value::Int(n) => Ok(*n),
            Value::Uint(n) => i64::try_from(*n).map_err(|_| fn_err(F, "integer out of range")),
            Value::String(s) if s.is_empty() => Ok(0),
            Value::String(s) => s.parse().map_err(|e| fn_err(F, format!("parseInt: {e}"))),
            other => Err(fn_err(
                F,
                format!("bad argument type: {}", other.type_name()),
            )),
        }
    };
    let (start, stop) = match args {
        [stop] => (0, to_i(stop)?),
        [start, stop] => (to_i(start)?, to_i(stop)?),
        _ => {
            return Err(fn_err(
                F,
                format!(
                    "wrong number of arguments, expected 1 or 2, but got {}",
                    args.len()
                ),
            ));
        }
    };
    const MAX: i64 = 1_000_000;
    if stop.saturating_sub(start) > MAX {
        return Err(fn_err(
            F,
            format!("range of {start}..{stop} is over {MAX} values"),
        ));
    }
    Ok(values::list((start..stop).map(Value::Int)))
}

/// Converts a Go time layout ("2006-01-02T15:04:05Z07:00") to chrono's format.
fn go_layout(layout: &str) -> String {
    const TOKENS: &[(&str, &str)] = &[
        ("January", "%B"),
        ("Monday", "%A"),
        ("Jan", "%b"),
        ("Mon", "%a"),
        ("MST", "%Z"),
        ("2006", "%Y"),
        ("Z07:00", "%:z"),
        ("-07:00", "%:z"),
        ("-0700", "%z"),
        ("Z0700", "%z"),
        (".000000000", "%.9f"),
        (".000000", "%.6f"),
        (".000", "%.3f"),
        ("01", "%m"),
        ("02", "%d"),
        ("_2", "%e"),
        ("15", "%H"),
        ("03", "%I"),
        ("04", "%M"),
        ("05", "%S"),
        ("06", "%y"),
        ("PM", "%p"),
        ("pm", "%P"),
        ("1", "%-m"),
        ("2", "%-d"),
        ("3", "%-I"),
        ("4", "%-M"),
        ("5", "%-S"),
    ];
    let mut out = String::new();
    let mut rest = layout;
    'outer: while !rest.is_empty() {
        for (go, fmt) in TOKENS {
            if let Some(tail) = rest.strip_prefix(go) {
                out.push_str(fmt);
                rest = tail;
                continue 'outer;
            }
        }
        let mut chars = rest.chars();
        if let Some(c) = chars.next() {
            if c == '%' {
                out.push_str("%%");
            } else {
                out.push(c);
            }
        }
        rest = chars.as_str();
    }
    out
}

fn timestamp(args: &[Value]) -> FnResult {
    const F: &str = "timestamp";
    let now = chrono::Utc::now();
    match args.len() {
        0 => Ok(values::string(
            now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        )),
        1 => {
            let layout = str_arg(F, args, 0)?;
            if layout == "unix" {
                return Ok(values::string(now.timestamp().to_string()));
            }
            // UTC renders "Z" for a "Z07:00" zone, as Go does.
            let fmt = go_layout(layout);
            let mut out = String::new();
            use std::fmt::Write as _;
            write!(out, "{}", now.format(&fmt))
                .map_err(|_| fn_err(F, format!("bad layout {layout:?}")))?;
            if layout.contains("Z07:00") {
                out = out.replace("+00:00", "Z");
            }
            Ok(values::string(out))
        }
        n => Err(fn_err(
            F,
            format!("wrong number of arguments, expected 0 or 1, but got {n}"),
        )),
    }
}

fn decode(
    f: &'static str,
    engine: base64::engine::GeneralPurpose,
) -> impl Fn(&[Value]) -> FnResult {
    move |args| {
        arity(f, args, 1, 1)?;
        let bytes = engine
            .decode(str_arg(f, args, 0)?)
            .map_err(|e| fn_err(f, e))?;
        Ok(values::string(String::from_utf8_lossy(&bytes).into_owned()))
    }
}

fn encode(
    f: &'static str,
    engine: base64::engine::GeneralPurpose,
) -> impl Fn(&[Value]) -> FnResult {
    move |args| {
        arity(f, args, 1, 1)?;
        Ok(values::string(engine.encode(str_arg(f, args, 0)?)))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn regex_arg(f: &str, args: &[Value]) -> Result<regex::Regex, gotmpl::TemplateError> {
    regex::Regex::new(str_arg(f, args, 0)?).map_err(|e| fn_err(f, e))
}

/// Go's `$1`/`${name}` expansion differs from the regex crate's only in that `$1x` names group
/// "1x" in both; the syntaxes agree, so the replacement is passed through.
fn regex_replace_all(args: &[Value]) -> FnResult {
    const F: &str = "regexReplaceAll";
    arity(F, args, 3, 3)?;
    let re = regex_arg(F, args)?;
    let with = str_arg(F, args, 1)?;
    Ok(values::string(
        re.replace_all(str_arg(F, args, 2)?, with).into_owned(),
    ))
}

fn regex_match(args: &[Value]) -> FnResult {
    const F: &str = "regexMatch";
    arity(F, args, 2, 2)?;
    let re = regex_arg(F, args)?;
    Ok(Value::Bool(re.is_match(str_arg(F, args, 1)?)))
}

fn json_out(
    f: &'static str,
    indent: Option<&'static str>,
    escape_html: bool,
) -> impl Fn(&[Value]) -> FnResult {
    move |args| {
        arity(f, args, 1, 1)?;
        values::to_json(&args[0], indent, escape_html)
            .map(values::string)
            .map_err(|e| fn_err(f, e))
    }
}

fn split_to_map(args: &[Value]) -> FnResult {
    const F: &str = "splitToMap";
    arity(F, args, 3, 3)?;
    let (pairs_sep, kv_sep) = (str_arg(F, args, 0)?, str_arg(F, args, 1)?);
    let s = str_arg(F, args, 2)?.trim();
    if s.is_empty() {
        return Ok(values::map([]));
    }
    let pairs: Vec<&str> = if pairs_sep.is_empty() {
        vec![s]
    } else {
        s.split(pairs_sep).collect()
    };
    Ok(values::map(pairs.into_iter().filter_map(|p| {
        p.split_once(kv_sep)
            .map(|(k, v)| (k.to_string(), values::string(v)))
    })))
}

fn parse_json(args: &[Value]) -> FnResult {
    const F: &str = "parseJSON";
    arity(F, args, 1, 1)?;
    let s = str_arg(F, args, 0)?;
    if s.is_empty() {
        return Ok(values::map([]));
    }
    let j: serde_json::Value = serde_json::from_str(s).map_err(|e| fn_err(F, e))?;
    Ok(values::from_json(j))
}

/// The helper functions, by name.
pub(crate) fn funcs() -> FuncMap {
    let mut m = FuncMap::new();
    let mut add_fn = |name: &str, f: gotmpl::ValueFunc| {
        m.insert(name.to_string(), f);
    };
    add_fn("toLower", Arc::new(s1("toLower", str::to_lowercase)));
    add_fn("toUpper", Arc::new(s1("toUpper", str::to_uppercase)));
    add_fn("toTitle", Arc::new(s1("toTitle", to_title)));
    add_fn(
        "trimSpace",
        Arc::new(s1("trimSpace", |s| s.trim().to_string())),
    );
    add_fn(
        "trim",
        Arc::new(strings2("trim", |cut, s| {
            s.trim_matches(|c| cut.contains(c)).to_string()
        })),
    );
    add_fn(
        "trimPrefix",
        Arc::new(strings2("trimPrefix", |p, s| {
            s.strip_prefix(p).unwrap_or(s).to_string()
        })),
    );
    add_fn(
        "trimSuffix",
        Arc::new(strings2("trimSuffix", |p, s| {
            s.strip_suffix(p).unwrap_or(s).to_string()
        })),
    );
    add_fn(
        "replaceAll",
        Arc::new(strings3("replaceAll", |from, to, s| {
            if from.is_empty() {
                // Go inserts `to` around every character on an empty pattern.
                let mut out = String::from(to);
                for c in s.chars() {
                    out.push(c);
                    out.push_str(to);
                }
                out
            } else {
                s.replace(from, to)
            }
        })),
    );
    add_fn("split", Arc::new(split));
    add_fn("join", Arc::new(join));
    add_fn("indent", Arc::new(indent));
    add_fn(
        "in",
        Arc::new(|args: &[Value]| {
            arity("in", args, 2, 2)?;
            Ok(Value::Bool(is_in(&args[0], &args[1])))
        }),
    );
    add_fn(
        "contains",
        Arc::new(|args: &[Value]| {
            arity("contains", args, 2, 2)?;
            Ok(Value::Bool(is_in(&args[1], &args[0])))
        }),
    );
    add_fn(
        "containsAll",
        Arc::new(contains_some("containsAll", true, true)),
    );
    add_fn(
        "containsAny",
        Arc::new(contains_some("containsAny", false, false)),
    );
    add_fn(
        "containsNone",
        Arc::new(contains_some("containsNone", true, false)),
    );
    add_fn(
        "containsNotAll",
        Arc::new(contains_some("containsNotAll", false, true)),
    );
    add_fn(
        "parseBool",
        Arc::new(parse_num("parseBool", |s| {
            if s.is_empty() {
                Ok(Value::Bool(false))
            } else {
                go_parse_bool(s)
            }
        })),
    );
    add_fn(
        "parseInt",
        Arc::new(parse_num("parseInt", |s| {
            if s.is_empty() {
                Ok(Value::Int(0))
            } else {
                s.parse().map(Value::Int).map_err(|e| e.to_string())
            }
        })),
    );
    add_fn(
        "parseUint",
        Arc::new(parse_num("parseUint", |s| {
            if s.is_empty() {
                Ok(Value::Uint(0))
            } else {
                s.parse().map(Value::Uint).map_err(|e| e.to_string())
            }
        })),
    );
    add_fn(
        "parseFloat",
        Arc::new(parse_num("parseFloat", |s| {
            if s.is_empty() {
                Ok(Value::Float(0.0))
            } else {
                s.parse()
                    .map(Value::Float)
                    .map_err(|e: std::num::ParseFloatError| e.to_string())
            }
        })),
    );
    add_fn("add", Arc::new(arith("add", add)));
    add_fn("subtract", Arc::new(arith("subtract", subtract)));
    add_fn("multiply", Arc::new(arith("multiply", multiply)));
    add_fn("divide", Arc::new(arith("divide", divide)));
    add_fn("modulo", Arc::new(arith("modulo", modulo)));
    add_fn("minimum", Arc::new(arith("minimum", minimum)));
    add_fn("maximum", Arc::new(arith("maximum", maximum)));
    add_fn(
        "base64Decode",
        Arc::new(decode(
            "base64Decode",
            base64::engine::general_purpose::STANDARD,
        )),
    );
    add_fn(
        "base64Encode",
        Arc::new(encode(
            "base64Encode",
            base64::engine::general_purpose::STANDARD,
        )),
    );
    add_fn(
        "base64URLDecode",
        Arc::new(decode(
            "base64URLDecode",
            base64::engine::general_purpose::URL_SAFE,
        )),
    );
    add_fn(
        "base64URLEncode",
        Arc::new(encode(
            "base64URLEncode",
            base64::engine::general_purpose::URL_SAFE,
        )),
    );
    add_fn(
        "sha256Hex",
        Arc::new(|args: &[Value]| {
            use sha2::Digest;
            arity("sha256Hex", args, 1, 1)?;
            Ok(values::string(hex(&sha2::Sha256::digest(
                str_arg("sha256Hex", args, 0)?.as_bytes(),
            ))))
        }),
    );
    add_fn(
        "md5sum",
        Arc::new(|args: &[Value]| {
            use md5::Digest;
            arity("md5sum", args, 1, 1)?;
            Ok(values::string(hex(&md5::Md5::digest(
                str_arg("md5sum", args, 0)?.as_bytes(),
            ))))
        }),
    );
    add_fn("regexMatch", Arc::new(regex_match));
    add_fn("regexReplaceAll", Arc::new(regex_replace_all));
    add_fn("toJSON", Arc::new(json_out("toJSON", None, true)));
    add_fn(
        "toJSONPretty",
        Arc::new(json_out("toJSONPretty", Some("  "), true)),
    );
    add_fn(
        "toUnescapedJSON",
        Arc::new(json_out("toUnescapedJSON", None, false)),
    );
    add_fn(
        "toUnescapedJSONPretty",
        Arc::new(json_out("toUnescapedJSONPretty", Some("  "), false)),
    );
    add_fn("splitToMap", Arc::new(split_to_map));
    add_fn("parseJSON", Arc::new(parse_json));
    add_fn("byTag", Arc::new(by_tag));
    add_fn("explodeMap", Arc::new(explode_map));
    add_fn("loop", Arc::new(loop_fn));
    add_fn("timestamp", Arc::new(timestamp));
    m
}
