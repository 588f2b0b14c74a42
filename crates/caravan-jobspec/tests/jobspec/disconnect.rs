//! The `disconnect` block (and the older `max_client_disconnect` and
//! `stop_after_client_disconnect`): parsed from HCL and JSON with Nomad's
//! defaults, validated with Nomad's messages, rendered back.

use caravan_jobspec::{ParseOptions, Parsed, parse_hcl, parse_json, validate};
use caravan_proto::DisconnectStrategy;
use serde_json::json;

const S: i64 = 1_000_000_000;

fn hcl(job_type: &str, group_lines: &str) -> String {
    format!(
        "job \"x\" {{\n  type = \"{job_type}\"\n  group \"g\" {{\n{group_lines}\n    task \"t\" {{\n      driver = \"mock\"\n    }}\n  }}\n}}\n"
    )
}

fn parse(text: &str) -> Parsed {
    parse_hcl(text, &ParseOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

use super::hcl_errors as errors_of;

#[test]
fn the_block_parses_with_nomads_defaults() {
    let p = parse(&hcl(
        "service",
        "    disconnect {\n      lost_after = \"6h\"\n    }",
    ));
    assert_eq!(
        p.job.task_groups[0].disconnect,
        Some(DisconnectStrategy {
            lost_after_ns: 6 * 3600 * S,
            stop_on_client_after_ns: None,
            replace: Some(true),
            reconcile: "best_score".into(),
        })
    );
    assert!(validate(&p.job).is_ok());
    assert!(
        p.warnings.iter().all(|w| !w.contains("isconnect")),
        "nothing is ignored now: {:?}",
        p.warnings
    );
    let p = parse(&hcl(
        "batch",
        "    disconnect {\n      stop_on_client_after = \"90s\"\n      replace = false\n      reconcile = \"keep_replacement\"\n    }",
    ));
    let d = p.job.task_groups[0].disconnect.clone().unwrap();
    assert_eq!(d.stop_on_client_after_ns, Some(90 * S));
    assert_eq!(d.replace, Some(false));
    assert_eq!(d.reconcile, "keep_replacement");
    assert!(validate(&p.job).is_ok());
}

#[test]
fn json_and_hcl_agree_and_the_block_renders_back() {
    let body = json!({"Job": {"ID": "x", "TaskGroups": [{"Name": "g",
        "Disconnect": {"LostAfter": 60 * S, "Reconcile": "longest_running"},
        "Tasks": [{"Name": "t", "Driver": "mock"}]}]}});
    let p = parse_json(body.to_string().as_bytes(), &ParseOptions::default()).unwrap();
    let d = p.job.task_groups[0].disconnect.clone().unwrap();
    assert_eq!(d.lost_after_ns, 60 * S);
    assert_eq!(d.reconcile, "longest_running");
    assert_eq!(d.replace, Some(true));
    let rendered = caravan_jobspec::render_json(&p.job);
    let group = &rendered["TaskGroups"][0];
    assert_eq!(group["Disconnect"]["LostAfter"], json!(60 * S));
    assert_eq!(group["Disconnect"]["Reconcile"], json!("longest_running"));
    assert_eq!(group["Disconnect"]["Replace"], json!(true));
}

#[test]
fn the_older_fields_stand_in_for_the_block() {
    let p = parse(&hcl("service", "    max_client_disconnect = \"1h\""));
    let tg = &p.job.task_groups[0];
    assert_eq!(tg.max_client_disconnect_ns, 3600 * S);
    assert_eq!(caravan_model::disconnect::lost_after_ns(tg), 3600 * S);
    assert!(caravan_model::disconnect::replace(tg));
    let p = parse(&hcl(
        "service",
        "    stop_after_client_disconnect = \"30s\"",
    ));
    let tg = &p.job.task_groups[0];
    assert_eq!(
        caravan_model::disconnect::stop_on_client_after_ns(tg),
        Some(30 * S)
    );
    let errs = errors_of(&hcl(
        "service",
        "    max_client_disconnect = \"1h\"\n    disconnect {\n      lost_after = \"2h\"\n    }",
    ));
    assert!(
        errs.iter()
            .any(|e| e.contains("max_client_disconnect") && e.contains("conflicts")),
        "{errs:?}"
    );
}

#[test]
fn invalid_blocks_get_nomads_errors_naming_the_field() {
    let cases = [
        (
            "service",
            "lost_after = \"1h\"\n      stop_on_client_after = \"1m\"",
            "disconnect: stop_on_client_after: Disconnect cannot be configured with both lost_after and stop_after",
        ),
        (
            "system",
            "stop_on_client_after = \"1m\"",
            "disconnect: stop_on_client_after: stop_after can only be used with service or batch job types",
        ),
        (
            "service",
            "reconcile = \"coin_toss\"",
            "disconnect: reconcile: reconcile option is invalid: coin_toss",
        ),
        (
            "service",
            "lost_after = \"-1s\"",
            "disconnect: lost_after: lost_after cannot be a negative duration",
        ),
    ];
    for (job_type, body, expected) in cases {
        let text = hcl(
            job_type,
            &format!("    disconnect {{\n      {body}\n    }}"),
        );
        let errs = errors_of(&text);
        assert!(
            errs.iter().any(|e| e.contains(expected)),
            "{body}: expected {expected:?} in {errs:#?}"
        );
    }
    let errs = errors_of(&hcl(
        "service",
        "    disconnect {\n      lost_afterr = \"1h\"\n    }",
    ));
    assert!(
        errs.iter().any(|e| e.contains("lost_afterr")),
        "unknown keys are named: {errs:?}"
    );
}
