//! `var lock`: holds a lock in a variable while a child process runs, over
//! Nomad's lock API (`PUT /v1/var/<path>?lock-acquire|lock-renew|lock-release`,
//! Nomad's HTTP API only): the lock is taken (or waited for), renewed at
//! 0.7 × its TTL while the child runs, given up when the child ends, and the
//! child killed if a renewal fails.

use std::time::Duration;

use serde_json::{Value, json};

use crate::api::Api;
use crate::args::VarLockArgs;
use crate::backend::{Method, NomadCall};
use crate::error::CliError;
use crate::ui::Ui;

type Result<T> = std::result::Result<T, CliError>;

/// Nomad's default lock TTL and delay.
const DEFAULT_TTL: &str = "15s";

/// What the lock is taken on.
#[derive(Debug, Clone, PartialEq)]
struct LockSpec {
    /// The variable, as Nomad's API takes it (with its `Lock`).
    variable: Value,
    /// Its path.
    path: String,
    /// The lock's TTL.
    ttl: Duration,
    /// The child's command line.
    child: Vec<String>,
}

fn duration(flag: &str, text: &str) -> Result<Duration> {
    let ns = caravan_jobspec::parse_duration(text)
        .map_err(|e| CliError::Usage(format!("Invalid {flag}: {e}")))?;
    u64::try_from(ns)
        .ok()
        .filter(|ns| *ns > 0)
        .map(Duration::from_nanos)
        .ok_or_else(|| CliError::Usage(format!("Invalid {flag}: must be positive")))
}

/// Reads `<path> [@spec] child…` or `@spec child…`.
fn lock_spec(args: &VarLockArgs, namespace: &str) -> Result<LockSpec> {
    let mut rest = args.args.iter();
    let first = rest
        .next()
        .ok_or_else(|| CliError::Usage("Not enough arguments (expected >2, got 0)".into()))?;
    let read_spec = |file: &str| -> Result<Value> {
        let text = std::fs::read_to_string(file).map_err(|e| CliError::ReadFile {
            path: file.to_string(),
            message: e.to_string(),
        })?;
        serde_json::from_str(&text).map_err(|e| CliError::JobFile {
            path: file.to_string(),
            message: format!("Failed to parse variable data: {e}"),
        })
    };
    let mut remaining: Vec<String> = rest.cloned().collect();
    let (mut variable, path) = match first.strip_prefix('@') {
        Some(file) => {
            let variable = read_spec(file)?;
            let path = variable["Path"].as_str().unwrap_or_default().to_string();
            (variable, path)
        }
        None => {
            let path = first.trim_start_matches('/').to_string();
            let variable = match remaining.first().and_then(|a| a.strip_prefix('@')) {
                Some(file) => {
                    let variable = read_spec(file)?;
                    remaining.remove(0);
                    variable
                }
                None => json!({}),
            };
            (variable, path)
        }
    };
    if path.is_empty() {
        return Err(CliError::Usage("variable's path can't be empty".into()));
    }
    if remaining.is_empty() {
        return Err(CliError::Usage(
            "Not enough arguments: give the command to run while the lock is held".into(),
        ));
    }
    if !variable.is_object() {
        return Err(CliError::Usage(
            "Failed to parse variable data: a variable specification is a JSON object".into(),
        ));
    }
    let lock = variable.get("Lock").cloned().unwrap_or(json!({}));
    let ttl_text = args
        .ttl
        .clone()
        .or_else(|| lock["TTL"].as_str().map(str::to_string))
        .unwrap_or_else(|| DEFAULT_TTL.to_string());
    let delay_text = args
        .delay
        .clone()
        .or_else(|| lock["LockDelay"].as_str().map(str::to_string))
        .unwrap_or_else(|| DEFAULT_TTL.to_string());
    let ttl = duration("TTL", &ttl_text)?;
    duration("Lock Delay", &delay_text)?;
    variable["Path"] = json!(path);
    if variable["Namespace"].as_str().is_none_or(str::is_empty) {
        variable["Namespace"] = json!(namespace);
    }
    variable["Lock"] = json!({ "TTL": ttl_text, "LockDelay": delay_text });
    Ok(LockSpec {
        variable,
        path,
        ttl,
        child: remaining,
    })
}

/// The child's command: through `$SHELL -c` (or `/bin/sh`), or directly.
fn child_command(child: &[String], shell: bool) -> Result<tokio::process::Command> {
    if shell {
        let sh = std::env::var("SHELL")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "/bin/sh".into());
        let mut cmd = tokio::process::Command::new(sh);
        cmd.arg("-c").arg(child.join(" "));
        return Ok(cmd);
    }
    let (program, args) = child
        .split_first()
        .ok_or_else(|| CliError::Usage("need an executable to run".into()))?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args);
    Ok(cmd)
}

