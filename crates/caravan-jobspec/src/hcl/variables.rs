//! Input variables and locals: `variable` and `variables` blocks, the values given for them
//! (`NOMAD_VAR_` environment, `-var-file` files, the API's variable text, `-var` flags, in
//! that order of precedence, as Nomad applies them), their type conversion and validation
//! rules, and the `locals` evaluated from them.

use std::collections::BTreeMap;
use std::ops::Range;

use hcl_edit::Span;
use hcl_edit::expr::Expression;
use hcl_edit::structure::{Block, Body as HclBody, Structure};

use super::body::{Diag, Source};
use super::eval::types::{Type, convert, parse_type};
use super::eval::{self, Env, EvalError, FileAccess, Value};
use crate::error::FieldError;
use crate::{VarFile, VariableInputs};

/// The prefix of environment variables that set job variables.
pub const VAR_ENV_PREFIX: &str = "NOMAD_VAR_";

/// Where a variable's value came from, named as Nomad names it in messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum From {
    Default,
    Env,
    VarFile,
    Cmd,
}

impl From {
    fn as_str(self) -> &'static str {
        match self {
            From::Default => "default",
            From::Env => "env",
            From::VarFile => "varfile",
            From::Cmd => "cmd",
        }
    }
}

struct Validation<'a> {
    condition: &'a Expression,
    message: String,
    line: usize,
}

/// A declared variable.
pub(crate) struct Declared<'a> {
    /// The declared type, or the default's; `None` takes any value as text.
    pub ty: Option<Type>,
    sensitive: bool,
    validations: Vec<Validation<'a>>,
    line: usize,
    value: Option<(Value, From)>,
}

/// Declared variables by name.
pub(crate) type Declarations<'a> = BTreeMap<String, Declared<'a>>;

fn err(diag: &mut Diag, path: impl Into<String>, message: impl Into<String>) {
    diag.errors.push(FieldError::new(path, message));
}

fn at(src: &Source<'_>, span: Option<Range<usize>>) -> String {
    span.map(|r| format!(" (line {})", src.line(r.start)))
        .unwrap_or_default()
}

fn var_path(name: &str) -> String {
    format!("variable {name:?}")
}

/// Reads every `variable` and `variables` block of the file.
pub(crate) fn declare<'a>(
    blocks: &[&'a Block],
    src: &Source<'a>,
    diag: &mut Diag,
) -> Declarations<'a> {
    let mut out = Declarations::new();
    for block in blocks {
        match block.ident.as_str() {
            "variable" => declare_block(block, src, &mut out, diag),
            "variables" => {
                for structure in block.body.iter() {
                    match structure {
                        Structure::Attribute(a) => {
                            let name = a.key.as_str().to_string();
                            if out.contains_key(&name) {
                                err(
                                    diag,
                                    var_path(&name),
                                    format!(
                                        "Duplicate variable: Duplicate {name} variable definition found.{}",
                                        at(src, a.key.span())
                                    ),
                                );
                                continue;
                            }
                            match eval::constant(&a.value) {
                                Ok(v) => {
                                    out.insert(
                                        name,
                                        Declared {
                                            ty: Some(Type::of(&v)),
                                            sensitive: false,
                                            validations: Vec::new(),
                                            line: src.line(a.span().map_or(0, |s| s.start)),
                                            value: Some((v, From::Default)),
                                        },
                                    );
                                }
                                Err(e) => err(diag, var_path(&name), with_line(src, e)),
                            }
                        }
                        Structure::Block(b) => err(
                            diag,
                            "variables",
                            format!(
                                "Unexpected {:?} block: Blocks are not allowed here.{}",
                                b.ident.as_str(),
                                at(src, b.span())
                            ),
                        ),
                    }
                }
            }
            _ => {}
        }
    }
    out
}

fn with_line(src: &Source<'_>, e: EvalError) -> String {
    format!("{}{}", e.message, at(src, e.span))
}

