//! The identity prestart hook: before each start of a task, the servers
//! sign its workload identities (the `default` one, which the task's
//! templates read Variables and services with, and every one its job
//! declares). Each token goes to the hooks after this one, and where the
//! job asks, to the task: `env = true` sets `NOMAD_TOKEN` (the default
//! identity) or `NOMAD_TOKEN_<name>`; `file = true` writes
//! `secrets/nomad_token` or `secrets/nomad_<name>.jwt`, readable by the
//! task's user only. Without servers to ask (simulated nodes, unit tests)
//! it does nothing.
//!
//! Identities with a `ttl` are signed again at half their life while the
//! task runs: a file is rewritten in place, then `change_mode = "restart"`
//! restarts the task (whose next start gets fresh tokens everywhere) and
//! `signal` sends the running task its `change_signal`.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use caravan_proto::{Task, WorkloadIdentity};
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::Code;

use crate::driver::parse_signal;
use crate::driver::task_user;
use crate::node_api::NodeApi;
use crate::prestart::{HookFailure, PrestartCtx, PrestartHook};
use crate::task_runner::TaskControl;
use crate::template::change::{ChangedBy, FileChange, TemplateChange};

/// The identity every task has.
pub const DEFAULT_IDENTITY: &str = "default";

/// The task event of a hook that failed, as Nomad records it.
const HOOK_FAILED: &str = "Task hook failed";

/// Shortest wait before signing again, and between tries after an outage.
const MIN_RENEW_WAIT: Duration = Duration::from_secs(1);

/// Longest wait between tries after an outage.
const RETRY_WAIT: Duration = Duration::from_secs(5);

/// Signs a task's identities before each start.
#[derive(Debug, Default)]
pub struct IdentityHook {
    /// Ends the renewals of the previous start.
    renewal: parking_lot::Mutex<Option<CancellationToken>>,
}

impl IdentityHook {
    /// The hook for `task`, when anything of it reads a token: identities
    /// of its own, or templates (which read Variables and services with the
    /// default one). Other tasks start without a call to the servers.
    pub fn for_task(task: &Task) -> Option<Arc<dyn PrestartHook>> {
        (!task.identities.is_empty() || !task.templates.is_empty())
            .then(|| Arc::new(IdentityHook::default()) as Arc<dyn PrestartHook>)
    }
}

/// The identities to sign for `task`: the default one, then the others it
/// declares, each once.
pub fn identity_names(task: &Task) -> Vec<String> {
    let mut names = vec![DEFAULT_IDENTITY.to_string()];
    for identity in &task.identities {
        if !names.contains(&identity.name) {
            names.push(identity.name.clone());
        }
    }
    names
}

/// The variable an identity's token is given to the task in.
pub fn env_name(identity: &str) -> String {
    if identity == DEFAULT_IDENTITY {
        "NOMAD_TOKEN".into()
    } else {
        format!("NOMAD_TOKEN_{identity}")
    }
}

/// The file, under the task's secrets dir, an identity's token is written to.
pub fn file_name(identity: &str) -> String {
    if identity == DEFAULT_IDENTITY {
        "nomad_token".into()
    } else {
        format!("nomad_{identity}.jwt")
    }
}

fn failed(message: String, recoverable: bool) -> HookFailure {
    HookFailure {
        event_type: HOOK_FAILED.into(),
        message,
        recoverable,
    }
}

/// Whether asking again later may get the tokens: the servers could not
/// be reached or were busy; not when they refused (a stopped alloc, a task
/// or identity its job does not have).
fn retryable(code: Code) -> bool {
    matches!(
        code,
        Code::Unavailable
            | Code::DeadlineExceeded
            | Code::ResourceExhausted
            | Code::Aborted
            | Code::Internal
            | Code::Unknown
            | Code::Cancelled
    )
}

/// Writes `token` to `path` readable and writable by its owner only (then
/// given to `user`, when the task runs as another), replacing it whole.
fn write_token(path: &Path, token: &str, user: &str) -> Result<(), String> {
    let partial = path.with_extension("partial");
    let write = || -> std::io::Result<()> {
        let _ = std::fs::remove_file(&partial);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&partial)?;
        file.write_all(token.as_bytes())?;
        file.sync_all()
    };
    write().map_err(|e| format!("writing {}: {e}", partial.display()))?;
    if let Some(owner) = task_user::resolve(user).map_err(|e| e.to_string())?
        && owner.switch
    {
        task_user::hand_over(&owner, &[partial.as_path()]).map_err(|e| e.to_string())?;
    }
    std::fs::rename(&partial, path).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// Gives the task `token` of `identity` as the job asks.