/// One lock call; `Ok(None)` when another holder has the lock (409).
async fn lock_call(api: &Api, spec: &LockSpec, op: &str, body: Value) -> Result<Option<Value>> {
    let path = format!("/v1/var/{}", spec.path);
    let namespace = spec.variable["Namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let call = NomadCall::write(Method::Put, path, Some(body))
        .param(op, "")
        .param("namespace", namespace);
    match api.nomad("Lock error", call).await {
        Ok(v) => Ok(Some(v.unwrap_or(Value::Null))),
        Err(CliError::Api {
            code: tonic::Code::Aborted | tonic::Code::FailedPrecondition,
            ..
        }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `var lock`.
pub async fn lock(api: &Api, ui: &mut Ui, args: VarLockArgs) -> Result<u8> {
    if api.namespace() == "*" {
        return Err(CliError::Usage(
            "The wildcard namespace (\"*\") is not valid for this command".into(),
        ));
    }
    let spec = lock_spec(&args, api.namespace())?;
    let say = |ui: &mut Ui, text: &str| {
        if args.verbose {
            ui.error(text);
        }
    };
    if !api.speaks_http() {
        return Err(CliError::Usage(
            "var lock needs Nomad's HTTP API: set -address (or NOMAD_ADDR) to the gateway's \
             http:// address"
                .into(),
        ));
    }
    let wait = match &args.backoff {
        Some(b) => duration("-backoff", b)?,
        None => spec.ttl.mul_f64(1.1),
    };
    say(ui, "Attempting to acquire lock");
    let lock_id = loop {
        let acquired = lock_call(api, &spec, "lock-acquire", spec.variable.clone()).await?;
        match acquired {
            Some(v) => {
                let id = v["Lock"]["ID"].as_str().unwrap_or_default().to_string();
                if id.is_empty() {
                    return Err(CliError::Other(
                        "Lock error: the gateway answered without a lock ID".into(),
                    ));
                }
                break id;
            }
            None if args.early_return => {
                say(ui, "The lock is held elsewhere; returning early");
                return Ok(0);
            }
            None => tokio::time::sleep(wait).await,
        }
    };
    let mut held = spec.variable.clone();
    held["Lock"]["ID"] = json!(lock_id);
    say(
        ui,
        &format!(
            "Variable locked, ready to execute: {}",
            spec.child.join(" ")
        ),
    );
    let mut child = child_command(&spec.child, args.shell)?
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| CliError::Other(format!("Lock error: cannot start the command: {e}")))?;
    let renew_every = spec.ttl.mul_f64(0.7);
    let mut failures = 0u32;
    let outcome = loop {
        tokio::select! {
            status = child.wait() => break status.map_err(|e| CliError::Other(format!("Lock error: {e}"))),
            () = tokio::time::sleep(renew_every) => {
                match lock_call(api, &spec, "lock-renew", held.clone()).await {
                    Ok(Some(_)) => failures = 0,
                    Ok(None) => {
                        let _ = child.kill().await;
                        break Err(CliError::Other("Lock error: the lock was lost (renew conflict)".into()));
                    }
                    Err(e) => {
                        failures += 1;
                        if failures > args.max_retry {
                            let _ = child.kill().await;
                            break Err(CliError::Other(format!("Lock error: renewing the lease: {e}")));
                        }
                    }
                }
            }
        }
    };
    say(ui, "Releasing the lock");
    let released = lock_call(
        api,
        &spec,
        "lock-release",
        json!({ "Path": spec.path, "Lock": { "ID": lock_id } }),
    )
    .await;
    match (outcome, released) {
        (Ok(status), Ok(_)) if status.success() => Ok(0),
        (Ok(status), Ok(_)) => Err(CliError::Other(format!(
            "Lock error: error executing protected function {status}"
        ))),
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => Err(CliError::Other(format!("Lock error: lock release: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> VarLockArgs {
        VarLockArgs {
            verbose: false,
            ttl: None,
            delay: None,
            shell: true,
            early_return: false,
            max_retry: 5,
            backoff: None,
            args: list.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn the_lock_takes_nomads_defaults_and_the_child_follows_the_path() {
        let spec = lock_spec(&args(&["locks/db", "echo", "-n", "hi"]), "default").unwrap();
        assert_eq!(spec.path, "locks/db");
        assert_eq!(spec.child, ["echo", "-n", "hi"]);
        assert_eq!(spec.ttl, Duration::from_secs(15));
        assert_eq!(
            spec.variable,
            json!({"Path": "locks/db", "Namespace": "default",
                   "Lock": {"TTL": "15s", "LockDelay": "15s"}})
        );
        let mut a = args(&["locks/db", "true"]);
        a.ttl = Some("1m".into());
        assert_eq!(lock_spec(&a, "prod").unwrap().ttl, Duration::from_secs(60));
        a.ttl = Some("soon".into());
        assert!(lock_spec(&a, "prod").is_err());
        assert!(lock_spec(&args(&["locks/db"]), "default").is_err());
    }

    #[test]
    fn specifications_name_the_path_and_lock() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("lock.json");
        std::fs::write(
            &file,
            r#"{"Path": "locks/x", "Items": {"k": "v"}, "Lock": {"TTL": "30s"}}"#,
        )
        .unwrap();
        let at = format!("@{}", file.display());
        let spec = lock_spec(&args(&[&at, "true"]), "default").unwrap();
        assert_eq!(spec.path, "locks/x");
        assert_eq!(spec.ttl, Duration::from_secs(30));
        assert_eq!(spec.variable["Items"]["k"], "v");
    }

    #[test]
    fn children_run_through_the_shell_or_directly() {
        let direct = child_command(&["echo".into(), "a b".into()], false).unwrap();
        assert_eq!(direct.as_std().get_program(), "echo");
        let shell = child_command(&["echo".into(), "hi".into()], true).unwrap();
        let args: Vec<_> = shell.as_std().get_args().collect();
        assert_eq!(args, ["-c", "echo hi"]);
    }
}
