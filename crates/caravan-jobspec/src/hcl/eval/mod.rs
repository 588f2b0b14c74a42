//! HCL2 expressions evaluated as Nomad's job parser evaluates them.
//!
//! An expression sees `var.<name>`, `local.<name>`, the iterators of the `for` expressions
//! and `dynamic` blocks around it, and Nomad's function set. A reference whose first name is
//! none of those (`${attr.kernel.name}`, `${NOMAD_PORT_http}`, `${node.class}`) is not an
//! error: as in Nomad, it evaluates to its own source text wrapped in `${...}`, so that the
//! client interpolates it at run time.
//!
//! Caravan evaluates over `hcl-edit`'s syntax tree rather than `hcl-rs`'s evaluator: that
//! tree keeps byte spans (so errors name a line and the pass-through copies the operator's
//! own text), and the functions here need what `hcl-rs`'s plain `fn` pointers with eagerly
//! evaluated arguments cannot give: `try`/`can` see their arguments' errors, `convert` reads
//! a type expression, and `file` knows the job file's directory.

mod expr;
pub(crate) mod funcs;
mod ops;
mod refs;
mod template;
pub(crate) mod types;
pub(crate) mod value;

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;
use std::rc::Rc;

use hcl_edit::expr::Expression;

pub(crate) use value::Value;

/// The most evaluation steps one expression may take: far above any job file, low enough
/// that a hostile body sent to the HTTP API cannot keep a server thread busy for minutes.
pub(crate) const MAX_STEPS: u64 = 5_000_000;

/// The longest string an expression may build (64 MiB): a template loop or `replace`
/// cannot turn a small body into gigabytes.
pub(crate) const MAX_STRING: usize = 64 << 20;

/// An evaluation error, with the span of the expression that caused it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EvalError {
    pub message: String,
    pub span: Option<Range<usize>>,
}

impl EvalError {
    pub fn new(message: impl Into<String>, span: Option<Range<usize>>) -> Self {
        EvalError {
            message: message.into(),
            span,
        }
    }
}

/// How the file functions (`file`, `fileexists`, ...) may touch the filesystem.
#[derive(Debug, Clone, Default)]
pub(crate) struct FileAccess {
    /// False where the job comes over the network (the HTTP API): the functions fail with
    /// Nomad's "filesystem function disabled".
    pub allowed: bool,
    /// Relative paths are read from here: the job file's directory.
    pub base_dir: PathBuf,
}

/// What the expressions of one job file may refer to.
#[derive(Debug, Default)]
pub(crate) struct Env {
    /// `var.*`; `None` where variables may not be used.
    pub vars: Option<BTreeMap<String, Value>>,
    /// `local.*`, as far as evaluated.
    pub locals: Option<BTreeMap<String, Value>>,
    /// `None` where functions may not be called.
    pub files: Option<FileAccess>,
    /// Whether unknown names pass through as `${...}` (job files) or are errors.
    pub passthrough: bool,
}

/// A name bound by an enclosing `dynamic` block (its iterator), shared by the blocks inside.
#[derive(Debug)]
pub(crate) struct Binding {
    pub name: String,
    pub value: Value,
    pub parent: Option<Rc<Binding>>,
}

/// The bindings in scope where a body is decoded.
pub(crate) type Bindings = Option<Rc<Binding>>;

/// Binds `name` to `value` on top of `parent`.
pub(crate) fn bind(parent: &Bindings, name: &str, value: Value) -> Bindings {
    Some(Rc::new(Binding {
        name: name.to_string(),
        value,
        parent: parent.clone(),
    }))
}

/// Evaluates one expression of `src` in `env`, with the `dynamic` iterators `bindings`.
pub(crate) fn evaluate(
    expr: &Expression,
    src: &str,
    env: &Env,
    bindings: &Bindings,
) -> Result<Value, EvalError> {
    expr::Evaluator::new(env, src, bindings).eval(expr)
}

/// Evaluates an expression that may use neither variables nor functions: a variable's
/// default, a value in a variables file, an `optional(...)` default.
pub(crate) fn constant(expr: &Expression) -> Result<Value, EvalError> {
    let env = Env::default();
    expr::Evaluator::new(&env, "", &None).eval(expr)
}

/// The names of the variables an expression refers to as `var.<name>`, for the check that a
/// validation condition tests its own variable and no other.
pub(crate) fn referenced_roots(expr: &Expression) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    refs::collect_references(expr, &mut Vec::new(), &mut out);
    out
}

#[cfg(test)]
mod tests;
