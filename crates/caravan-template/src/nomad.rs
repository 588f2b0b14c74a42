//! The functions that read cluster state (`nomadVar`, `nomadService`, ...) and the task's
//! environment, recording every dep a render reads.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use gotmpl::{FuncMap, Value};
use parking_lot::Mutex;

use crate::deps::{self, Dep, DepValue, Query};
use crate::values::{self, FnResult, arity, fn_err, int_arg, str_arg};

/// What one render reads and what it found missing.
#[derive(Default)]
pub(crate) struct Reads {
    pub deps: BTreeSet<Dep>,
    pub missing: BTreeSet<Dep>,
    /// A dep is present but says "not yet" (a variable that does not exist, an empty safe
    /// list): the text waits for it to change.
    pub blocked: bool,
}

/// The inputs of one render, owned so the template functions can hold them.
#[derive(Default)]
pub(crate) struct RenderScope {
    pub env: BTreeMap<String, String>,
    pub namespace: String,
    pub data: BTreeMap<Dep, DepValue>,
    pub reads: Mutex<Reads>,
    /// The template being rendered, for `executeTemplate` (weak: the template owns the scope).
    pub template: OnceLock<Weak<gotmpl::Template>>,
    /// How deep `executeTemplate` calls are nested, to stop a template that calls itself.
    pub nested: AtomicUsize,
}

/// How deep `executeTemplate` may nest.
const MAX_NESTED: usize = 16;

impl RenderScope {
    /// Records a read of `q`'s dep and returns its value, or `None` (recorded missing).
    fn recall(
        &self,
        func: &str,
        q: Query,
    ) -> Result<(Dep, Option<&DepValue>), gotmpl::TemplateError> {
        if let Some(region) = &q.region {
            match self.env.get("NOMAD_REGION") {
                Some(own) if own == region => {}
                _ => {
                    return Err(fn_err(
                        func,
                        format!(
                            "region {region:?} is not served: Caravan reads the task's own region only"
                        ),
                    ));
                }
            }
        }
        let mut reads = self.reads.lock();
        reads.deps.insert(q.dep.clone());
        let value = self.data.get(&q.dep);
        if value.is_none() {
            reads.missing.insert(q.dep.clone());
        }
        Ok((q.dep, value))
    }

    fn block(&self) {
        self.reads.lock().blocked = true;
    }
}

fn mismatched(func: &str, dep: &Dep) -> gotmpl::TemplateError {
    fn_err(
        func,
        format!("the client's value for {dep:?} has the wrong kind"),
    )
}

fn nomad_var(scope: &RenderScope, args: &[Value]) -> FnResult {
    const F: &str = "nomadVar";
    arity(F, args, 1, 1)?;
    let Some(q) =
        deps::var_query(&scope.namespace, str_arg(F, args, 0)?).map_err(|e| fn_err(F, e))?
    else {
        return Ok(values::map([]));
    };
    match scope.recall(F, q)? {
        (_, None) => Ok(values::map([])),
        (_, Some(DepValue::Var(Some(v)))) => Ok(values::items(&v.items)),
        (_, Some(DepValue::Var(None))) => {
            // The variable does not exist: the text waits until it does.
            scope.block();
            Ok(values::map([]))
        }
        (dep, Some(_)) => Err(mismatched(F, &dep)),
    }
}

fn nomad_var_exists(scope: &RenderScope, args: &[Value]) -> FnResult {
    const F: &str = "nomadVarExists";
    arity(F, args, 1, 1)?;
    let Some(q) =
        deps::var_query(&scope.namespace, str_arg(F, args, 0)?).map_err(|e| fn_err(F, e))?
    else {
        return Ok(Value::Bool(false));
    };
    match scope.recall(F, q)? {
        (_, None) => Ok(Value::Bool(false)),
        (_, Some(DepValue::Var(v))) => Ok(Value::Bool(v.is_some())),
        (dep, Some(_)) => Err(mismatched(F, &dep)),
    }
}

fn nomad_var_list(scope: &RenderScope, args: &[Value], safe: bool) -> FnResult {
    let f = if safe {
        "nomadVarListSafe"
    } else {
        "nomadVarList"
    };
    if args.len() > 1 {
        return Err(fn_err(
            f,
            format!(
                "takes either a single \"prefix\" parameter or none for all available variables; got {} arguments",
                args.len()
            ),
        ));
    }
    let prefix = if args.is_empty() {
        ""
    } else {
        str_arg(f, args, 0)?
    };
    let q = deps::var_list_query(&scope.namespace, prefix).map_err(|e| fn_err(f, e))?;
    match scope.recall(f, q)? {
        (_, None) => Ok(values::list([])),
        (_, Some(DepValue::VarList(metas))) => {
            if safe && metas.is_empty() {
                // The safe form refuses to render an empty list: wait for variables to appear.
                scope.block();
            }
            let mut metas: Vec<_> = metas.iter().collect();
            metas.sort_by(|a, b| a.path.cmp(&b.path));
            Ok(values::list(metas.into_iter().map(values::var_meta)))
        }
        (dep, Some(_)) => Err(mismatched(f, &dep)),
    }
}