fn deliver(
    ctx: &mut PrestartCtx<'_>,
    identity: &WorkloadIdentity,
    token: &str,
) -> Result<(), HookFailure> {
    if identity.env
        && let Some(env) = ctx.spec.env.as_mut()
    {
        env.set(env_name(&identity.name), token.to_string());
    }
    if identity.file
        && let Some(dirs) = ctx.spec.dirs.as_ref()
    {
        let path = dirs.secrets_dir.join(file_name(&identity.name));
        write_token(&path, token, &ctx.spec.user).map_err(|e| {
            failed(
                format!(
                    "failed to write the token of identity {:?}: {e}",
                    identity.name
                ),
                true,
            )
        })?;
    }
    Ok(())
}

impl PrestartHook for IdentityHook {
    fn name(&self) -> &'static str {
        "identity"
    }

    fn prestart<'a>(
        &'a self,
        ctx: &'a mut PrestartCtx<'_>,
    ) -> BoxFuture<'a, Result<(), HookFailure>> {
        async move {
            let Some(api) = ctx.api else {
                return Ok(());
            };
            let names = identity_names(ctx.task);
            let signed = api
                .sign_identities(&ctx.alloc.id, &ctx.task.name, &names)
                .await
                .map_err(|status| {
                    failed(
                        format!("failed to sign workload identities: {}", status.message()),
                        retryable(status.code()),
                    )
                })?;
            for (name, token) in signed {
                let declared = ctx.task.identities.iter().find(|i| i.name == name).cloned();
                if let Some(identity) = declared {
                    deliver(ctx, &identity, &token)?;
                }
                ctx.tokens.insert(name, token);
            }
            let stop = CancellationToken::new();
            if let Some(previous) = self.renewal.lock().replace(stop.clone()) {
                previous.cancel();
            }
            let expiring: Vec<WorkloadIdentity> = ctx
                .task
                .identities
                .iter()
                .filter(|i| i.ttl_ns > 0)
                .cloned()
                .collect();
            if !expiring.is_empty() {
                tokio::spawn(renew(Renewal {
                    api: api.clone(),
                    alloc_id: ctx.alloc.id.clone(),
                    task: ctx.task.name.clone(),
                    identities: expiring,
                    secrets_dir: ctx.spec.dirs.as_ref().map(|d| d.secrets_dir.clone()),
                    user: ctx.spec.user.clone(),
                    control: ctx.control.clone(),
                    stop,
                }));
            }
            Ok(())
        }
        .boxed()
    }
}

/// What renewing one start's expiring identities needs.
struct Renewal {
    api: NodeApi,
    alloc_id: String,
    task: String,
    identities: Vec<WorkloadIdentity>,
    secrets_dir: Option<PathBuf>,
    user: String,
    control: mpsc::UnboundedSender<TaskControl>,
    stop: CancellationToken,
}

/// Half the shortest lifetime of `identities`, at least [`MIN_RENEW_WAIT`].
fn renew_wait(identities: &[WorkloadIdentity]) -> Duration {
    let shortest = identities
        .iter()
        .map(|i| i.ttl_ns.max(0) as u64)
        .filter(|ttl| *ttl > 0)
        .min()
        .unwrap_or(0);
    Duration::from_nanos(shortest / 2).max(MIN_RENEW_WAIT)
}

