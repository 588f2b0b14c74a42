//! Renders the text of a task's `template` block: consul-template's language (Go's
//! text/template with its function library) with Caravan's variable and service functions.
//!
//! The crate is pure: [`render`] reads what the client has fetched ([`Context::data`]) and
//! reports every cluster dep the text read ([`Rendered::deps`]) and the ones not fetched yet
//! ([`Rendered::missing`]). One pass collects every dep: a function whose dep is missing returns
//! an empty value and the render goes on, then the text is withheld (`None`). The client fetches
//! the missing deps, renders again, and watches all of `deps` to render on change.
//!
//! A dep that is present but says "not yet" also withholds the text, without being missing:
//! `nomadVar` of a variable that does not exist ([`DepValue::Var`]`(None)`) and
//! `nomadVarListSafe` of an empty list wait, as consul-template blocks on them, until the
//! watched value changes. `nomadVarExists` renders `false` for that same value.
//!
//! The Go template engine is the `gotmpl` crate (already in the workspace for the CLI's `-t`):
//! a port of Go's text/template with Go's parse and execution semantics (pipelines, `$`
//! variables, `range $i, $e :=`, `with`/`if`/`else if`, the builtins, `{{-`/`-}}`, comments,
//! custom delimiters, `missingkey=error`) whose functions are closures, so one render's state
//! is bound to its functions without thread-locals (the `gtmpl` crate takes plain `fn`
//! pointers and has no missing-key option, which is why it was not chosen).
//!
//! ```
//! use std::collections::BTreeMap;
//! use caravan_template::{parse, render, Context, Dep, DepValue, Variable};
//!
//! let t = parse(r#"{{ with nomadVar "app/db" }}user={{ .user }}{{ end }}"#, "", "").unwrap();
//! let env = BTreeMap::new();
//! let mut data = BTreeMap::new();
//! let ctx = Context { env: &env, namespace: "default", data: &data, error_on_missing_key: false };
//! let first = render(&t, &ctx).unwrap();
//! let dep = Dep::Var { namespace: "default".into(), path: "app/db".into() };
//! assert_eq!(first.text, None);
//! assert!(first.missing.contains(&dep));
//! // The client fetches what is missing and renders again.
//! let var = Variable { items: [("user".into(), "u1".into())].into(), ..Default::default() };
//! data.insert(dep, DepValue::Var(Some(var)));
//! let ctx = Context { env: &env, namespace: "default", data: &data, error_on_missing_key: false };
//! assert_eq!(render(&t, &ctx).unwrap().text.as_deref(), Some("user=u1"));
//! ```
//!
//! Functions: Go's builtins; `nomadVar`, `nomadVarExists`, `nomadVarList`,
//! `nomadVarListSafe`, `nomadService` (with the `<count> "<key>" "<name>"` rendezvous form),
//! `nomadServices`; `env`, `mustEnv`, `envOrDefault` (the task's environment);
//! `executeTemplate` (a `define` rendered to a string, for pipelines); and the helpers listed
//! in `helpers.rs`. Consul, Vault and host functions (`key`, `service`, `secret`, `file`,
//! `plugin`, `sockaddr`, ...) are refused at parse time with the reason.
//! Service instances render ordered by id and variable lists by path, so a text does not change
//! with the order the client fetched them in; `timestamp` renders UTC.
//!
//! Known differences from consul-template: values are plain maps and lists, so the methods of
//! its Go types are absent (`.Keys`/`.Values`/`.Tuples`/`.Metadata` on `nomadVar`'s items, and
//! a `nomadVarList` entry prints as a map rather than its path: write `.Path`). The `@region`
//! suffix is accepted only when it names the task's own region (`NOMAD_REGION`).

mod check;
mod deps;
mod error;
mod helpers;
mod nomad;
mod values;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub use deps::{Dep, DepValue, ServiceInstance, ServiceStub, Variable, VariableMeta};
pub use error::TemplateError;

use nomad::RenderScope;