fn declare_block<'a>(
    block: &'a Block,
    src: &Source<'a>,
    out: &mut Declarations<'a>,
    diag: &mut Diag,
) {
    let [label] = block.labels.as_slice() else {
        err(
            diag,
            "variable",
            format!(
                "Missing name for variable: A variable block needs exactly one label, its name.{}",
                at(src, block.span())
            ),
        );
        return;
    };
    let name = label.as_str().to_string();
    let path = var_path(&name);
    if out.contains_key(&name) {
        err(
            diag,
            &path,
            format!(
                "Duplicate variable: Duplicate {name} variable definition found.{}",
                at(src, block.span())
            ),
        );
        return;
    }
    if !is_identifier(&name) {
        err(
            diag,
            &path,
            format!(
                "Invalid variable name: A name must start with a letter or underscore and may contain only letters, digits, underscores, and dashes.{}",
                at(src, block.span())
            ),
        );
    }
    let mut ty = None;
    let mut default = None;
    let mut sensitive = false;
    let mut validations = Vec::new();
    let mut default_expr = None;
    for structure in block.body.iter() {
        match structure {
            Structure::Attribute(a) => match a.key.as_str() {
                "description" => match eval::constant(&a.value) {
                    Ok(Value::String(_)) => {}
                    Ok(other) => err(
                        diag,
                        format!("{path}: description"),
                        format!(
                            "Unsuitable value: string required, not {}.{}",
                            other.type_name(),
                            at(src, a.value.span())
                        ),
                    ),
                    Err(e) => err(diag, format!("{path}: description"), with_line(src, e)),
                },
                "type" => match parse_type(&a.value) {
                    Ok(t) => ty = Some(t),
                    Err((m, span)) => err(
                        diag,
                        format!("{path}: type"),
                        format!("Invalid type specification: {m}{}", at(src, span)),
                    ),
                },
                "default" => default_expr = Some(&a.value),
                // Not in Nomad's schema; Caravan keeps the value out of its messages.
                "sensitive" => match eval::constant(&a.value).map(|v| v.to_bool()) {
                    Ok(Some(b)) => sensitive = b,
                    Ok(None) => err(
                        diag,
                        format!("{path}: sensitive"),
                        format!(
                            "Unsuitable value: a bool is required.{}",
                            at(src, a.value.span())
                        ),
                    ),
                    Err(e) => err(diag, format!("{path}: sensitive"), with_line(src, e)),
                },
                other => err(
                    diag,
                    format!("{path}: {other}"),
                    format!(
                        "Unsupported argument: An argument named {other:?} is not expected here.{}",
                        at(src, a.key.span())
                    ),
                ),
            },
            Structure::Block(b) if b.ident.as_str() == "validation" => {
                if let Some(v) = validation(b, &name, src, &path, diag) {
                    validations.push(v);
                }
            }
            Structure::Block(b) => err(
                diag,
                format!("{path}: {}", b.ident.as_str()),
                format!(
                    "Unsupported block type: Blocks of type {:?} are not expected here.{}",
                    b.ident.as_str(),
                    at(src, b.span())
                ),
            ),
        }
    }
    if let Some(expr) = default_expr {
        match eval::constant(expr) {
            Ok(v) => {
                let v = match &ty {
                    Some(t) => match convert(&v, t) {
                        Ok(c) => c,
                        Err(e) => {
                            err(
                                diag,
                                format!("{path}: default"),
                                format!(
                                    "Invalid default value for variable: This default value is not compatible with the variable's type constraint: {e}.{}",
                                    at(src, expr.span())
                                ),
                            );
                            Value::Null
                        }
                    },
                    None => v,
                };
                if ty.is_none() && !v.is_null() {
                    ty = Some(Type::of(&v));
                }
                default = Some(v);
            }
            Err(e) => err(diag, format!("{path}: default"), with_line(src, e)),
        }
    }
    out.insert(
        name,
        Declared {
            ty,
            sensitive,
            validations,
            line: src.line(block.span().map_or(0, |s| s.start)),
            value: default.map(|v| (v, From::Default)),
        },
    );
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '-')
}

