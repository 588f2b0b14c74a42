//! The expression evaluator: literals, collections, references, operators, conditionals,
//! `for` expressions, splats and function calls.

use std::collections::BTreeMap;
use std::ops::Range;

use hcl_edit::Span;
use hcl_edit::expr::{Expression, ForExpr, FuncCall, ObjectKey, TraversalOperator, UnaryOperator};

use super::ops::{binary, get_attr, index, passthrough};
use super::value::{Number, Value};
use super::{Bindings, Env, EvalError, funcs, template, types};

type Result<T> = std::result::Result<T, EvalError>;

/// Evaluates expressions of one source text in one environment.
pub(crate) struct Evaluator<'a> {
    pub(super) env: &'a Env,
    pub(super) src: &'a str,
    inherited: &'a Bindings,
    /// Names bound by the `for` expressions being evaluated, innermost last.
    local: Vec<(String, Value)>,
    /// Expressions evaluated so far, against [`super::MAX_STEPS`].
    steps: u64,
}

impl<'a> Evaluator<'a> {
    pub fn new(env: &'a Env, src: &'a str, inherited: &'a Bindings) -> Self {
        Evaluator {
            env,
            src,
            inherited,
            local: Vec::new(),
            steps: 0,
        }
    }

    pub fn eval(&mut self, expr: &Expression) -> Result<Value> {
        self.steps += 1;
        if self.steps > super::MAX_STEPS {
            return Err(EvalError::new(
                format!(
                    "Expression too complex: evaluating it took more than {} steps",
                    super::MAX_STEPS
                ),
                expr.span(),
            ));
        }
        match expr {
            Expression::Null(_) => Ok(Value::Null),
            Expression::Bool(b) => Ok(Value::Bool(*b.value())),
            Expression::Number(n) => number(n.value(), expr.span()),
            Expression::String(s) => Ok(Value::String(s.value().clone())),
            Expression::Array(items) => items
                .iter()
                .map(|e| self.eval(e))
                .collect::<Result<_>>()
                .map(Value::List),
            Expression::Object(obj) => {
                let mut out = BTreeMap::new();
                for (key, value) in obj.iter() {
                    let (name, span) = match key {
                        ObjectKey::Ident(ident) => (ident.as_str().to_string(), ident.span()),
                        ObjectKey::Expression(e) => (self.key(e)?, e.span()),
                    };
                    let v = self.eval(value.expr())?;
                    if out.insert(name.clone(), v).is_some() {
                        return Err(EvalError::new(
                            format!("duplicate object key {name:?}"),
                            span,
                        ));
                    }
                }
                Ok(Value::Object(out))
            }
            Expression::StringTemplate(t) => template::render_string(self, t),
            Expression::HeredocTemplate(h) => {
                template::render(self, &h.template, false, false).map(Value::String)
            }
            Expression::Parenthesis(p) => self.eval(p.inner()),
            Expression::Variable(v) => match self.lookup(v.as_str()) {
                Some(found) => Ok(found),
                None => self.undefined(v.as_str(), v.span(), v.span()),
            },
            Expression::Traversal(t) => self.traversal(&t.expr, &t.operators),
            Expression::FuncCall(call) => self.call(call),
            Expression::Conditional(c) => {
                let cond = self.eval(&c.cond_expr)?;
                let cond = match cond {
                    Value::Null => {
                        return Err(EvalError::new(
                            "Null condition: The condition value is null. Conditions must either be true or false.",
                            c.cond_expr.span(),
                        ));
                    }
                    other => other.to_bool().ok_or_else(|| {
                        EvalError::new(
                            format!(
                                "Incorrect condition type: The condition expression must be of type bool, not {}.",
                                other.type_name()
                            ),
                            c.cond_expr.span(),
                        )
                    })?,
                };
                let (chosen, other) = if cond {
                    (&c.true_expr, &c.false_expr)
                } else {
                    (&c.false_expr, &c.true_expr)
                };
                let value = self.eval(chosen)?;
                // As HCL, the two results are unified to one type: a number or bool meeting a
                // string becomes a string. Errors in the branch not taken are not reported.
                match (self.eval(other), &value) {
                    (Ok(o), v) if is_primitive(&o) && is_primitive(v) => {
                        if o.type_name() == v.type_name() {
                            Ok(value)
                        } else if matches!(o, Value::String(_)) || matches!(v, Value::String(_)) {
                            Ok(Value::String(v.to_str().unwrap_or_default()))
                        } else {
                            Err(EvalError::new(
                                format!(
                                    "Inconsistent conditional result types: The true and false result expressions must have consistent types. The '{}' value is {}, but the '{}' value is {}.",
                                    cond,
                                    v.type_name(),
                                    !cond,
                                    o.type_name()
                                ),
                                expr.span(),
                            ))
                        }
                    }
                    _ => Ok(value),
                }
            }
            Expression::UnaryOp(op) => {
                let v = self.eval(&op.expr)?;
                match op.operator.value() {
                    UnaryOperator::Neg => v.to_number().map(|n| Value::Number(n.neg())).ok_or_else(|| {
                        EvalError::new(
                            format!("Invalid operand: Unsuitable value for unary operand: a number is required, not {}.", v.type_name()),
                            op.expr.span(),
                        )
                    }),
                    UnaryOperator::Not => v.to_bool().map(|b| Value::Bool(!b)).ok_or_else(|| {
                        EvalError::new(
                            format!("Invalid operand: Unsuitable value for unary operand: a bool is required, not {}.", v.type_name()),
                            op.expr.span(),
                        )
                    }),
                }
            }
            Expression::BinaryOp(op) => {
                let lhs = self.eval(&op.lhs_expr)?;
                let rhs = self.eval(&op.rhs_expr)?;
                binary(
                    *op.operator.value(),
                    lhs,
                    rhs,
                    op.lhs_expr.span(),
                    op.rhs_expr.span(),
                )
            }
            Expression::ForExpr(f) => self.for_expr(f),
        }
    }

