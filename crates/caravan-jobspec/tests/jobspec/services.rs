//! `service` and `check` blocks: read from HCL and JSON with Nomad's defaults, validated
//! with Nomad's texts, rendered back unchanged, and shown by plan diffs as in-place
//! updates.

use caravan_jobspec::{
    FORCES_IN_PLACE_UPDATE, ParseOptions, diff, parse_hcl, parse_json, render_json, validate,
    warnings,
};
use serde_json::json;

const JOB: &str = r#"
job "shop" {
  group "web" {
    network {
      port "http" {}
    }
    service {
      port     = "http"
      provider = "nomad"
      tags     = ["edge"]
      check_restart {
        limit = 3
      }
      check {
        type     = "http"
        path     = "/health"
        interval = "5s"
        timeout  = "2s"
        header {
          X-Probe = ["caravan"]
        }
      }
    }
    task "server" {
      driver = "raw_exec"
      config {
        command = "python3"
        args    = ["-m", "http.server", "${NOMAD_PORT_http}"]
      }
      service {
        name        = "${JOB}-api"
        port        = "http"
        provider    = "nomad"
        canary_tags = ["canary"]
        meta {
          version = "1"
        }
        check {
          name           = "alive"
          type           = "tcp"
          interval       = "10s"
          timeout        = "1s"
          initial_status = "passing"
          check_restart {
            limit = 2
            grace = "30s"
          }
        }
        check {
          type     = "script"
          command  = "/bin/true"
          interval = "30s"
          timeout  = "5s"
        }
      }
    }
  }
}
"#;

use super::hcl_errors as errors;

/// `JOB` with `from` replaced by `to` (which must be there).
fn patched(from: &str, to: &str) -> String {
    assert!(JOB.contains(from), "{from}");
    JOB.replacen(from, to, 1)
}

#[test]
fn services_parse_with_nomads_defaults_and_round_trip() {
    let p = parse_hcl(JOB, &ParseOptions::default()).expect("parses");
    validate(&p.job).expect("valid");
    let g = &p.job.task_groups[0];
    let group = &g.services[0];
    assert_eq!(group.name, "shop-web", "a group service is <job>-<group>");
    assert_eq!(group.port_label, "http");
    assert_eq!(group.address_mode, "auto");
    assert_eq!(group.on_update, "require_healthy");
    assert_eq!(group.task_name, "");
    let hc = &group.checks[0];
    assert_eq!(hc.name, "service: \"shop-web\" check");
    assert_eq!(
        (hc.interval_ns, hc.timeout_ns),
        (5_000_000_000, 2_000_000_000)
    );
    assert_eq!(hc.headers["X-Probe"].values, vec!["caravan"]);
    let restart = hc
        .check_restart
        .expect("the service's check_restart is the check's");
    assert_eq!((restart.limit, restart.grace_ns), (3, 1_000_000_000));

    let task = &g.tasks[0].services[0];
    assert_eq!(
        task.name, "shop-api",
        "${{JOB}} is replaced as Nomad's servers do"
    );
    assert_eq!(task.task_name, "server");
    assert_eq!(task.canary_tags, vec!["canary"]);
    assert_eq!(task.meta["version"], "1");
    let alive = &task.checks[0];
    assert_eq!(alive.initial_status, "passing");
    assert_eq!(alive.task_name, "server");
    let restart = alive.check_restart.expect("own check_restart");
    assert_eq!((restart.limit, restart.grace_ns), (2, 30_000_000_000));
    assert_eq!(task.checks[1].r#type, "script");
    assert_eq!(task.checks[1].command, "/bin/true");

    // What `job inspect` prints registers the same job.
    let rendered = render_json(&p.job);
    assert_eq!(
        rendered["TaskGroups"][0]["Services"][0]["Checks"][0]["Path"],
        "/health"
    );
    assert_eq!(
        rendered["TaskGroups"][0]["Tasks"][0]["Services"][0]["CanaryTags"],
        json!(["canary"])
    );
    let again = parse_json(
        serde_json::to_vec(&json!({ "Job": rendered }))
            .unwrap()
            .as_slice(),
        &ParseOptions::default(),
    )
    .expect("the rendered job parses");
    assert_eq!(again.job.task_groups, p.job.task_groups);
    assert!(warnings(&p.job).is_empty(), "nomad provider: no warning");
}

#[test]
fn a_consul_service_is_served_by_caravans_registry_with_a_warning() {
    let text = JOB.replace("        provider    = \"nomad\"\n", "");
    let p = parse_hcl(&text, &ParseOptions::default()).expect("parses");
    assert_eq!(p.job.task_groups[0].tasks[0].services[0].provider, "consul");
    // One provider per group, as Nomad requires.
    let errs = validate(&p.job).unwrap_err().messages();
    assert!(
        errs.iter()
            .any(|e| e.contains("Multiple service providers used")),
        "{errs:?}"
    );
    let text = text.replace("      provider = \"nomad\"\n", "");
    let p = parse_hcl(&text, &ParseOptions::default()).expect("parses");
    validate(&p.job).expect("consul services are valid");
    let w = warnings(&p.job);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w[1].contains(
            r#"group "web": task "server": service[0]: service "shop-api" has provider "consul""#
        ) && w[1].contains("registers it in its own service registry"),
        "{w:?}"
    );
}

