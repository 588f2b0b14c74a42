//! The task runner's artifact step: every artifact of the task fetched
//! before its first start, and not again on a restart of the same alloc.

use std::path::PathBuf;
use std::sync::Arc;

use caravan_proto::{Task, TaskEvent};
use futures::future::BoxFuture;

use super::ArtifactFetcher;
use crate::alloc_dir::TaskDirs;
use crate::prestart::{HookFailure, PrestartCtx, PrestartHook};
use crate::task_env::TaskEnv;
use crate::task_runner::event;

/// Event recorded before the downloads start.
pub const EVENT_DOWNLOADING: &str = "Downloading Artifacts";
/// Event recorded when one fails (the restart policy then decides).
pub const EVENT_DOWNLOAD_FAILED: &str = "Failed Artifact Download";

/// Fetches a task's artifacts into its directory before it starts.
#[derive(Debug, Clone)]
pub struct ArtifactHook {
    fetcher: Arc<ArtifactFetcher>,
}

impl ArtifactHook {
    /// A hook fetching through `fetcher` (one per node: it holds the HTTP
    /// client and the limits).
    pub fn new(fetcher: Arc<ArtifactFetcher>) -> ArtifactHook {
        ArtifactHook { fetcher }
    }

    /// Fetches `task`'s artifacts into `dirs` unless an earlier start of
    /// this alloc did; the error is the failed artifact's message.
    pub async fn fetch_all(
        &self,
        task: &Task,
        dirs: Option<&TaskDirs>,
        env: Option<&TaskEnv>,
        user: &str,
        events: &mut (dyn FnMut(TaskEvent) + Send),
    ) -> Result<(), String> {
        // Tasks of drivers that run nothing (simulated nodes) have no
        // directory to fetch into.
        let Some(dirs) = dirs else { return Ok(()) };
        if task.artifacts.is_empty() {
            return Ok(());
        }
        let marker = done_marker(dirs, &task.name);
        if marker.exists() {
            return Ok(());
        }
        events(event(EVENT_DOWNLOADING, "Client is downloading artifacts"));
        for artifact in &task.artifacts {
            self.fetcher
                .fetch(artifact, &dirs.task_dir, env, user)
                .await
                .map_err(|e| format!("failed to download artifact {:?}: {e}", artifact.source))?;
        }
        tokio::fs::write(&marker, b"").await.map_err(|e| {
            format!(
                "recording the artifacts as fetched in {}: {e}",
                marker.display()
            )
        })?;
        Ok(())
    }
}

impl PrestartHook for ArtifactHook {
    fn name(&self) -> &'static str {
        "artifacts"
    }

    fn prestart<'a>(
        &'a self,
        ctx: &'a mut PrestartCtx<'_>,
    ) -> BoxFuture<'a, Result<(), HookFailure>> {
        Box::pin(async move {
            let spec = &*ctx.spec;
            self.fetch_all(
                ctx.task,
                spec.dirs.as_ref(),
                spec.env.as_ref(),
                &spec.user,
                &mut *ctx.events,
            )
            .await
            .map_err(|message| HookFailure {
                event_type: EVENT_DOWNLOAD_FAILED.to_string(),
                message,
                // A server may be back, a file replaced: the restart
                // policy decides whether to try again.
                recoverable: true,
            })
        })
    }
}

/// Marks a task's artifacts fetched for the life of its alloc directory:
/// next to the task's directory (not in it, where the task could remove
/// it), and surviving a client restart as the directory does.
fn done_marker(dirs: &TaskDirs, task: &str) -> PathBuf {
    dirs.exit_record
        .with_file_name(format!(".{task}.artifacts.done"))
}
