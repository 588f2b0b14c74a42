//! `operator scheduler get-config|set-config` over Nomad's
//! `/v1/operator/scheduler/configuration` (Nomad's HTTP API only), and
//! `operator snapshot save|restore`, which Caravan refuses: its state lives
//! in etcd, whose own snapshots (`etcdctl snapshot save`) are the backup.

use serde_json::{Value, json};

use crate::api::Api;
use crate::args::{OperatorCommand, SchedulerCommand, SetConfigArgs, SnapshotCommand};
use crate::backend::{Method, NomadCall};
use crate::connection::parse_go_bool;
use crate::error::CliError;
use crate::format::{FormatArgs, kv};
use crate::ui::Ui;

type Result<T> = std::result::Result<T, CliError>;

const CONFIG_PATH: &str = "/v1/operator/scheduler/configuration";

pub(super) async fn dispatch(api: &Api, ui: &mut Ui, cmd: OperatorCommand) -> Result<u8> {
    match cmd {
        OperatorCommand::Scheduler(SchedulerCommand::GetConfig { format }) => {
            get_config(api, ui, &format).await
        }
        OperatorCommand::Scheduler(SchedulerCommand::SetConfig(args)) => {
            set_config(api, ui, &args).await
        }
        OperatorCommand::Snapshot(cmd) => {
            let verb = match cmd {
                SnapshotCommand::Save { .. } => "save",
                SnapshotCommand::Restore { .. } => "restore",
            };
            Err(CliError::Usage(format!(
                "operator snapshot {verb} is not supported by Caravan: its state is kept in \
                 etcd, so back it up and restore it with etcd's own snapshots (`etcdctl \
                 snapshot save`, `etcdutl snapshot restore`) while the services are stopped"
            )))
        }
    }
}

async fn read_config(api: &Api) -> Result<Value> {
    api.nomad_get(
        "Error querying scheduler configuration",
        NomadCall::get(CONFIG_PATH),
    )
    .await
}

