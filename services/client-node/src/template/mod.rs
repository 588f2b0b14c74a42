//! A task's `template` blocks: rendered before each start (the task starts
//! only once every template has rendered, or fails when they cannot within
//! the client's `template_render_timeout_ms`), re-rendered when what they
//! read changes, with each changed template's `change_mode` applied to the
//! running task.

pub mod change;
mod files;
mod services;
mod source;
mod watch;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use caravan_proto::{Task, Template};
use caravan_template::{Context, Dep};
use futures::FutureExt;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use rand::Rng;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::alloc_dir::TaskDirs;
use crate::driver::parse_signal;
use crate::node_api::NodeApi;
use crate::prestart::{HookConfig, HookFailure, PrestartCtx, PrestartHook};
use crate::task_runner::TaskControl;
use change::{ChangedBy, FileChange, TemplateChange};
use watch::Watcher;

/// The event of a hook that failed.
pub const TASK_HOOK_FAILED: &str = "Task hook failed";

/// A re-render waits this long for quiet, unless the template says.
const DEFAULT_WAIT: (Duration, Duration) = (Duration::from_secs(5), Duration::from_secs(240));

/// The template hook of one task.
#[derive(Debug)]
pub struct TemplateHook {
    specs: Vec<Template>,
    render_timeout: Duration,
    running: Mutex<Option<Running>>,
}

/// What keeps the templates fresh once they first rendered.
#[derive(Debug)]
struct Running {
    watcher: Arc<Watcher>,
    applier: Option<JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(a) = &self.applier {
            a.abort();
        }
    }
}

/// One template ready to render: its text parsed, where it goes.
#[derive(Debug, Clone)]
struct Prepared {
    spec: Template,
    parsed: Arc<caravan_template::Template>,
    destination: std::path::PathBuf,
    mode: u32,
}

fn failure(message: String) -> HookFailure {
    HookFailure {
        event_type: TASK_HOOK_FAILED.into(),
        message,
        recoverable: false,
    }
}

/// How a dependency is named in messages.
fn describe(dep: &Dep) -> String {
    match dep {
        Dep::Var { namespace, path } => format!("nomad.var.block({path}@{namespace})"),
        Dep::VarList { namespace, prefix } => format!("nomad.var.list({prefix}@{namespace})"),
        Dep::Service {
            namespace,
            name,
            tag,
        } => match tag {
            Some(t) => format!("nomad.service({t}.{name}@{namespace})"),
            None => format!("nomad.service({name}@{namespace})"),
        },
        Dep::Services { namespace } => format!("nomad.services(@{namespace})"),
    }
}

/// The outcome of rendering every template once.
struct Pass {
    texts: Vec<Option<String>>,
    deps: BTreeSet<Dep>,
    waiting: BTreeSet<Dep>,
}

fn render_all(
    prepared: &[Prepared],
    env: &BTreeMap<String, String>,
    namespace: &str,
    data: &BTreeMap<Dep, caravan_template::DepValue>,
) -> Result<Pass, String> {
    let mut pass = Pass {
        texts: Vec::with_capacity(prepared.len()),
        deps: BTreeSet::new(),
        waiting: BTreeSet::new(),
    };
    for (i, p) in prepared.iter().enumerate() {
        let ctx = Context {
            env,
            namespace,
            data,
            error_on_missing_key: p.spec.error_on_missing_key,
        };
        let r = caravan_template::render(&p.parsed, &ctx)
            .map_err(|e| format!("template {i} ({}): {e}", p.spec.destination))?;
        if r.text.is_none() {
            // Waiting on what is missing, or on what does not exist yet.
            let blocked: Vec<&Dep> = if r.missing.is_empty() {
                r.deps.iter().collect()
            } else {
                r.missing.iter().collect()
            };
            pass.waiting.extend(blocked.into_iter().cloned());
        }
        pass.deps.extend(r.deps);
        pass.texts.push(r.text);
    }
    Ok(pass)
}

impl TemplateHook {
    /// The hook of `task`'s templates.
    pub fn new(task: &Task, config: &HookConfig) -> Self {
        TemplateHook {
            specs: task.templates.clone(),
            render_timeout: config.template_render_timeout,
            running: Mutex::new(None),
        }
    }