#[test]
fn service_errors_name_the_field_with_nomads_texts() {
    let cases = [
        (
            ("path     = \"/health\"", "path     = \"http://x/health\""),
            "service[0]: check[0]: path: http type must have relative http path",
        ),
        (
            ("type     = \"http\"", "type     = \"icmp\""),
            "check[0]: type: invalid check type (\"icmp\"), must be one of http, tcp, grpc, script",
        ),
        (
            ("interval = \"5s\"", "interval = \"500ms\""),
            "check[0]: interval: interval (500ms) cannot be lower than 1s",
        ),
        (
            ("name        = \"${JOB}-api\"", "name        = \"api_v1\""),
            "service[0]: name: Service name must be valid per RFC 1123",
        ),
        (
            (
                "      port     = \"http\"\n      provider",
                "      port     = \"www\"\n      provider",
            ),
            "group \"web\": service[0]: port: port label \"www\" referenced by services shop-web does not exist",
        ),
        (
            (
                "          type           = \"tcp\"",
                "          type           = \"tcp\"\n          task = \"other\"",
            ),
            "Check alive is invalid: may only specify task the check belongs to, got \"other\"",
        ),
        (
            ("command  = \"/bin/true\"", "command  = \"\""),
            "check[1]: command: script type must have a valid script path",
        ),
        (
            ("initial_status = \"passing\"", "initial_status = \"ok\""),
            "invalid initial check state (ok)",
        ),
        (
            (
                "        port        = \"http\"",
                "        port        = \"http\"\n        address_mode = \"alloc\"",
            ),
            "address_mode \"alloc\" is not supported by Caravan",
        ),
        (
            ("          limit = 2", "          limit = -1"),
            "limit must be greater than or equal to 0 but found -1",
        ),
        (
            (
                "path     = \"/health\"",
                "path     = \"/health\"\n        protocol = \"https\"",
            ),
            "check[0]: protocol: \"https\" is not supported by Caravan: its http and grpc checks dial in plain text",
        ),
        (
            (
                "path     = \"/health\"",
                "path     = \"/health\"\n        tls_skip_verify = true",
            ),
            "check[0]: tls_skip_verify: is not supported by Caravan",
        ),
    ];
    for ((from, to), want) in cases {
        let errs = errors(&patched(from, to));
        assert!(
            errs.iter().any(|e| e.contains(want)),
            "{to}: want {want:?} in {errs:?}"
        );
    }
}

#[test]
fn duplicate_services_and_checks_are_named() {
    let text = patched(
        "    task \"server\" {",
        "    service {\n      port = \"http\"\n      provider = \"nomad\"\n    }\n    task \"server\" {",
    );
    let errs = errors(&text);
    assert!(
        errs.iter()
            .any(|e| e.contains("Services are not unique: group->shop-web:http")),
        "{errs:?}"
    );
    let text = patched(
        "          type     = \"script\"",
        "          name = \"alive\"\n          type     = \"script\"",
    );
    let errs = errors(&text);
    assert!(
        errs.iter()
            .any(|e| e.contains("check \"alive\" is duplicate")),
        "{errs:?}"
    );
}

#[test]
fn consul_only_parts_are_refused_by_name() {
    for (block, field) in [
        ("connect {\n          native = true\n        }", "connect"),
        (
            "tagged_addresses {\n          lan = \"10.0.0.1\"\n        }",
            "tagged_addresses",
        ),
        ("weights {\n          passing = 2\n        }", "weights"),
    ] {
        let text = patched(
            "        canary_tags",
            &format!("        {block}\n        canary_tags"),
        );
        let errs = errors(&text);
        assert!(
            errs.iter()
                .any(|e| e.contains(&format!("service[0]: {field} ("))
                    && e.contains("is not supported by Caravan")),
            "{field}: {errs:?}"
        );
    }
    let text = patched(
        "          initial_status",
        "          expose = true\n          initial_status",
    );
    let errs = errors(&text);
    assert!(
        errs.iter()
            .any(|e| e.contains("check[0]: expose (Expose) is not supported by Caravan")),
        "{errs:?}"
    );
}

#[test]
fn a_changed_service_is_an_in_place_update_in_the_plan() {
    let old = parse_hcl(JOB, &ParseOptions::default())
        .expect("parses")
        .job;
    let new = parse_hcl(
        &patched("tags     = [\"edge\"]", "tags     = [\"edge\", \"v2\"]"),
        &ParseOptions::default(),
    )
    .expect("parses")
    .job;
    let d = diff(Some(&old), &new, false).expect("diffs");
    let group = &d.task_groups[0];
    assert!(
        group
            .objects
            .iter()
            .any(|o| o.name == "Service" && format!("{o:?}").contains("v2")),
        "the new tag shows: {group:?}"
    );
    assert!(
        group.tasks.iter().all(|t| !t
            .annotations
            .iter()
            .any(|a| a != FORCES_IN_PLACE_UPDATE && a.contains("forces"))),
        "no task is replaced for a service change: {group:?}"
    );
}