/// `get-config`'s lines.
pub fn config_page(answer: &Value) -> String {
    let c = &answer["SchedulerConfig"];
    let p = &c["PreemptionConfig"];
    let text = |v: &Value| match v {
        Value::Null => "<nil>".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    kv(&[
        ("Scheduler Algorithm", text(&c["SchedulerAlgorithm"])),
        (
            "Memory Oversubscription",
            text(&c["MemoryOversubscriptionEnabled"]),
        ),
        ("Reject Job Registration", text(&c["RejectJobRegistration"])),
        ("Pause Eval Broker", text(&c["PauseEvalBroker"])),
        (
            "Preemption System Scheduler",
            text(&p["SystemSchedulerEnabled"]),
        ),
        (
            "Preemption Service Scheduler",
            text(&p["ServiceSchedulerEnabled"]),
        ),
        (
            "Preemption Batch Scheduler",
            text(&p["BatchSchedulerEnabled"]),
        ),
        (
            "Preemption SysBatch Scheduler",
            text(&p["SysBatchSchedulerEnabled"]),
        ),
        ("Modify Index", text(&c["ModifyIndex"])),
    ])
}

async fn get_config(api: &Api, ui: &mut Ui, format: &FormatArgs) -> Result<u8> {
    let answer = read_config(api).await?;
    if format.wanted() {
        ui.output(format.render(&answer)?);
    } else {
        ui.output(config_page(&answer));
    }
    Ok(0)
}

/// The configuration with the flags' values merged over `current`.
pub fn merged(current: &Value, args: &SetConfigArgs) -> Result<Value> {
    if args.node_limit_for_feasibility_checks.is_some() {
        return Err(CliError::Usage(
            "-node-limit-for-feasibility-checks is not supported by Caravan: its scheduler \
             scores a fixed number of candidates"
                .into(),
        ));
    }
    let mut config = current.clone();
    if !config.is_object() {
        config = json!({});
    }
    if let Some(algorithm) = &args.scheduler_algorithm {
        if !matches!(algorithm.as_str(), "binpack" | "spread") {
            return Err(CliError::Usage(format!(
                "Error parsing -scheduler-algorithm value {algorithm:?}: must be binpack or spread"
            )));
        }
        config["SchedulerAlgorithm"] = json!(algorithm);
    }
    let flags = [
        (
            &args.memory_oversubscription,
            "memory-oversubscription",
            "/MemoryOversubscriptionEnabled",
        ),
        (
            &args.reject_job_registration,
            "reject-job-registration",
            "/RejectJobRegistration",
        ),
        (
            &args.pause_eval_broker,
            "pause-eval-broker",
            "/PauseEvalBroker",
        ),
        (
            &args.preempt_batch_scheduler,
            "preempt-batch-scheduler",
            "/PreemptionConfig/BatchSchedulerEnabled",
        ),
        (
            &args.preempt_service_scheduler,
            "preempt-service-scheduler",
            "/PreemptionConfig/ServiceSchedulerEnabled",
        ),
        (
            &args.preempt_sysbatch_scheduler,
            "preempt-sysbatch-scheduler",
            "/PreemptionConfig/SysBatchSchedulerEnabled",
        ),
        (
            &args.preempt_system_scheduler,
            "preempt-system-scheduler",
            "/PreemptionConfig/SystemSchedulerEnabled",
        ),
    ];
    for (value, flag, pointer) in flags {
        let Some(text) = value else { continue };
        let b = parse_go_bool(text).ok_or_else(|| {
            CliError::Usage(format!(
                "invalid value {text:?} for flag -{flag}: parse error"
            ))
        })?;
        if pointer.starts_with("/PreemptionConfig/") && !config["PreemptionConfig"].is_object() {
            config["PreemptionConfig"] = json!({});
        }
        if let Some(slot) = config.pointer_mut(pointer) {
            *slot = Value::Bool(b);
        } else {
            let key = pointer.rsplit('/').next().unwrap_or_default();
            let parent = if pointer.starts_with("/PreemptionConfig/") {
                &mut config["PreemptionConfig"]
            } else {
                &mut config
            };
            parent[key] = Value::Bool(b);
        }
    }
    Ok(config)
}

async fn set_config(api: &Api, ui: &mut Ui, args: &SetConfigArgs) -> Result<u8> {
    let answer = read_config(api).await?;
    let current = &answer["SchedulerConfig"];
    let index = current["ModifyIndex"].as_u64().unwrap_or(0);
    if let Some(check) = args.check_index.filter(|c| *c > 0)
        && check != index
    {
        return Err(CliError::Other(format!(
            "Error performing check index set: check-index {check} does not match does not \
             match current state value {index}"
        )));
    }
    let config = merged(current, args)?;
    let cas = args.check_index.filter(|c| *c > 0).unwrap_or(index);
    let call =
        NomadCall::write(Method::Put, CONFIG_PATH, Some(config)).param("cas", cas.to_string());
    let result = api
        .nomad("Error setting scheduler configuration", call)
        .await?
        .unwrap_or(Value::Null);
    if result["Updated"].as_bool().unwrap_or(false) {
        ui.output("Scheduler configuration updated!");
        Ok(0)
    } else {
        ui.output("Scheduler configuration could not be atomically updated, please try again");
        Ok(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn current() -> Value {
        json!({
            "SchedulerAlgorithm": "binpack",
            "PreemptionConfig": {"SystemSchedulerEnabled": true, "SysBatchSchedulerEnabled": false,
                                  "BatchSchedulerEnabled": false, "ServiceSchedulerEnabled": false},
            "MemoryOversubscriptionEnabled": false, "RejectJobRegistration": false,
            "PauseEvalBroker": false, "CreateIndex": 5, "ModifyIndex": 7,
        })
    }

    #[test]
    fn flags_replace_only_their_fields() {
        let args = SetConfigArgs {
            scheduler_algorithm: Some("spread".into()),
            preempt_batch_scheduler: Some("true".into()),
            memory_oversubscription: Some("1".into()),
            ..Default::default()
        };
        let m = merged(&current(), &args).unwrap();
        assert_eq!(m["SchedulerAlgorithm"], "spread");
        assert_eq!(m["PreemptionConfig"]["BatchSchedulerEnabled"], true);
        assert_eq!(m["PreemptionConfig"]["SystemSchedulerEnabled"], true);
        assert_eq!(m["MemoryOversubscriptionEnabled"], true);
        assert_eq!(m["PauseEvalBroker"], false);
    }

    #[test]
    fn bad_values_and_unsupported_flags_are_refused() {
        let bad = SetConfigArgs {
            pause_eval_broker: Some("maybe".into()),
            ..Default::default()
        };
        let err = merged(&current(), &bad).unwrap_err().to_string();
        assert!(err.contains("-pause-eval-broker"), "{err}");
        let algo = SetConfigArgs {
            scheduler_algorithm: Some("random".into()),
            ..Default::default()
        };
        assert!(merged(&current(), &algo).is_err());
        let limit = SetConfigArgs {
            node_limit_for_feasibility_checks: Some("10".into()),
            ..Default::default()
        };
        let err = merged(&current(), &limit).unwrap_err().to_string();
        assert!(err.contains("not supported by Caravan"), "{err}");
    }

    #[test]
    fn the_page_lists_nomads_fields() {
        let page = config_page(&json!({ "SchedulerConfig": current() }));
        assert!(
            page.starts_with("Scheduler Algorithm           = binpack\n"),
            "{page}"
        );
        assert!(
            page.contains("Preemption System Scheduler   = true\n"),
            "{page}"
        );
        assert!(
            page.ends_with("Modify Index                  = 7"),
            "{page}"
        );
    }
}