fn validation<'a>(
    block: &'a Block,
    var: &str,
    src: &Source<'a>,
    path: &str,
    diag: &mut Diag,
) -> Option<Validation<'a>> {
    let path = format!("{path}: validation");
    let mut condition = None;
    let mut message = None;
    for structure in block.body.iter() {
        match structure {
            Structure::Attribute(a) if a.key.as_str() == "condition" => condition = Some(&a.value),
            Structure::Attribute(a) if a.key.as_str() == "error_message" => {
                match eval::constant(&a.value) {
                    Ok(Value::String(s)) if s.trim().is_empty() => err(
                        diag,
                        &path,
                        format!(
                            "Invalid validation error message: An empty or blank string is not a valid nor useful error message.{}",
                            at(src, a.value.span())
                        ),
                    ),
                    Ok(Value::String(s)) => message = Some(s),
                    Ok(other) => err(
                        diag,
                        &path,
                        format!(
                            "Unsuitable value: string required, not {}.{}",
                            other.type_name(),
                            at(src, a.value.span())
                        ),
                    ),
                    Err(e) => err(diag, &path, with_line(src, e)),
                }
            }
            Structure::Attribute(a) => err(
                diag,
                &path,
                format!(
                    "Unsupported argument: An argument named {:?} is not expected here.{}",
                    a.key.as_str(),
                    at(src, a.key.span())
                ),
            ),
            Structure::Block(b) => err(
                diag,
                &path,
                format!(
                    "Unsupported block type: Blocks of type {:?} are not expected here.{}",
                    b.ident.as_str(),
                    at(src, b.span())
                ),
            ),
        }
    }
    let line = src.line(block.span().map_or(0, |s| s.start));
    let Some(condition) = condition else {
        err(
            diag,
            &path,
            format!(
                "Missing required argument: The argument \"condition\" is required, but no definition was found.{}",
                at(src, block.span())
            ),
        );
        return None;
    };
    if message.is_none() {
        err(
            diag,
            &path,
            format!(
                "Missing required argument: The argument \"error_message\" is required, but no definition was found.{}",
                at(src, block.span())
            ),
        );
    }
    // The condition may test its own variable and nothing else.
    let mut good = 0;
    for (root, attr) in eval::referenced_roots(condition) {
        if root == "var" && attr.as_deref() == Some(var) {
            good += 1;
        } else {
            err(
                diag,
                &path,
                format!(
                    "Invalid reference in variable validation: The condition for variable {var:?} can only refer to the variable itself, using var.{var}.{}",
                    at(src, condition.span())
                ),
            );
        }
    }
    if good == 0 {
        err(
            diag,
            &path,
            format!(
                "Invalid variable validation condition: The condition for variable {var:?} must refer to var.{var} in order to test incoming values.{}",
                at(src, condition.span())
            ),
        );
    }
    Some(Validation {
        condition,
        message: message?,
        line,
    })
}

/// How a value given as text (`-var`, `NOMAD_VAR_`) is read: literally for strings and
/// numbers (and untyped variables), as an HCL expression otherwise.
fn from_text(text: &str, ty: Option<&Type>) -> Result<Value, String> {
    match ty {
        None | Some(Type::String) | Some(Type::Number) => Ok(Value::String(text.to_string())),
        Some(_) => {
            let expr: Expression = text
                .parse()
                .map_err(|e: hcl_edit::parser::Error| e.message().to_string())?;
            eval::constant(&expr).map_err(|e| e.message)
        }
    }
}

fn shown(d: &Declared<'_>, v: &Value) -> String {
    if d.sensitive {
        "(sensitive value)".into()
    } else {
        v.to_hcl()
    }
}

