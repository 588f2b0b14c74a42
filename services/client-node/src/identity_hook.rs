//! The identity prestart hook: before each start of a task, the servers
//! sign its workload identities (the `default` one, which the task's
//! templates read Variables and services with, and every one its job
//! declares). Each token goes to the hooks after this one, and where the
//! job asks, to the task: `env = true` sets `NOMAD_TOKEN` (the default
//! identity) or `NOMAD_TOKEN_<name>`; `file = true` writes
//! `secrets/nomad_token` or `secrets/nomad_<name>.jwt`, readable by the
//! task's user only. Without servers to ask (simulated nodes, unit tests)
//! it does nothing.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

use caravan_proto::{Task, WorkloadIdentity};
use futures::FutureExt;
use futures::future::BoxFuture;
use tonic::Code;

use crate::driver::task_user;
use crate::prestart::{HookFailure, PrestartCtx, PrestartHook};

/// The identity every task has.
pub const DEFAULT_IDENTITY: &str = "default";

/// The task event of a hook that failed, as Nomad records it.
const HOOK_FAILED: &str = "Task hook failed";

/// Signs a task's identities before each start.
#[derive(Debug, Default)]
pub struct IdentityHook;

impl IdentityHook {
    /// The hook for `task`, when anything of it reads a token: identities
    /// of its own, or templates (which read Variables and services with the
    /// default one). Other tasks start without a call to the servers.
    pub fn for_task(task: &Task) -> Option<Arc<dyn PrestartHook>> {
        (!task.identities.is_empty() || !task.templates.is_empty())
            .then(|| Arc::new(IdentityHook) as Arc<dyn PrestartHook>)
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
        env.set(env_name(&identity.name), token);
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
            Ok(())
        }
        .boxed()
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