    /// Runs `f` with a `for` iteration's key and value names bound.
    pub(super) fn with_bindings<T>(
        &mut self,
        key_var: Option<&str>,
        key: Value,
        value_var: &str,
        value: Value,
        f: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        let depth = self.local.len();
        if let Some(k) = key_var {
            self.local.push((k.to_string(), key));
        }
        self.local.push((value_var.to_string(), value));
        let result = f(self);
        self.local.truncate(depth);
        result
    }

    /// An object key written as an expression: `"a.b" = 1`, `(var.name) = 1`.
    fn key(&mut self, e: &Expression) -> Result<String> {
        // A bare name is the key itself, not a reference.
        if let Expression::Variable(v) = e {
            return Ok(v.as_str().to_string());
        }
        match self.eval(e)? {
            Value::Null => Err(EvalError::new(
                "Invalid object key: A null value cannot be used as an object key.",
                e.span(),
            )),
            v => v.to_str().ok_or_else(|| {
                EvalError::new(
                    format!(
                        "Incorrect key type: Can't use this value as a key: string required, not {}.",
                        v.type_name()
                    ),
                    e.span(),
                )
            }),
        }
    }

    pub(super) fn lookup(&self, name: &str) -> Option<Value> {
        if let Some((_, v)) = self.local.iter().rev().find(|(n, _)| n == name) {
            return Some(v.clone());
        }
        let mut b = self.inherited.as_deref();
        while let Some(binding) = b {
            if binding.name == name {
                return Some(binding.value.clone());
            }
            b = binding.parent.as_deref();
        }
        match name {
            "var" => self.env.vars.as_ref().map(|v| Value::Object(v.clone())),
            "local" => self.env.locals.as_ref().map(|v| Value::Object(v.clone())),
            _ => None,
        }
    }

