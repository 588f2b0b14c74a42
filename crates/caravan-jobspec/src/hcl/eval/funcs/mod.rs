//! Nomad's function set for job files: HCL's standard library (strings, collections,
//! numbers, encodings, dates), the crypto and CIDR helpers, and the filesystem functions,
//! which only a CLI parse may use.
//!
//! `try`, `can` and `convert` are special forms handled by the evaluator. A name outside
//! the set fails as Nomad's parser fails ("There is no function named ...");
//! [`REFUSED`] lists the ones Nomad has and Caravan does not, with the reason.

mod collections;
mod encoding;
mod fs;
mod hashing;
mod net;
mod numeric;
mod strings;
mod time;

use super::FileAccess;
use super::value::{Number, Value};

/// Functions Nomad's job parser offers that Caravan refuses, with the reason.
pub const REFUSED: &[(&str, &str)] = &[(
    "rsadecrypt",
    "RSA PKCS#1 v1.5 decryption is not offered: the only maintained Rust implementation is open to the Marvin timing attack (RUSTSEC-2023-0071)",
)];

/// Every function name Caravan evaluates (besides the special forms).
pub const SUPPORTED: &[&str] = &[
    "abs",
    "abspath",
    "base64decode",
    "base64encode",
    "basename",
    "bcrypt",
    "ceil",
    "chomp",
    "chunklist",
    "cidrhost",
    "cidrnetmask",
    "cidrsubnet",
    "cidrsubnets",
    "coalesce",
    "coalescelist",
    "compact",
    "concat",
    "contains",
    "csvdecode",
    "dirname",
    "distinct",
    "element",
    "file",
    "filebase64",
    "fileexists",
    "fileset",
    "flatten",
    "floor",
    "format",
    "formatdate",
    "formatlist",
    "indent",
    "index",
    "join",
    "jsondecode",
    "jsonencode",
    "keys",
    "length",
    "log",
    "lookup",
    "lower",
    "max",
    "md5",
    "merge",
    "min",
    "parseint",
    "pathexpand",
    "pow",
    "range",
    "regex_replace",
    "replace",
    "reverse",
    "setintersection",
    "setproduct",
    "setunion",
    "sha1",
    "sha256",
    "sha512",
    "signum",
    "slice",
    "sort",
    "split",
    "strlen",
    "strrev",
    "substr",
    "timeadd",
    "title",
    "trim",
    "trimprefix",
    "trimspace",
    "trimsuffix",
    "upper",
    "urlencode",
    "uuidv4",
    "uuidv5",
    "values",
    "yamldecode",
    "yamlencode",
    "zipmap",
];

/// Why a call failed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FuncError {
    /// No function of that name.
    Unknown,
    /// A function Nomad has and Caravan refuses.
    Refused(&'static str),
    /// Too many or too few arguments.
    Arity(String),
    /// Argument `index` (0-based) is unsuitable.
    Arg(usize, String),
    /// The function ran and failed.
    Failed(String),
}

impl FuncError {
    /// The message, phrased as HCL phrases function errors.
    pub fn render(&self, name: &str) -> String {
        match self {
            FuncError::Unknown => {
                format!("Call to unknown function: There is no function named {name:?}.")
            }
            FuncError::Refused(why) => {
                format!("Call to unsupported function: Caravan does not offer {name:?}: {why}.")
            }
            FuncError::Arity(m) => {
                format!("Invalid function argument count: function {name:?} {m}.")
            }
            FuncError::Arg(i, m) => format!(
                "Invalid function argument: Invalid value for argument {} of {name:?}: {m}.",
                i + 1
            ),
            FuncError::Failed(m) => {
                format!("Error in function call: Call to function {name:?} failed: {m}.")
            }
        }
    }
}

pub(crate) type FResult = Result<Value, FuncError>;

