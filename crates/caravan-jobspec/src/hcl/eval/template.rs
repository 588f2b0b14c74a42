//! String templates: literals, `${...}` interpolations, `%{ if }` and `%{ for }` directives,
//! and the `~` markers that strip the whitespace next to them.

use hcl_edit::Span;
use hcl_edit::template::{Directive, Element, StringTemplate, Template};

use super::EvalError;
use super::expr::Evaluator;
use super::refs::collect_references;
use super::value::Value;

type Result<T> = std::result::Result<T, EvalError>;

/// A quoted template. One that is a single interpolation (`"${var.count}"`) gives the
/// value itself, not its string form, as in HCL.
pub(super) fn render_string(ev: &mut Evaluator<'_>, t: &StringTemplate) -> Result<Value> {
    let elements: Vec<&Element> = t.iter().collect();
    if let [Element::Interpolation(i)] = elements.as_slice() {
        return ev.eval(&i.expr);
    }
    render_elements(ev, &elements, false, false).map(Value::String)
}

/// Renders a template; `strip_first`/`strip_last` trim the whitespace at its edges (the
/// `~` of an enclosing directive).
pub(super) fn render(
    ev: &mut Evaluator<'_>,
    t: &Template,
    strip_first: bool,
    strip_last: bool,
) -> Result<String> {
    let elements: Vec<&Element> = t.iter().collect();
    render_elements(ev, &elements, strip_first, strip_last)
}

/// Whether an element strips the whitespace before it and after it.
fn strips(e: &Element) -> (bool, bool) {
    match e {
        Element::Literal(_) => (false, false),
        Element::Interpolation(i) => (i.strip.strip_start(), i.strip.strip_end()),
        Element::Directive(d) => match d.as_ref() {
            Directive::If(d) => (
                d.if_expr.strip.strip_start(),
                d.endif_expr.strip.strip_end(),
            ),
            Directive::For(d) => (
                d.for_expr.strip.strip_start(),
                d.endfor_expr.strip.strip_end(),
            ),
        },
    }
}

fn render_elements(
    ev: &mut Evaluator<'_>,
    elements: &[&Element],
    strip_first: bool,
    strip_last: bool,
) -> Result<String> {
    let mut out = String::new();
    let last = elements.len().saturating_sub(1);
    for (i, element) in elements.iter().enumerate() {
        match element {
            Element::Literal(lit) => {
                let mut text: &str = lit.value();
                let trim_start = (i == 0 && strip_first) || (i > 0 && strips(elements[i - 1]).1);
                let trim_end = (i == last && strip_last) || (i < last && strips(elements[i + 1]).0);
                if trim_start {
                    text = text.trim_start();
                }
                if trim_end {
                    text = text.trim_end();
                }
                out.push_str(text);
            }
            Element::Interpolation(interp) => {
                let v = ev.eval(&interp.expr)?;
                out.push_str(&interpolated(v, interp.expr.span())?);
            }
            Element::Directive(d) => match d.as_ref() {
                Directive::If(d) => {
                    let cond = ev.eval(&d.if_expr.cond_expr)?;
                    let cond = cond.to_bool().ok_or_else(|| {
                        EvalError::new(
                            format!(
                                "Invalid 'if' condition: The condition must be a bool, not {}.",
                                cond.type_name()
                            ),
                            d.if_expr.cond_expr.span(),
                        )
                    })?;
                    if cond {
                        let last_strip = match &d.else_expr {
                            Some(e) => e.strip.strip_start(),
                            None => d.endif_expr.strip.strip_start(),
                        };
                        out.push_str(&render(
                            ev,
                            &d.if_expr.template,
                            d.if_expr.strip.strip_end(),
                            last_strip,
                        )?);
                    } else if let Some(e) = &d.else_expr {
                        out.push_str(&render(
                            ev,
                            &e.template,
                            e.strip.strip_end(),
                            d.endif_expr.strip.strip_start(),
                        )?);
                    }
                }
                Directive::For(d) => {
                    let f = &d.for_expr;
                    let collection = ev.eval(&f.collection_expr)?;
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
                        other => {
                            return Err(EvalError::new(
                                format!(
                                    "Invalid template for directive: A value of type {} cannot be used as the collection in a 'for' directive.",
                                    other.type_name()
                                ),
                                f.collection_expr.span(),
                            ));
                        }
                    };
                    for (k, v) in entries {
                        if out.len() > super::MAX_STRING {
                            return Err(EvalError::new(
                                format!(
                                    "Template too long: the result would exceed {} bytes",
                                    super::MAX_STRING
                                ),
                                f.collection_expr.span(),
                            ));
                        }
                        let text = ev.with_bindings(
                            f.key_var.as_ref().map(|k| k.as_str()),
                            k,
                            f.value_var.as_str(),
                            v,
                            |ev| {
                                render(
                                    ev,
                                    &f.template,
                                    f.strip.strip_end(),
                                    d.endfor_expr.strip.strip_start(),
                                )
                            },
                        )?;
                        out.push_str(&text);
                    }
                }
            },
        }
    }
    Ok(out)
}

/// An interpolated value as text.
fn interpolated(v: Value, span: Option<std::ops::Range<usize>>) -> Result<String> {
    match v {
        Value::Null => Err(EvalError::new(
            "Invalid template interpolation value: The expression result is null. Cannot include a null value in a string template.",
            span,
        )),
        other => other.to_str().ok_or_else(|| {
            EvalError::new(
                format!(
                    "Invalid template interpolation value: Cannot include the given value in a string template: string required, not {}.",
                    other.type_name()
                ),
                span,
            )
        }),
    }
}

/// The references inside a template's elements.
pub(super) fn references<'a>(
    elements: impl Iterator<Item = &'a Element>,
    bound: &mut Vec<String>,
    out: &mut Vec<(String, Option<String>)>,
) {
    for element in elements {
        match element {
            Element::Literal(_) => {}
            Element::Interpolation(i) => collect_references(&i.expr, bound, out),
            Element::Directive(d) => match d.as_ref() {
                Directive::If(d) => {
                    collect_references(&d.if_expr.cond_expr, bound, out);
                    references(d.if_expr.template.iter(), bound, out);
                    if let Some(e) = &d.else_expr {
                        references(e.template.iter(), bound, out);
                    }
                }
                Directive::For(d) => {
                    let f = &d.for_expr;
                    collect_references(&f.collection_expr, bound, out);
                    let depth = bound.len();
                    if let Some(k) = &f.key_var {
                        bound.push(k.as_str().to_string());
                    }
                    bound.push(f.value_var.as_str().to_string());
                    references(f.template.iter(), bound, out);
                    bound.truncate(depth);
                }
            },
        }
    }
}