    /// A reference to a name nothing defines: Nomad's pass-through, or an error where
    /// variables may not be used.
    fn undefined(
        &self,
        name: &str,
        root: Option<Range<usize>>,
        whole: Option<Range<usize>>,
    ) -> Result<Value> {
        if !self.env.passthrough {
            let message = if self.env.vars.is_none() {
                "Variables not allowed: Variables may not be used here.".to_string()
            } else {
                format!("Unknown variable: There is no variable named {name:?}.")
            };
            return Err(EvalError::new(message, root));
        }
        match whole {
            Some(span) => Ok(Value::String(passthrough(self.src, span))),
            None => Ok(Value::String(format!("${{{name}}}"))),
        }
    }

    fn traversal(
        &mut self,
        root: &Expression,
        ops: &[hcl_edit::Decorated<TraversalOperator>],
    ) -> Result<Value> {
        // A traversal from an unknown name passes through with its static steps (`.a`, `[0]`,
        // `["k"]`), as one reference; what follows applies to the resulting string.
        let (mut value, rest) = match root {
            Expression::Variable(v) if self.lookup(v.as_str()).is_none() => {
                let static_len = ops.iter().take_while(|op| is_static(op.value())).count();
                let end = ops[..static_len]
                    .last()
                    .and_then(|op| op.span())
                    .map(|s| s.end)
                    .or_else(|| v.span().map(|s| s.end));
                let whole = v.span().zip(end).map(|(s, e)| s.start..e);
                let value = self.undefined(v.as_str(), v.span(), whole)?;
                (value, &ops[static_len..])
            }
            other => (self.eval(other)?, ops),
        };
        let mut i = 0;
        while i < rest.len() {
            let op = &rest[i];
            match op.value() {
                TraversalOperator::AttrSplat(_) | TraversalOperator::FullSplat(_) => {
                    let full = matches!(op.value(), TraversalOperator::FullSplat(_));
                    let chain_len = rest[i + 1..]
                        .iter()
                        .take_while(|o| match o.value() {
                            TraversalOperator::GetAttr(_) => true,
                            TraversalOperator::Index(_) | TraversalOperator::LegacyIndex(_) => full,
                            _ => false,
                        })
                        .count();
                    let chain = &rest[i + 1..i + 1 + chain_len];
                    let items = match value {
                        Value::Null => Vec::new(),
                        Value::List(items) => items,
                        other => vec![other],
                    };
                    let mut out = Vec::with_capacity(items.len());
                    for item in items {
                        let mut v = item;
                        for step in chain {
                            v = self.step(v, step)?;
                        }
                        out.push(v);
                    }
                    value = Value::List(out);
                    i += 1 + chain_len;
                }
                _ => {
                    value = self.step(value, op)?;
                    i += 1;
                }
            }
        }
        Ok(value)
    }

    /// Applies one attribute or index step.
    fn step(&mut self, value: Value, op: &hcl_edit::Decorated<TraversalOperator>) -> Result<Value> {
        let span = op.span();
        match op.value() {
            TraversalOperator::GetAttr(name) => get_attr(value, name.as_str(), span),
            TraversalOperator::LegacyIndex(i) => {
                let key = Value::from(i64::try_from(*i.value()).unwrap_or(i64::MAX));
                index(value, &key, span)
            }
            TraversalOperator::Index(e) => {
                let key = self.eval(e)?;
                index(value, &key, span)
            }
            TraversalOperator::AttrSplat(_) | TraversalOperator::FullSplat(_) => {
                Err(EvalError::new("misplaced splat operator", span))
            }
        }
    }