/// Signs `r.identities` again at half their life until this start's run
/// ends (a new start, the runner gone, the servers refusing); a restart
/// asked for ends it too, the next start renewing afresh.
async fn renew(r: Renewal) {
    let names: Vec<String> = r.identities.iter().map(|i| i.name.clone()).collect();
    let mut wait = renew_wait(&r.identities);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = r.stop.cancelled() => return,
            _ = r.control.closed() => return,
        }
        let signed = match r.api.sign_identities(&r.alloc_id, &r.task, &names).await {
            Ok(signed) => signed,
            Err(status) if retryable(status.code()) => {
                tracing::debug!(alloc = %r.alloc_id, task = %r.task, %status, "renewing identities failed; trying again");
                wait = RETRY_WAIT.min(renew_wait(&r.identities));
                continue;
            }
            Err(status) => {
                tracing::debug!(alloc = %r.alloc_id, task = %r.task, %status, "identities no longer renewed");
                return;
            }
        };
        if r.stop.is_cancelled() {
            return;
        }
        for (name, token) in &signed {
            let Some(identity) = r.identities.iter().find(|i| &i.name == name) else {
                continue;
            };
            if identity.file
                && let Some(dir) = &r.secrets_dir
                && let Err(err) = write_token(&dir.join(file_name(name)), token, &r.user)
            {
                tracing::warn!(alloc = %r.alloc_id, task = %r.task, identity = %name, %err, "cannot rewrite a renewed identity token");
            }
        }
        if r.identities.iter().any(|i| i.change_mode == "restart") {
            let _ = r
                .control
                .send(TaskControl::FileChanged(Box::new(FileChange {
                    by: ChangedBy::Identity,
                    action: TemplateChange::Restart,
                })));
            return;
        }
        let mut sent = Vec::new();
        for identity in r.identities.iter().filter(|i| i.change_mode == "signal") {
            match parse_signal(&identity.change_signal) {
                Ok(signal) if !sent.contains(&signal) => {
                    sent.push(signal);
                    let _ = r
                        .control
                        .send(TaskControl::FileChanged(Box::new(FileChange {
                            by: ChangedBy::Identity,
                            action: TemplateChange::Signal(signal),
                        })));
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(alloc = %r.alloc_id, task = %r.task, identity = %identity.name, error = %e, "identity change_signal");
                }
            }
        }
        wait = renew_wait(&r.identities);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn task(identities: &[(&str, bool, bool)]) -> Task {
        Task {
            name: "t".into(),
            identities: identities
                .iter()
                .map(|(name, env, file)| WorkloadIdentity {
                    name: (*name).into(),
                    env: *env,
                    file: *file,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn renewals_come_at_half_the_shortest_life() {
        let mut ids = task(&[("a", false, true), ("b", false, true)]).identities;
        ids[0].ttl_ns = 60_000_000_000;
        ids[1].ttl_ns = 20_000_000_000;
        assert_eq!(renew_wait(&ids), Duration::from_secs(10));
        ids[1].ttl_ns = 1_000;
        assert_eq!(renew_wait(&ids), MIN_RENEW_WAIT);
    }

    #[test]
    fn the_default_identity_comes_first_and_once() {
        assert_eq!(identity_names(&task(&[])), ["default"]);
        assert_eq!(
            identity_names(&task(&[("vault", true, false), ("default", true, true)])),
            ["default", "vault"]
        );
    }

    #[test]
    fn tokens_are_named_as_nomad_names_them() {
        assert_eq!(env_name("default"), "NOMAD_TOKEN");
        assert_eq!(env_name("vault"), "NOMAD_TOKEN_vault");
        assert_eq!(file_name("default"), "nomad_token");
        assert_eq!(file_name("vault"), "nomad_vault.jwt");
    }

    #[test]
    fn only_tasks_that_read_a_token_get_the_hook() {
        assert!(IdentityHook::for_task(&task(&[])).is_none());
        assert!(IdentityHook::for_task(&task(&[("default", false, false)])).is_some());
        let templated = Task {
            templates: vec![Default::default()],
            ..task(&[])
        };
        assert!(IdentityHook::for_task(&templated).is_some());
    }

    #[test]
    fn refusals_are_final_and_outages_are_retried() {
        assert!(retryable(Code::Unavailable) && retryable(Code::DeadlineExceeded));
        assert!(!retryable(Code::PermissionDenied) && !retryable(Code::InvalidArgument));
        assert!(!retryable(Code::NotFound));
    }

    #[test]
    fn a_token_file_is_the_owners_only_and_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nomad_token");
        write_token(&path, "first.token.here", "").unwrap();
        write_token(&path, "a.b.c", "").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a.b.c");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!path.with_extension("partial").exists());
    }
}