    fn prepare(
        &self,
        dirs: &TaskDirs,
        env: &crate::task_env::TaskEnv,
    ) -> Result<Vec<Prepared>, String> {
        let root = dirs.alloc_dir.parent().unwrap_or(&dirs.alloc_dir);
        self.specs
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let what = |e: String| format!("template {i}: {e}");
                let text = if t.source.is_empty() {
                    t.data.clone()
                } else {
                    let src =
                        files::resolve_within(root, &dirs.task_dir, &env.interpolate(&t.source))
                            .map_err(|e| what(format!("source {e}")))?;
                    std::fs::read_to_string(&src)
                        .map_err(|e| what(format!("reading source {}: {e}", src.display())))?
                };
                let (left, right) = (
                    if t.left_delimiter.is_empty() {
                        "{{"
                    } else {
                        &t.left_delimiter
                    },
                    if t.right_delimiter.is_empty() {
                        "}}"
                    } else {
                        &t.right_delimiter
                    },
                );
                let parsed =
                    caravan_template::parse(&text, left, right).map_err(|e| what(e.to_string()))?;
                let destination =
                    files::resolve_within(root, &dirs.task_dir, &env.interpolate(&t.destination))
                        .map_err(|e| what(format!("destination {e}")))?;
                Ok(Prepared {
                    spec: t.clone(),
                    parsed: Arc::new(parsed),
                    destination,
                    mode: files::mode(&t.perms).map_err(what)?,
                })
            })
            .collect()
    }

    /// The watcher, made at the first start.
    fn watcher(&self, api: Option<&NodeApi>, token: Option<&String>) -> Option<Arc<Watcher>> {
        let mut running = self.running.lock();
        if let Some(r) = running.as_ref() {
            return Some(Arc::clone(&r.watcher));
        }
        let watcher = Arc::new(Watcher::new(Arc::new(api?.clone()), token.cloned()));
        *running = Some(Running {
            watcher: Arc::clone(&watcher),
            applier: None,
        });
        Some(watcher)
    }

    async fn first_render(&self, ctx: &mut PrestartCtx<'_>) -> Result<(), HookFailure> {
        let Some(dirs) = ctx.spec.dirs.clone() else {
            return Err(failure("Template failed: the task has no directory".into()));
        };
        let env_vars = ctx
            .spec
            .env
            .as_ref()
            .map(|e| e.vars().clone())
            .unwrap_or_default();
        let prepared = match &ctx.spec.env {
            Some(env) => self.prepare(&dirs, env),
            None => self.prepare(&dirs, &crate::task_env::TaskEnv::empty()),
        }
        .map_err(|e| failure(format!("Template failed: {e}")))?;
        let namespace = ctx.alloc.namespace.clone();
        let watcher = self.watcher(ctx.api, ctx.tokens.get("default"));
        let deadline = tokio::time::Instant::now() + self.render_timeout;
        let mut changes = watcher.as_ref().map(|w| w.cache().subscribe());
        let texts = loop {
            let data = watcher
                .as_ref()
                .map(|w| w.cache().snapshot())
                .unwrap_or_default();
            let pass = render_all(&prepared, &env_vars, &namespace, &data)
                .map_err(|e| failure(format!("Template failed: {e}")))?;
            if let Some(w) = &watcher {
                w.watch(&pass.deps);
            }
            if pass.waiting.is_empty() {
                break pass.texts;
            }
            let (Some(w), Some(rx)) = (&watcher, changes.as_mut()) else {
                return Err(failure(
                    "Template failed: no servers to read its data from".into(),
                ));
            };
            tokio::select! {
                r = rx.changed() => if r.is_err() { return Err(failure("Template failed: watcher stopped".into())) },
                () = tokio::time::sleep_until(deadline) => {
                    let missing: Vec<String> = pass.waiting.iter().map(|d| match w.cache().error(d) {
                        Some(e) => format!("{} ({e})", describe(d)),
                        None => describe(d),
                    }).collect();
                    return Err(failure(format!(
                        "Template failed: not rendered within {}; missing: {}",
                        caravan_jobspec::format_duration(i64::try_from(self.render_timeout.as_nanos()).unwrap_or(i64::MAX)),
                        missing.join(", ")
                    )));
                }
            }
        };
        for (p, text) in prepared.iter().zip(&texts) {
            let text = text.as_deref().unwrap_or_default();
            files::write(&p.destination, text, p.mode, p.spec.uid, p.spec.gid).map_err(|e| {
                failure(format!(
                    "Template failed: writing {}: {e}",
                    p.destination.display()
                ))
            })?;
            if p.spec.env {
                let vars = files::parse_env(text).map_err(|e| {
                    failure(format!("Template failed: {}: {e}", p.spec.destination))
                })?;
                if let Some(env) = ctx.spec.env.as_mut() {
                    for (k, v) in vars {
                        env.set(k, v);
                    }
                }
            }
        }
        if let Some(w) = watcher {
            self.start_applier(w, prepared, env_vars, namespace, texts, ctx.control.clone());
        }
        Ok(())
    }

    /// Starts re-rendering on changes, once.
    fn start_applier(
        &self,
        watcher: Arc<Watcher>,
        prepared: Vec<Prepared>,
        env: BTreeMap<String, String>,
        namespace: String,
        texts: Vec<Option<String>>,
        control: mpsc::UnboundedSender<TaskControl>,
    ) {
        let mut running = self.running.lock();
        let Some(r) = running.as_mut() else {
            return;
        };
        if r.applier.is_some() || prepared.iter().all(|p| p.spec.once) {
            return;
        }
        r.applier = Some(tokio::spawn(apply_changes(
            watcher, prepared, env, namespace, texts, control,
        )));
    }
}

