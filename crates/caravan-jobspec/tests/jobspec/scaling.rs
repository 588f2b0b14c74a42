//! A group's `scaling` block: read from HCL and JSON, kept on the job,
//! rendered back with a stable id, and checked as Nomad checks it.
#![allow(clippy::unwrap_used)]

use caravan_jobspec::{
    ParseOptions, parse_hcl, parse_json, render_json, scaling_policy_id, validate,
};

const SCALED: &str = r#"job "web" {
  group "app" {
    count = 3
    scaling {
      min     = 2
      max     = 10
      enabled = true
      policy {
        evaluation_interval = "5s"
        check "cpu" {
          source = "prometheus"
          strategy "target-value" {
            target = 70
          }
        }
      }
    }
    task "t" {
      driver = "mock"
    }
  }
}"#;

#[test]
fn an_hcl_scaling_block_is_kept_on_the_group() {
    let p = parse_hcl(SCALED, &ParseOptions::default()).unwrap();
    assert!(
        !p.warnings.iter().any(|w| w.contains("caling")),
        "{:?}",
        p.warnings
    );
    let s = p.job.task_groups[0].scaling.as_ref().unwrap();
    assert_eq!((s.min, s.max, s.enabled), (2, 10, true));
    assert_eq!(s.r#type, "horizontal");
    let policy = s.policy.as_ref().unwrap();
    assert!(policy.fields.contains_key("evaluation_interval"));
    assert!(policy.fields.contains_key("check"));
    assert!(validate(&p.job).is_ok());
}

#[test]
fn the_rendered_policy_has_a_stable_id_and_reads_back_unchanged() {
    let p = parse_hcl(SCALED, &ParseOptions::default()).unwrap();
    let rendered = render_json(&p.job);
    let scaling = &rendered["TaskGroups"][0]["Scaling"];
    let id = scaling_policy_id("default", "web", "app");
    assert_eq!(scaling["ID"], id.as_str());
    assert_eq!(scaling["Target"]["Group"], "app");
    assert_eq!(scaling["Max"], 10);
    // Labeled blocks nest as `{label = [object]}`, the shape Nomad's parser gives them.
    assert_eq!(
        scaling["Policy"]["check"][0]["cpu"][0]["source"],
        "prometheus"
    );
    let body = serde_json::to_vec(&serde_json::json!({ "Job": rendered })).unwrap();
    let again = parse_json(&body, &ParseOptions::default()).unwrap();
    assert_eq!(
        again.job.task_groups[0].scaling,
        p.job.task_groups[0].scaling
    );
    // The id depends on the target only, and each target has its own.
    assert_eq!(id, scaling_policy_id("default", "web", "app"));
    assert_ne!(id, scaling_policy_id("default", "web", "other"));
    assert_ne!(
        scaling_policy_id("a", "b/c", "d"),
        scaling_policy_id("a", "b", "c/d")
    );
}

#[test]
fn json_defaults_follow_nomad() {
    // Without Min the group's count is the minimum; without Count the
    // minimum is the count; Enabled defaults to true.
    let body = br#"{"Job": {"ID": "j", "TaskGroups": [
        {"Name": "a", "Count": 4, "Scaling": {"Max": 9}, "Tasks": [{"Name": "t", "Driver": "mock"}]},
        {"Name": "b", "Scaling": {"Min": 2, "Max": 5, "Enabled": false}, "Tasks": [{"Name": "t", "Driver": "mock"}]}
    ]}}"#;
    let job = parse_json(body, &ParseOptions::default()).unwrap().job;
    let a = job.task_groups[0].scaling.as_ref().unwrap();
    assert_eq!((a.min, a.max, a.enabled), (4, 9, true));
    assert_eq!(job.task_groups[1].count, 2);
    assert!(!job.task_groups[1].scaling.as_ref().unwrap().enabled);
    assert!(validate(&job).is_ok());
}

#[test]
fn bad_bounds_are_refused_naming_the_field() {
    for (scaling, count, want) in [
        (
            r#"{"Min": 1}"#,
            1,
            "maximum count must be specified and non-negative",
        ),
        (
            r#"{"Min": 5, "Max": 3}"#,
            4,
            "maximum count must not be less than minimum count",
        ),
        (
            r#"{"Min": 1, "Max": 3}"#,
            4,
            "task group count must not be greater than maximum count",
        ),
        (
            r#"{"Min": 3, "Max": 9}"#,
            2,
            "task group count must not be less than minimum count",
        ),
        (
            r#"{"Min": 1, "Max": 3, "Type": "vertical_cpu"}"#,
            1,
            "not valid for a task group",
        ),
    ] {
        let body = format!(
            r#"{{"Job": {{"ID": "j", "TaskGroups": [{{"Name": "a", "Count": {count},
                "Scaling": {scaling}, "Tasks": [{{"Name": "t", "Driver": "mock"}}]}}]}}}}"#
        );
        let job = parse_json(body.as_bytes(), &ParseOptions::default())
            .unwrap()
            .job;
        let errors = validate(&job).unwrap_err().messages().join("\n");
        assert!(errors.contains(want), "{scaling}: {errors}");
        assert!(errors.contains("scaling"), "{errors}");
    }
    let body = br#"{"Job": {"ID": "j", "TaskGroups": [{"Name": "a",
        "Scaling": {"Max": "ten"}, "Tasks": [{"Name": "t", "Driver": "mock"}]}]}}"#;
    let err = parse_json(body, &ParseOptions::default()).unwrap_err();
    assert!(err.to_string().contains("Max"), "{err}");
}
