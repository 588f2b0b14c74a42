//! A task's prestart hooks: what must be ready before each start of the
//! task — its identities, its artifacts, its rendered templates — run in
//! that order by its runner, each able to add to the task's environment
//! and to record task events as it goes. A hook that fails records why,
//! and the task's restart policy decides what follows: a recoverable
//! failure is tried again after the policy's delay, like a driver that
//! could not start the task.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use caravan_proto::{Allocation, Job, Task, TaskEvent};
use futures::future::BoxFuture;
use tokio::sync::mpsc;

use crate::driver::TaskSpec;
use crate::node_api::NodeApi;
use crate::task_runner::TaskControl;

/// What a hook sees of the task it prepares.
pub struct PrestartCtx<'a> {
    /// The task, as its job version wrote it.
    pub task: &'a Task,
    /// Its alloc.
    pub alloc: &'a Allocation,
    /// The alloc's job version.
    pub job: &'a Job,
    /// What the driver will start: its environment (`spec.env`) and
    /// directories (`spec.dirs`). A hook's changes last for this start.
    pub spec: &'a mut TaskSpec,
    /// The task's signed identities by name (`default` first), filled by
    /// the identity hook for the hooks after it.
    pub tokens: &'a mut BTreeMap<String, String>,
    /// Records a task event at once (and reports it).
    pub events: &'a mut (dyn FnMut(TaskEvent) + Send),
    /// The servers' API as this node; `None` where there are no servers
    /// to ask (unit tests).
    pub api: Option<&'a NodeApi>,
    /// Asks the task's runner for a restart or records a signal, for a hook
    /// that keeps watching after the start (a template's `change_mode`).
    pub control: &'a mpsc::UnboundedSender<TaskControl>,
}

/// Why a hook failed, and whether trying again may succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookFailure {
    /// The task event recorded (`Failed Artifact Download`…).
    pub event_type: String,
    /// What went wrong, for the event and the task's failure.
    pub message: String,
    /// A later start may succeed: the restart policy may try again.
    pub recoverable: bool,
}

/// Something a task needs before each start.
pub trait PrestartHook: Send + Sync + fmt::Debug {
    /// The hook's name, for logs.
    fn name(&self) -> &'static str;

    /// Prepares one start of the task.
    fn prestart<'a>(
        &'a self,
        ctx: &'a mut PrestartCtx<'_>,
    ) -> BoxFuture<'a, Result<(), HookFailure>>;
}

/// A task's hooks with what they read, kept by its runner.
#[derive(Debug, Clone)]
pub struct Prestart {
    /// The hooks, in the order they run.
    pub hooks: Vec<Arc<dyn PrestartHook>>,
    /// The task.
    pub task: Arc<Task>,
    /// Its alloc.
    pub alloc: Arc<Allocation>,
    /// The alloc's job version.
    pub job: Arc<Job>,
    /// The servers, as this node.
    pub api: Option<Arc<NodeApi>>,
    /// The runner's own control channel, for hooks that watch.
    pub control: mpsc::UnboundedSender<TaskControl>,
}

/// The client's settings for prestart hooks (its config file's values).
#[derive(Debug, Clone)]
pub struct HookConfig {
    /// How long a task's templates may take to render before the task fails.
    pub template_render_timeout: Duration,
    /// Fetches tasks' artifacts within the client's `[artifact]` limits
    /// (one HTTP client for the node).
    pub artifacts: Arc<crate::artifact::ArtifactFetcher>,
}

impl Default for HookConfig {
    fn default() -> Self {
        HookConfig {
            template_render_timeout: Duration::from_secs(300),
            artifacts: Default::default(),
        }
    }
}

/// The hooks `task` needs, in order; empty when it needs none (then its
/// runner starts it at once).
pub fn hooks_for(task: &Task, config: &HookConfig) -> Vec<Arc<dyn PrestartHook>> {
    let mut hooks: Vec<Arc<dyn PrestartHook>> = Vec::new();
    hooks.extend(crate::identity_hook::IdentityHook::for_task(task));
    if !task.artifacts.is_empty() {
        hooks.push(Arc::new(crate::artifact::ArtifactHook::new(Arc::clone(
            &config.artifacts,
        ))));
    }
    if !task.templates.is_empty() {
        hooks.push(Arc::new(crate::template::TemplateHook::new(task, config)));
    }
    hooks
}

impl Prestart {
    /// Runs every hook for one start of the task, on `spec`; the first
    /// failure ends the run.
    pub async fn run(
        &self,
        spec: &mut TaskSpec,
        events: &mut (dyn FnMut(TaskEvent) + Send),
    ) -> Result<(), HookFailure> {
        let mut tokens = BTreeMap::new();
        let mut ctx = PrestartCtx {
            task: &self.task,
            alloc: &self.alloc,
            job: &self.job,
            spec,
            tokens: &mut tokens,
            events,
            api: self.api.as_deref(),
            control: &self.control,
        };
        for hook in &self.hooks {
            tracing::debug!(alloc = %ctx.alloc.id, task = %ctx.task.name, hook = hook.name(), "prestart hook");
            hook.prestart(&mut ctx).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "prestart_tests.rs"]
mod tests;