/// Calls a function by name with evaluated arguments.
pub(crate) fn call(name: &str, args: Vec<Value>, files: Option<&FileAccess>) -> FResult {
    if let Some((_, why)) = REFUSED.iter().find(|(n, _)| *n == name) {
        return Err(FuncError::Refused(why));
    }
    if let Some(result) = strings::call(name, &args) {
        return result;
    }
    if let Some(result) = collections::call(name, &args) {
        return result;
    }
    if let Some(result) = numeric::call(name, &args) {
        return result;
    }
    if let Some(result) = encoding::call(name, &args) {
        return result;
    }
    if let Some(result) = hashing::call(name, &args) {
        return result;
    }
    if let Some(result) = net::call(name, &args) {
        return result;
    }
    if let Some(result) = time::call(name, &args) {
        return result;
    }
    if let Some(result) = fs::call(name, &args, files) {
        return result;
    }
    Err(FuncError::Unknown)
}

/// Checks the number of arguments.
pub(super) fn arity(args: &[Value], n: usize) -> Result<(), FuncError> {
    match args.len().cmp(&n) {
        std::cmp::Ordering::Equal => Ok(()),
        std::cmp::Ordering::Greater => Err(FuncError::Arity(format!(
            "expects only {n} argument(s), got {}",
            args.len()
        ))),
        std::cmp::Ordering::Less => Err(FuncError::Arity(format!(
            "expects {n} argument(s), got {}",
            args.len()
        ))),
    }
}

/// Checks that there are at least `n` arguments.
pub(super) fn at_least(args: &[Value], n: usize) -> Result<(), FuncError> {
    if args.len() < n {
        return Err(FuncError::Arity(format!(
            "expects at least {n} argument(s), got {}",
            args.len()
        )));
    }
    Ok(())
}

fn not_null(args: &[Value], i: usize) -> Result<&Value, FuncError> {
    match args.get(i) {
        None => Err(FuncError::Arity(format!(
            "expects at least {} argument(s)",
            i + 1
        ))),
        Some(Value::Null) => Err(FuncError::Arg(i, "argument must not be null".into())),
        Some(v) => Ok(v),
    }
}

/// Argument `i` as a string (numbers and bools converted).
pub(super) fn string(args: &[Value], i: usize) -> Result<String, FuncError> {
    let v = not_null(args, i)?;
    v.to_str()
        .ok_or_else(|| FuncError::Arg(i, format!("string required, not {}", v.type_name())))
}

/// Argument `i` as a number (numeric strings converted).
pub(super) fn number(args: &[Value], i: usize) -> Result<Number, FuncError> {
    let v = not_null(args, i)?;
    v.to_number()
        .ok_or_else(|| FuncError::Arg(i, format!("a number is required, not {}", v.type_name())))
}

/// Argument `i` as a whole number.
pub(super) fn int(args: &[Value], i: usize) -> Result<i64, FuncError> {
    number(args, i)?
        .as_i64()
        .ok_or_else(|| FuncError::Arg(i, "a whole number is required".into()))
}

/// Argument `i` as a sequence.
pub(super) fn list(args: &[Value], i: usize) -> Result<&[Value], FuncError> {
    match not_null(args, i)? {
        Value::List(items) => Ok(items),
        other => Err(FuncError::Arg(
            i,
            format!("list of any type required, not {}", other.type_name()),
        )),
    }
}

/// Argument `i` as a map.
pub(super) fn map(
    args: &[Value],
    i: usize,
) -> Result<&std::collections::BTreeMap<String, Value>, FuncError> {
    match not_null(args, i)? {
        Value::Object(fields) => Ok(fields),
        other => Err(FuncError::Arg(
            i,
            format!("map of any type required, not {}", other.type_name()),
        )),
    }
}

/// Argument `i` as a list of strings.
pub(super) fn strings(args: &[Value], i: usize) -> Result<Vec<String>, FuncError> {
    list(args, i)?
        .iter()
        .enumerate()
        .map(|(n, v)| match v {
            Value::Null => Err(FuncError::Arg(i, format!("element {n}: must not be null"))),
            other => other.to_str().ok_or_else(|| {
                FuncError::Arg(
                    i,
                    format!("element {n}: string required, not {}", other.type_name()),
                )
            }),
        })
        .collect()
}

#[cfg(test)]
mod tests;