    fn for_expr(&mut self, f: &ForExpr) -> Result<Value> {
        let collection = self.eval(&f.intro.collection_expr)?;
        let entries: Vec<(Value, Value)> = match collection {
            Value::List(items) => items
                .into_iter()
                .enumerate()
                .map(|(i, v)| (Value::from(i as i64), v))
                .collect(),
            Value::Object(fields) => fields
                .into_iter()
                .map(|(k, v)| (Value::String(k), v))
                .collect(),
            Value::Null => {
                return Err(EvalError::new(
                    "Iteration over null value: A null value cannot be used as the collection in a 'for' expression.",
                    f.intro.collection_expr.span(),
                ));
            }
            other => {
                return Err(EvalError::new(
                    format!(
                        "Iteration over non-iterable value: A value of type {} cannot be used as the collection in a 'for' expression.",
                        other.type_name()
                    ),
                    f.intro.collection_expr.span(),
                ));
            }
        };
        let key_var = f.intro.key_var.as_ref().map(|k| k.as_str().to_string());
        let value_var = f.intro.value_var.as_str().to_string();
        let mut list = Vec::new();
        let mut object: BTreeMap<String, Value> = BTreeMap::new();
        let mut grouped: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for (k, v) in entries {
            let depth = self.local.len();
            if let Some(name) = &key_var {
                self.local.push((name.clone(), k));
            }
            self.local.push((value_var.clone(), v));
            let result = self.for_item(f, &mut list, &mut object, &mut grouped);
            self.local.truncate(depth);
            result?;
        }
        if f.key_expr.is_none() {
            return Ok(Value::List(list));
        }
        if f.grouping {
            return Ok(Value::Object(
                grouped
                    .into_iter()
                    .map(|(k, v)| (k, Value::List(v)))
                    .collect(),
            ));
        }
        Ok(Value::Object(object))
    }

    fn for_item(
        &mut self,
        f: &ForExpr,
        list: &mut Vec<Value>,
        object: &mut BTreeMap<String, Value>,
        grouped: &mut BTreeMap<String, Vec<Value>>,
    ) -> Result<()> {
        if let Some(cond) = &f.cond {
            let keep = self.eval(&cond.expr)?;
            match keep.to_bool() {
                Some(true) => {}
                Some(false) => return Ok(()),
                None => {
                    return Err(EvalError::new(
                        format!(
                            "Invalid 'for' condition: The 'if' clause value is invalid: bool required, not {}.",
                            keep.type_name()
                        ),
                        cond.expr.span(),
                    ));
                }
            }
        }
        let Some(key_expr) = &f.key_expr else {
            list.push(self.eval(&f.value_expr)?);
            return Ok(());
        };
        let key = match self.eval(key_expr)? {
            Value::Null => {
                return Err(EvalError::new(
                    "Invalid object key: Key expression in 'for' expression must not produce a null value.",
                    key_expr.span(),
                ));
            }
            k => k.to_str().ok_or_else(|| {
                EvalError::new(
                    format!(
                        "Invalid object key: The key expression produced an invalid result: string required, not {}.",
                        k.type_name()
                    ),
                    key_expr.span(),
                )
            })?,
        };
        let value = self.eval(&f.value_expr)?;
        if f.grouping {
            grouped.entry(key).or_default().push(value);
        } else if object.insert(key.clone(), value).is_some() {
            return Err(EvalError::new(
                format!(
                    "Duplicate object key: Two different items produced the key {key:?} in this 'for' expression. If duplicate keys are expected, use the ellipsis (...) after the value expression to enable grouping by key."
                ),
                key_expr.span(),
            ));
        }
        Ok(())
    }