/// Records the values given for the variables, in Nomad's order: environment, files, the
/// API's variable text, then flags; the last one given wins.
pub(crate) fn assign(decls: &mut Declarations<'_>, inputs: &VariableInputs, diag: &mut Diag) {
    for (key, text) in &inputs.env {
        let Some(name) = key.strip_prefix(VAR_ENV_PREFIX).filter(|n| !n.is_empty()) else {
            continue;
        };
        // Variables the file does not declare are ignored, as Nomad ignores them.
        let Some(d) = decls.get_mut(name) else {
            continue;
        };
        let converted = from_text(text, d.ty.as_ref()).and_then(|v| typed(&v, d.ty.as_ref()));
        match converted {
            Ok(v) => d.value = Some((v, From::Env)),
            Err(e) => err(
                diag,
                var_path(name),
                format!(
                    "Invalid value for variable: The value for {name} is not compatible with the variable's type constraint: {e}. (from {VAR_ENV_PREFIX}{name})"
                ),
            ),
        }
    }
    for file in &inputs.files {
        assign_file(decls, file, inputs.strict, diag);
    }
    if let Some(content) = inputs.content.as_deref().filter(|c| !c.trim().is_empty()) {
        let file = VarFile {
            name: "input.hcl".into(),
            text: content.to_string(),
        };
        assign_file(decls, &file, inputs.strict, diag);
    }
    for arg in &inputs.args {
        let Some((name, text)) = arg.split_once('=') else {
            continue;
        };
        let Some(d) = decls.get_mut(name) else {
            undefined(
                diag,
                inputs.strict,
                name,
                format!(
                    "Undefined -var variable: A {name:?} variable was passed in the command line but was not found in known variables. To declare variable {name:?}, place this block in your job file"
                ),
            );
            continue;
        };
        match from_text(text, d.ty.as_ref()).and_then(|v| typed(&v, d.ty.as_ref())) {
            Ok(v) => d.value = Some((v, From::Cmd)),
            Err(e) => err(
                diag,
                var_path(name),
                format!(
                    "Invalid argument value for -var variable: The received arg value for {name} is not compatible with the variable's type constraint: {e}."
                ),
            ),
        }
    }
}

fn typed(v: &Value, ty: Option<&Type>) -> Result<Value, String> {
    match ty {
        Some(t) => convert(v, t),
        None => Ok(v.clone()),
    }
}

fn undefined(diag: &mut Diag, strict: bool, name: &str, message: String) {
    if strict {
        err(diag, var_path(name), message);
    } else {
        diag.warnings.push(format!("{}: {message}", var_path(name)));
    }
}

fn assign_file(decls: &mut Declarations<'_>, file: &VarFile, strict: bool, diag: &mut Diag) {
    let fname = &file.name;
    let pairs: Vec<(String, Result<Value, String>)> = if is_json(&file.text) {
        match serde_json::from_str::<serde_json::Value>(&file.text) {
            Ok(serde_json::Value::Object(map)) => map
                .iter()
                .map(|(k, v)| (k.clone(), Ok(Value::from_json(v))))
                .collect(),
            Ok(_) => {
                err(
                    diag,
                    fname.as_str(),
                    "unable to parse var file: the root of a JSON variables file must be an object",
                );
                return;
            }
            Err(e) => {
                err(
                    diag,
                    fname.as_str(),
                    format!("unable to parse var file: {e}"),
                );
                return;
            }
        }
    } else {
        let body: HclBody = match hcl_edit::parser::parse_body(&file.text) {
            Ok(b) => b,
            Err(e) => {
                err(
                    diag,
                    fname.as_str(),
                    format!(
                        "unable to parse var file: line {}, column {}: {}",
                        e.location().line(),
                        e.location().column(),
                        e.message()
                    ),
                );
                return;
            }
        };
        let src = Source::new(&file.text);
        let mut pairs = Vec::new();
        for structure in body.iter() {
            match structure {
                Structure::Block(b) if b.ident.as_str() == "variable" => {
                    let name = b
                        .labels
                        .first()
                        .map(|l| l.as_str().to_string())
                        .unwrap_or_default();
                    err(
                        diag,
                        fname.as_str(),
                        format!(
                            "Variable declaration in a .var file: A .var file is used to assign values to variables that have already been declared in job files, not to declare new variables. To declare variable {name:?}, place this block in one of your job files\n\nTo set a value for this variable in {fname}, use the definition syntax instead:\n    {name} = <value>{}",
                            at(&src, b.span())
                        ),
                    );
                    return;
                }
                Structure::Block(b) => {
                    err(
                        diag,
                        fname.as_str(),
                        format!(
                            "Unexpected {:?} block: Blocks are not allowed here.{}",
                            b.ident.as_str(),
                            at(&src, b.span())
                        ),
                    );
                }
                Structure::Attribute(a) => {
                    let value = eval::constant(&a.value).map_err(|e| with_line(&src, e));
                    pairs.push((a.key.as_str().to_string(), value));
                }
            }
        }
        pairs
    };
    for (name, value) in pairs {
        let Some(d) = decls.get_mut(&name) else {
            undefined(
                diag,
                strict,
                &name,
                format!(
                    "Undefined variable: A {name:?} variable was set but was not found in known variables. To declare variable {name:?}, place this block in your job files (set in {fname})"
                ),
            );
            continue;
        };
        match value.and_then(|v| typed(&v, d.ty.as_ref())) {
            Ok(v) => d.value = Some((v, From::VarFile)),
            Err(e) => err(
                diag,
                var_path(&name),
                format!(
                    "Invalid value for variable: The value for {name} is not compatible with the variable's type constraint: {e}. (set in {fname})"
                ),
            ),
        }
    }
}