impl PrestartHook for TemplateHook {
    fn name(&self) -> &'static str {
        "template"
    }

    fn prestart<'a>(
        &'a self,
        ctx: &'a mut PrestartCtx<'_>,
    ) -> BoxFuture<'a, Result<(), HookFailure>> {
        self.first_render(ctx).boxed()
    }
}

/// The quiet period of a change: the shortest `wait` of the templates.
fn quiescence(prepared: &[Prepared]) -> (Duration, Duration) {
    prepared
        .iter()
        .filter_map(|p| p.spec.wait.as_ref())
        .map(|w| {
            let d = |ns: i64| Duration::from_nanos(u64::try_from(ns).unwrap_or(0));
            (d(w.min_ns), d(w.max_ns).max(d(w.min_ns)))
        })
        .min()
        .unwrap_or(DEFAULT_WAIT)
}

/// Re-renders after each change (once it has been quiet for the wait's
/// `min`, or `max` after the first change), writes the templates whose text
/// changed and asks the task runner for their change modes.
async fn apply_changes(
    watcher: Arc<Watcher>,
    prepared: Vec<Prepared>,
    env: BTreeMap<String, String>,
    namespace: String,
    mut texts: Vec<Option<String>>,
    control: mpsc::UnboundedSender<TaskControl>,
) {
    let mut changes = watcher.cache().subscribe();
    changes.mark_unchanged();
    let (min, max) = quiescence(&prepared);
    loop {
        tokio::select! {
            r = changes.changed() => if r.is_err() { return },
            () = control.closed() => return,
        }
        let until = tokio::time::Instant::now() + max;
        loop {
            tokio::select! {
                r = changes.changed() => if r.is_err() { return },
                () = tokio::time::sleep(min) => break,
                () = tokio::time::sleep_until(until) => break,
            }
        }
        let data = watcher.cache().snapshot();
        let pass = match render_all(&prepared, &env, &namespace, &data) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "template re-render failed; keeping the files");
                continue;
            }
        };
        watcher.watch(&pass.deps);
        let mut modes = Vec::new();
        let mut splay = Duration::ZERO;
        for (i, p) in prepared.iter().enumerate() {
            let Some(new) = &pass.texts[i] else { continue };
            if p.spec.once || texts[i].as_ref() == Some(new) {
                continue;
            }
            match files::write(&p.destination, new, p.mode, p.spec.uid, p.spec.gid) {
                Ok(_) => texts[i] = Some(new.clone()),
                Err(e) => {
                    tracing::warn!(file = %p.destination.display(), error = %e, "writing a re-rendered template failed");
                    continue;
                }
            }
            splay = splay.max(Duration::from_nanos(
                u64::try_from(p.spec.splay_ns).unwrap_or(0),
            ));
            modes.push(p.spec.clone());
        }
        if modes.is_empty() {
            continue;
        }
        if !splay.is_zero() {
            let wait = rand::rng().random_range(Duration::ZERO..=splay);
            tokio::time::sleep(wait).await;
        }
        for change in changes_of(&modes) {
            if control
                .send(TaskControl::FileChanged(Box::new(FileChange {
                    by: ChangedBy::Template,
                    action: change,
                })))
                .is_err()
            {
                return;
            }
        }
    }
}

/// What the changed templates ask: one restart if any asks it (it covers
/// the rest), else each distinct signal and each script.
fn changes_of(changed: &[Template]) -> Vec<TemplateChange> {
    if changed
        .iter()
        .any(|t| t.change_mode.is_empty() || t.change_mode == "restart")
    {
        return vec![TemplateChange::Restart];
    }
    let mut out: Vec<TemplateChange> = Vec::new();
    for t in changed {
        let c = match t.change_mode.as_str() {
            "signal" => match parse_signal(&t.change_signal) {
                Ok(s) => TemplateChange::Signal(s),
                Err(e) => {
                    tracing::warn!(signal = %t.change_signal, error = %e, "template change_signal");
                    continue;
                }
            },
            "script" => match &t.change_script {
                Some(s) => TemplateChange::Script(s.clone()),
                None => continue,
            },
            _ => continue,
        };
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}