    fn call(&mut self, call: &FuncCall) -> Result<Value> {
        let name = call.name.name.as_str();
        let span = call.span();
        if self.env.files.is_none() {
            return Err(EvalError::new(
                "Function calls not allowed: Functions may not be called here.",
                span,
            ));
        }
        if call.name.is_namespaced() {
            return Err(EvalError::new(
                format!(
                    "Call to unknown function: There is no function named \"{}::{name}\".",
                    call.name
                        .namespace
                        .iter()
                        .map(|n| n.as_str())
                        .collect::<Vec<_>>()
                        .join("::")
                ),
                span,
            ));
        }
        let arg_exprs: Vec<&Expression> = call.args.iter().collect();
        match name {
            // `try` and `can` see their arguments' errors; `convert` reads a type expression.
            "try" => {
                if arg_exprs.is_empty() {
                    return Err(EvalError::new(
                        "Invalid function call: At least one argument is required.",
                        span,
                    ));
                }
                let mut last = None;
                for arg in &arg_exprs {
                    match self.eval(arg) {
                        Ok(v) => return Ok(v),
                        Err(e) => last = Some(e),
                    }
                }
                let detail = last.map(|e| e.message).unwrap_or_default();
                Err(EvalError::new(
                    format!(
                        "Error in function call: Call to function \"try\" failed: no expression succeeded:\n- {detail}\n\nAt least one expression must produce a successful result."
                    ),
                    span,
                ))
            }
            "can" => {
                let [arg] = arg_exprs.as_slice() else {
                    return Err(arity(name, 1, arg_exprs.len(), span));
                };
                Ok(Value::Bool(self.eval(arg).is_ok()))
            }
            "convert" => {
                let [value, ty] = arg_exprs.as_slice() else {
                    return Err(arity(name, 2, arg_exprs.len(), span));
                };
                let v = self.eval(value)?;
                let ty = types::parse_type(ty).map_err(|(m, s)| {
                    EvalError::new(format!("Invalid type specification: {m}"), s)
                })?;
                types::convert(&v, &ty).map_err(|e| {
                    EvalError::new(
                        format!(
                            "Invalid function argument: Invalid value for \"value\" parameter: {e}."
                        ),
                        value.span(),
                    )
                })
            }
            _ => {
                let mut args = Vec::with_capacity(arg_exprs.len());
                for (i, arg) in arg_exprs.iter().enumerate() {
                    let v = self.eval(arg)?;
                    if call.args.expand_final() && i + 1 == arg_exprs.len() {
                        match v {
                            Value::List(items) => args.extend(items),
                            Value::Null => {
                                return Err(EvalError::new(
                                    "Invalid expanding argument value: The expanding argument (indicated by ...) must not be null.",
                                    arg.span(),
                                ));
                            }
                            other => {
                                return Err(EvalError::new(
                                    format!(
                                        "Invalid expanding argument value: The expanding argument (indicated by ...) must be of a tuple, list, or set type, not {}.",
                                        other.type_name()
                                    ),
                                    arg.span(),
                                ));
                            }
                        }
                    } else {
                        args.push(v);
                    }
                }
                let files = self.env.files.as_ref();
                funcs::call(name, args, files).map_err(|e| EvalError::new(e.render(name), span))
            }
        }
    }
}

fn arity(name: &str, want: usize, got: usize, span: Option<Range<usize>>) -> EvalError {
    let message = if got > want {
        format!("Too many function arguments: Function {name:?} expects only {want} argument(s).")
    } else {
        format!("Not enough function arguments: Function {name:?} expects {want} argument(s).")
    };
    EvalError::new(message, span)
}

fn is_primitive(v: &Value) -> bool {
    matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_))
}

fn is_static(op: &TraversalOperator) -> bool {
    match op {
        TraversalOperator::GetAttr(_) | TraversalOperator::LegacyIndex(_) => true,
        TraversalOperator::Index(e) => {
            matches!(e, Expression::String(_) | Expression::Number(_))
        }
        _ => false,
    }
}

fn number(n: &hcl_edit::Number, span: Option<Range<usize>>) -> Result<Value> {
    if let Some(i) = n.as_i64() {
        return Ok(Value::from(i));
    }
    n.as_f64()
        .and_then(Number::from_f64)
        .map(Value::Number)
        .ok_or_else(|| EvalError::new(format!("invalid number {n}"), span))
}
