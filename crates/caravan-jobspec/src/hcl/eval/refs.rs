//! The references an expression makes, for the check that a variable's validation rule
//! tests that variable and no other.

use hcl_edit::expr::{Expression, ObjectKey, TraversalOperator};

use super::template;

/// Collects `(root, first attribute)` of every reference in an expression, skipping names
/// bound by `for` expressions inside it.
pub(super) fn collect_references(
    expr: &Expression,
    bound: &mut Vec<String>,
    out: &mut Vec<(String, Option<String>)>,
) {
    match expr {
        Expression::Variable(v) => {
            if !bound.iter().any(|b| b == v.as_str()) {
                out.push((v.as_str().to_string(), None));
            }
        }
        Expression::Traversal(t) => {
            if let Expression::Variable(v) = &t.expr {
                if !bound.iter().any(|b| b == v.as_str()) {
                    let attr = t.operators.first().and_then(|op| match op.value() {
                        TraversalOperator::GetAttr(a) => Some(a.as_str().to_string()),
                        _ => None,
                    });
                    out.push((v.as_str().to_string(), attr));
                }
            } else {
                collect_references(&t.expr, bound, out);
            }
            for op in &t.operators {
                if let TraversalOperator::Index(e) = op.value() {
                    collect_references(e, bound, out);
                }
            }
        }
        Expression::Array(items) => items.iter().for_each(|e| collect_references(e, bound, out)),
        Expression::Object(obj) => {
            for (k, v) in obj.iter() {
                if let ObjectKey::Expression(e) = k
                    && !matches!(e, Expression::Variable(_))
                {
                    collect_references(e, bound, out);
                }
                collect_references(v.expr(), bound, out);
            }
        }
        Expression::StringTemplate(t) => template::references(t.iter(), bound, out),
        Expression::HeredocTemplate(h) => template::references(h.template.iter(), bound, out),
        Expression::Parenthesis(p) => collect_references(p.inner(), bound, out),
        Expression::Conditional(c) => {
            collect_references(&c.cond_expr, bound, out);
            collect_references(&c.true_expr, bound, out);
            collect_references(&c.false_expr, bound, out);
        }
        Expression::FuncCall(call) => call
            .args
            .iter()
            .for_each(|e| collect_references(e, bound, out)),
        Expression::UnaryOp(op) => collect_references(&op.expr, bound, out),
        Expression::BinaryOp(op) => {
            collect_references(&op.lhs_expr, bound, out);
            collect_references(&op.rhs_expr, bound, out);
        }
        Expression::ForExpr(f) => {
            collect_references(&f.intro.collection_expr, bound, out);
            let depth = bound.len();
            if let Some(k) = &f.intro.key_var {
                bound.push(k.as_str().to_string());
            }
            bound.push(f.intro.value_var.as_str().to_string());
            if let Some(k) = &f.key_expr {
                collect_references(k, bound, out);
            }
            collect_references(&f.value_expr, bound, out);
            if let Some(c) = &f.cond {
                collect_references(&c.expr, bound, out);
            }
            bound.truncate(depth);
        }
        Expression::Null(_)
        | Expression::Bool(_)
        | Expression::Number(_)
        | Expression::String(_) => {}
    }
}
