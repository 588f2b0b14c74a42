//! Checks at parse time that every function a text calls exists, as Go's parser does, and
//! refuses the consul-template functions Caravan cannot back with the reason.

use std::collections::BTreeSet;

use gotmpl::parse::{CommandNode, Expr, ListNode, Node, Parser, PipeNode};

use crate::TemplateError;

/// Functions of consul-template that Caravan cannot back, and why.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("key", "it reads Consul's KV store"),
    ("keyExists", "it reads Consul's KV store"),
    ("keyOrDefault", "it reads Consul's KV store"),
    ("ls", "it reads Consul's KV store"),
    ("safeLs", "it reads Consul's KV store"),
    ("tree", "it reads Consul's KV store"),
    ("safeTree", "it reads Consul's KV store"),
    ("byKey", "it groups Consul KV pairs"),
    ("explode", "it nests Consul KV pairs (use explodeMap)"),
    ("service", "it reads Consul's catalog (use nomadService)"),
    ("services", "it reads Consul's catalog (use nomadServices)"),
    ("connect", "it reads Consul's catalog"),
    ("node", "it reads Consul's catalog"),
    ("nodes", "it reads Consul's catalog"),
    ("datacenters", "it reads Consul's catalog"),
    ("partitions", "it reads Consul's catalog"),
    ("peerings", "it reads Consul's catalog"),
    ("exportedServices", "it reads Consul's catalog"),
    ("importedServices", "it reads Consul's catalog"),
    ("byMeta", "it groups Consul catalog entries"),
    ("caLeaf", "it reads Consul's Connect CA"),
    ("caRoots", "it reads Consul's Connect CA"),
    ("secret", "it reads Vault"),
    ("secrets", "it reads Vault"),
    ("pkiCert", "it reads Vault"),
    ("file", "it reads the client's file system"),
    ("writeToFile", "it writes to the client's file system"),
    ("plugin", "it runs a program on the client"),
    ("sockaddr", "it inspects the client's network interfaces"),
];

/// Go's text/template builtins, present in every template.
const BUILTINS: &[&str] = &[
    "and", "or", "not", "eq", "ne", "lt", "le", "gt", "ge", "len", "index", "slice", "print",
    "printf", "println", "call", "html", "js", "urlquery",
];

/// An action appended to the text: the parser stops silently at a stray top-level `{{end}}`
/// or `{{else}}`, so a text it did not read to the end lacks this last action.
const SENTINEL: &str = "caravan_end_of_text";

/// Fails on what Go's parser refuses and the engine's lets through (a stray `{{end}}` or
/// `{{else}}`, `{{break}}`/`{{continue}}` outside `{{range}}`), and on the first call (in
/// text order) of a function not in `defined`.
pub(crate) fn functions(
    text: &str,
    left: &str,
    right: &str,
    defined: &BTreeSet<String>,
) -> Result<(), TemplateError> {
    let guarded = format!("{text}{left}{SENTINEL}{right}");
    let (mut body, defines) = Parser::new(&guarded, left, right)
        .and_then(Parser::parse)
        .map_err(|e| TemplateError::Parse(e.to_string()))?;
    match body.nodes.pop() {
        Some(Node::Action(a)) if is_sentinel(&a.pipe) => {}
        _ => {
            return Err(TemplateError::Parse(
                "template: unexpected {{end}} or {{else}} outside a block".to_string(),
            ));
        }
    }
    let mut calls = Vec::new();
    let mut w = Walk {
        calls: &mut calls,
        ranges: 0,
    };
    w.list(&body)?;
    for d in &defines {
        w.list(&d.body)?;
    }
    calls.sort_by_key(|(offset, _, _)| *offset);
    for (_, line, name) in calls {
        if BUILTINS.contains(&name.as_str()) || defined.contains(&name) {
            continue;
        }
        if let Some((_, why)) = UNSUPPORTED.iter().find(|(n, _)| *n == name) {
            return Err(TemplateError::Parse(format!(
                "function \"{name}\" is not supported by Caravan: {why}"
            )));
        }
        return Err(TemplateError::Parse(format!(
            "template: line {line}: function \"{name}\" not defined"
        )));
    }
    Ok(())
}

fn is_sentinel(p: &PipeNode) -> bool {
    matches!(p.commands.as_slice(), [c] if matches!(c.args.as_slice(), [Expr::Identifier(_, n)] if n == SENTINEL))
}

/// Collects function calls, checking `{{break}}`/`{{continue}}` sit inside a `{{range}}`.
struct Walk<'a> {
    calls: &'a mut Vec<(usize, usize, String)>,
    ranges: usize,
}

impl Walk<'_> {
    fn list(&mut self, l: &ListNode) -> Result<(), TemplateError> {
        for n in &l.nodes {
            self.node(n)?;
        }
        Ok(())
    }

    fn node(&mut self, n: &Node) -> Result<(), TemplateError> {
        match n {
            Node::List(l) => self.list(l)?,
            Node::Action(a) => self.pipe(&a.pipe),
            Node::Range(b) => {
                self.pipe(&b.pipe);
                self.ranges += 1;
                let body = self.list(&b.body);
                self.ranges -= 1;
                body?;
                if let Some(e) = &b.else_body {
                    self.list(e)?;
                }
            }
            Node::If(b) | Node::With(b) => {
                self.pipe(&b.pipe);
                self.list(&b.body)?;
                if let Some(e) = &b.else_body {
                    self.list(e)?;
                }
            }
            Node::Template(t) => {
                if let Some(p) = &t.pipe {
                    self.pipe(p);
                }
            }
            Node::Define(d) => {
                let outer = std::mem::take(&mut self.ranges);
                let body = self.list(&d.body);
                self.ranges = outer;
                body?;
            }
            Node::Break(p) | Node::Continue(p) if self.ranges == 0 => {
                let what = if matches!(n, Node::Break(_)) {
                    "break"
                } else {
                    "continue"
                };
                return Err(TemplateError::Parse(format!(
                    "template: line {}: {{{{{what}}}}} outside {{{{range}}}}",
                    p.line
                )));
            }
            Node::Text(_) | Node::Break(_) | Node::Continue(_) => {}
        }
        Ok(())
    }

    fn pipe(&mut self, p: &PipeNode) {
        for c in &p.commands {
            self.command(c);
        }
    }

    fn command(&mut self, c: &CommandNode) {
        for e in &c.args {
            self.expr(e);
        }
    }

    fn expr(&mut self, e: &Expr) {
        match e {
            Expr::Identifier(pos, name) => {
                self.calls.push((pos.offset, pos.line, name.to_string()))
            }
            Expr::Pipe(_, p) => self.pipe(p),
            Expr::Chain(_, inner, _) => self.expr(inner),
            _ => {}
        }
    }
}