/// A parsed template, ready to render any number of times.
#[derive(Clone)]
pub struct Template {
    inner: gotmpl::Template,
}

impl std::fmt::Debug for Template {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Template")
            .field("name", &self.inner.name())
            .finish()
    }
}

/// What a render reads: the task's environment, its namespace and the fetched cluster state.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// The task's environment, for `env`, `mustEnv` and `envOrDefault`.
    pub env: &'a BTreeMap<String, String>,
    /// The namespace of `nomadVar` and the others when the query names none.
    pub namespace: &'a str,
    /// What the client has fetched so far.
    pub data: &'a BTreeMap<Dep, DepValue>,
    /// Indexing a map with an absent key fails instead of printing `<no value>`.
    pub error_on_missing_key: bool,
}

/// The outcome of one render.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    /// The text, or `None` while some dep is missing or not yet there.
    pub text: Option<String>,
    /// Every dep the render read, present or missing: the client watches these.
    pub deps: BTreeSet<Dep>,
    /// The deps not in the context's data: the client fetches them and renders again.
    pub missing: BTreeSet<Dep>,
}

fn all_funcs(scope: &Arc<RenderScope>) -> gotmpl::FuncMap {
    let mut m = helpers::funcs();
    m.extend(nomad::funcs(scope));
    m
}

/// Parses a template text with the given delimiters ("" means `{{` and `}}`).
///
/// Fails on a syntax error and on a function that does not exist, naming the function; the
/// Consul, Vault and host functions Caravan cannot back are refused with the reason.
pub fn parse(text: &str, left: &str, right: &str) -> Result<Template, TemplateError> {
    let left = if left.is_empty() { "{{" } else { left };
    let right = if right.is_empty() { "}}" } else { right };
    let scope = Arc::new(RenderScope::default());
    let inner = gotmpl::Template::new("")
        .delims(left, right)
        .funcs(all_funcs(&scope))
        .parse(text)
        .map_err(|e| TemplateError::Parse(e.to_string()))?;
    let defined = all_funcs(&scope).into_keys().collect();
    check::functions(text, left, right, &defined)?;
    Ok(Template { inner })
}

/// Renders a parsed template against what the client has fetched.
///
/// An execution error is returned only when every dep was present: with deps missing or not
/// yet there, the text is withheld instead, since the error may come from their empty values.
pub fn render(t: &Template, ctx: &Context<'_>) -> Result<Rendered, TemplateError> {
    let scope = Arc::new(RenderScope {
        env: ctx.env.clone(),
        namespace: ctx.namespace.to_string(),
        data: ctx.data.clone(),
        reads: Default::default(),
        template: Default::default(),
        nested: Default::default(),
    });
    let missing_key = if ctx.error_on_missing_key {
        gotmpl::MissingKey::Error
    } else {
        gotmpl::MissingKey::Invalid
    };
    let bound = Arc::new(
        t.inner
            .clone()
            .funcs(all_funcs(&scope))
            .missing_key(missing_key),
    );
    // Only this render sets it, once, so the result carries no information.
    let _ = scope.template.set(Arc::downgrade(&bound));
    let result = bound.execute_to_string(&gotmpl::Value::Nil);
    let reads = std::mem::take(&mut *scope.reads.lock());
    let waiting = reads.blocked || !reads.missing.is_empty();
    let text = match result {
        Ok(_) if waiting => None,
        Ok(text) => Some(text),
        Err(_) if waiting => None,
        Err(e) => return Err(render_error(e)),
    };
    Ok(Rendered {
        text,
        deps: reads.deps,
        missing: reads.missing,
    })
}

fn render_error(e: gotmpl::TemplateError) -> TemplateError {
    match e {
        gotmpl::TemplateError::MissingKey { key } => {
            TemplateError::Render(format!("map has no entry for key {key:?}"))
        }
        other => TemplateError::Render(other.to_string()),
    }
}

#[cfg(test)]
mod tests;