fn nomad_service(scope: &RenderScope, args: &[Value]) -> FnResult {
    const F: &str = "nomadService";
    let (name, pick) = match args.len() {
        1 => (str_arg(F, args, 0)?, None),
        3 => {
            let count = int_arg(F, args, 0)
                .map_err(|_| fn_err(F, "expected integer for <count> argument"))?;
            let key =
                str_arg(F, args, 1).map_err(|_| fn_err(F, "expected string for <key> argument"))?;
            (str_arg(F, args, 2)?, Some((count, key)))
        }
        _ => {
            return Err(fn_err(
                F,
                "expected arguments <service> or <count> <key> <service>",
            ));
        }
    };
    let q = deps::service_query(&scope.namespace, name).map_err(|e| fn_err(F, e))?;
    if let Some((count, key)) = pick {
        // Validate before reading, so a bad count fails even on the first pass.
        deps::choose(&[], count, key).map_err(|e| fn_err(F, e))?;
    }
    match scope.recall(F, q)? {
        (_, None) => Ok(values::list([])),
        (Dep::Service { tag, .. }, Some(DepValue::Service(instances))) => {
            // Ordered by id, so the text does not change with the order the client fetched in.
            let mut kept: Vec<_> = instances
                .iter()
                .filter(|s| tag.as_ref().is_none_or(|t| s.tags.contains(t)))
                .cloned()
                .collect();
            kept.sort_by(|a, b| a.id.cmp(&b.id));
            let kept = match pick {
                Some((count, key)) => deps::choose(&kept, count, key).map_err(|e| fn_err(F, e))?,
                None => kept,
            };
            Ok(values::list(kept.iter().map(values::service)))
        }
        (dep, Some(_)) => Err(mismatched(F, &dep)),
    }
}

fn nomad_services(scope: &RenderScope, args: &[Value]) -> FnResult {
    const F: &str = "nomadServices";
    let mut joined = String::new();
    for i in 0..args.len() {
        joined.push_str(str_arg(F, args, i)?);
    }
    let q = deps::services_query(&scope.namespace, &joined).map_err(|e| fn_err(F, e))?;
    match scope.recall(F, q)? {
        (_, None) => Ok(values::list([])),
        (_, Some(DepValue::Services(stubs))) => {
            let mut stubs = stubs.clone();
            stubs.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(values::list(stubs.iter().map(values::service_stub)))
        }
        (dep, Some(_)) => Err(mismatched(F, &dep)),
    }
}

fn env(scope: &RenderScope, args: &[Value], f: &str) -> FnResult {
    match f {
        "env" => {
            arity(f, args, 1, 1)?;
            let k = str_arg(f, args, 0)?;
            Ok(values::string(scope.env.get(k).map_or("", String::as_str)))
        }
        "mustEnv" => {
            arity(f, args, 1, 1)?;
            let k = str_arg(f, args, 0)?;
            scope
                .env
                .get(k)
                .map(|v| values::string(v.as_str()))
                .ok_or_else(|| fn_err(f, format!("environment variable {k:?} is not set")))
        }
        _ => {
            arity(f, args, 2, 2)?;
            let k = str_arg(f, args, 0)?;
            let d = str_arg(f, args, 1)?;
            Ok(values::string(scope.env.get(k).map_or(d, String::as_str)))
        }
    }
}

fn execute_template(scope: &RenderScope, args: &[Value]) -> FnResult {
    const F: &str = "executeTemplate";
    arity(F, args, 1, 2)?;
    let name = str_arg(F, args, 0)?;
    let data = args.get(1).cloned().unwrap_or(Value::Nil);
    let template = scope
        .template
        .get()
        .and_then(Weak::upgrade)
        .ok_or_else(|| fn_err(F, "no template is being rendered"))?;
    if scope.nested.fetch_add(1, Ordering::SeqCst) >= MAX_NESTED {
        scope.nested.fetch_sub(1, Ordering::SeqCst);
        return Err(fn_err(F, format!("calls nest deeper than {MAX_NESTED}")));
    }
    let out = template.execute_template_to_string(name, &data);
    scope.nested.fetch_sub(1, Ordering::SeqCst);
    // An inner function's error passes through as it is, not wrapped once per nesting level.
    out.map(values::string).map_err(|e| match e {
        gotmpl::TemplateError::Exec(_) => e,
        other => fn_err(F, other),
    })
}

/// The functions bound to one render's scope.
pub(crate) fn funcs(scope: &Arc<RenderScope>) -> FuncMap {
    let mut m = FuncMap::new();
    let mut add = |name: &str, f: fn(&RenderScope, &[Value]) -> FnResult| {
        let s = Arc::clone(scope);
        m.insert(
            name.to_string(),
            Arc::new(move |args: &[Value]| f(&s, args)),
        );
    };
    add("nomadVar", nomad_var);
    add("nomadVarExists", nomad_var_exists);
    add("nomadVarList", |s, a| nomad_var_list(s, a, false));
    add("nomadVarListSafe", |s, a| nomad_var_list(s, a, true));
    add("nomadService", nomad_service);
    add("nomadServices", nomad_services);
    add("env", |s, a| env(s, a, "env"));
    add("mustEnv", |s, a| env(s, a, "mustEnv"));
    add("envOrDefault", |s, a| env(s, a, "envOrDefault"));
    add("executeTemplate", execute_template);
    m
}