/// Nomad's test for a JSON document: its first non-space byte is `{`.
fn is_json(text: &str) -> bool {
    text.trim_start_matches(' ').starts_with('{')
}

/// The final value of every variable, checked against its validation rules.
pub(crate) fn values(
    decls: &Declarations<'_>,
    src: &Source<'_>,
    diag: &mut Diag,
) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for (name, d) in decls {
        let Some((value, from)) = &d.value else {
            err(
                diag,
                var_path(name),
                format!(
                    "Unset variable {name:?}: A used variable must be set or have a default value; see https://developer.hashicorp.com/nomad/docs/reference/hcl2/variables for details. (declared at line {})",
                    d.line
                ),
            );
            continue;
        };
        for rule in &d.validations {
            let env = Env {
                vars: Some(BTreeMap::from([(name.clone(), value.clone())])),
                locals: None,
                files: Some(FileAccess::default()),
                passthrough: false,
            };
            let path = var_path(name);
            match eval::evaluate(rule.condition, src.text, &env, &None) {
                Err(e) => err(diag, &path, with_line(src, e)),
                Ok(Value::Null) => err(
                    diag,
                    &path,
                    format!(
                        "Invalid variable validation result: Validation condition expression must return either true or false, not null.{}",
                        at(src, rule.condition.span())
                    ),
                ),
                Ok(result) => match result.to_bool() {
                    None => err(
                        diag,
                        &path,
                        format!(
                            "Invalid variable validation result: Invalid validation condition result value: a bool is required.{}",
                            at(src, rule.condition.span())
                        ),
                    ),
                    Some(true) => {}
                    Some(false) => err(
                        diag,
                        &path,
                        format!(
                            "Invalid value for {} variable: {} (value {}; checked by the validation rule at line {})",
                            from.as_str(),
                            rule.message,
                            shown(d, value),
                            rule.line
                        ),
                    ),
                },
            }
        }
        out.insert(name.clone(), value.clone());
    }
    out
}

/// Evaluates the `locals` blocks, each local as soon as the locals it uses are known.
pub(crate) fn locals(blocks: &[&Block], env: &mut Env, src: &Source<'_>, diag: &mut Diag) {
    let mut pending: Vec<(String, &Expression)> = Vec::new();
    for block in blocks {
        for structure in block.body.iter() {
            match structure {
                Structure::Attribute(a) => {
                    let name = a.key.as_str().to_string();
                    if pending.iter().any(|(n, _)| *n == name) {
                        err(
                            diag,
                            format!("local.{name}"),
                            format!(
                                "Duplicate value in locals: Duplicate {name} definition found.{}",
                                at(src, a.key.span())
                            ),
                        );
                        return;
                    }
                    pending.push((name, &a.value));
                }
                Structure::Block(b) => err(
                    diag,
                    "locals",
                    format!(
                        "Unexpected {:?} block: Blocks are not allowed here.{}",
                        b.ident.as_str(),
                        at(src, b.span())
                    ),
                ),
            }
        }
    }
    env.locals = Some(BTreeMap::new());
    while !pending.is_empty() {
        let mut failed = Vec::new();
        let before = pending.len();
        for (name, expr) in pending {
            match eval::evaluate(expr, src.text, env, &None) {
                Ok(v) => {
                    if let Some(l) = env.locals.as_mut() {
                        l.insert(name, v);
                    }
                }
                Err(e) => failed.push((name, expr, e)),
            }
        }
        if failed.len() == before {
            // No local could be evaluated: a cycle or a real error.
            for (name, _, e) in failed {
                err(diag, format!("local.{name}"), with_line(src, e));
            }
            return;
        }
        pending = failed.into_iter().map(|(n, e, _)| (n, e)).collect();
    }
}
