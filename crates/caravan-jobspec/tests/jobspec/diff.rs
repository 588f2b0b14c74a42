//! Job diffs and `job plan` rendering: count changes, destructive and in-place task
//! changes, added and removed groups, and agreement with `tasks_updated`.

use caravan_jobspec::{DiffType, JobDiff, ParseOptions, diff, parse_hcl, render_plan};
use caravan_model::tasks_updated_in;
use caravan_proto::Job;

/// The `job init` example, with `count` and the task body as parameters.
fn cache_job(count: u32, task_body: &str) -> Job {
    let text = format!(
        r#"job "example" {{
  datacenters = ["dc1"]
  group "cache" {{
    count = {count}
    network {{
      port "db" {{
        to = 6379
      }}
    }}
    task "redis" {{
      driver = "docker"
      config {{
        image = "redis:7"
        ports = ["db"]
      }}
{task_body}
    }}
  }}
}}
"#
    );
    match parse_hcl(&text, &ParseOptions::default()) {
        Ok(p) => p.job,
        Err(e) => panic!("{e}"),
    }
}

fn plan(old: &Job, new: &Job) -> (JobDiff, String) {
    let d = diff(Some(old), new, false).expect("same job");
    let text = render_plan(&d, false);
    (d, text)
}

#[test]
fn identical_versions_have_no_changes() {
    let job = cache_job(1, "");
    let (d, text) = plan(&job, &job);
    assert_eq!(d.diff_type, DiffType::None);
    assert!(d.fields.is_empty() && d.objects.is_empty());
    assert_eq!(d.task_groups[0].diff_type, DiffType::None);
    assert_eq!(
        text,
        "Job: \"example\"\nTask Group: \"cache\"\n  Task: \"redis\"\n\n"
    );
}

#[test]
fn count_change_is_in_place_and_annotated() {
    let old = cache_job(1, "");
    let new = cache_job(3, "");
    let (d, text) = plan(&old, &new);
    assert_eq!(d.diff_type, DiffType::Edited);
    let tg = &d.task_groups[0];
    assert_eq!(tg.diff_type, DiffType::Edited);
    assert_eq!(tg.fields.len(), 1);
    let count = &tg.fields[0];
    assert_eq!(
        (count.name.as_str(), count.old.as_str(), count.new.as_str()),
        ("Count", "1", "3")
    );
    assert_eq!(count.annotations, vec!["forces create"]);
    assert_eq!(tg.tasks[0].diff_type, DiffType::None);
    assert_eq!(
        text,
        "+/- Job: \"example\"\n\
         +/- Task Group: \"cache\"\n\
         \x20 +/- Count: \"1\" => \"3\" (forces create)\n\
         \x20     Task: \"redis\"\n\n"
    );
    assert!(!tasks_updated_in(&old, &new, "cache"));
    let (down, _) = plan(&new, &old);
    assert_eq!(
        down.task_groups[0].fields[0].annotations,
        vec!["forces destroy"]
    );
}

#[test]
fn destructive_task_change() {
    let old = cache_job(1, "");
    let new = cache_job(
        1,
        "      env {\n        MODE = \"replica\"\n      }\n      resources {\n        memory = 512\n      }",
    );
    let (d, text) = plan(&old, &new);
    let t = &d.task_groups[0].tasks[0];
    assert_eq!(t.diff_type, DiffType::Edited);
    assert_eq!(t.annotations, vec!["forces create/destroy update"]);
    assert!(tasks_updated_in(&old, &new, "cache"));
    assert_eq!(
        text,
        "+/- Job: \"example\"\n\
         +/- Task Group: \"cache\"\n\
         \x20 +/- Task: \"redis\" (forces create/destroy update)\n\
         \x20   +   Env[MODE]: \"replica\"\n\
         \x20   +/- Resources {\n\
         \x20     +/- MemoryMB: \"300\" => \"512\"\n\
         \x20       }\n\n"
    );
}

#[test]
fn in_place_task_change() {
    let old = cache_job(1, "");
    let new = cache_job(1, "      kill_timeout = \"30s\"");
    let (d, text) = plan(&old, &new);
    let t = &d.task_groups[0].tasks[0];
    assert_eq!(t.annotations, vec!["forces in-place update"]);
    assert!(!tasks_updated_in(&old, &new, "cache"));
    assert!(
        text.contains("+/- KillTimeout: \"5000000000\" => \"30000000000\""),
        "{text}"
    );
}

#[test]
fn config_changes_flatten_like_nomad() {
    let old = cache_job(1, "");
    let mut new = old.clone();
    let config = new.task_groups[0].tasks[0].config.as_mut().expect("config");
    config.fields.insert(
        "image".into(),
        prost_types::Value {
            kind: Some(prost_types::value::Kind::StringValue("redis:8".into())),
        },
    );
    let (d, _) = plan(&old, &new);
    let t = &d.task_groups[0].tasks[0];
    let config = t
        .objects
        .iter()
        .find(|o| o.name == "Config")
        .expect("config diff");
    assert_eq!(config.fields[0].name, "image");
    assert_eq!(
        (config.fields[0].old.as_str(), config.fields[0].new.as_str()),
        ("redis:7", "redis:8")
    );
    assert!(tasks_updated_in(&old, &new, "cache"));
}

#[test]
fn constraint_changes_are_object_set_diffs_and_in_place() {
    let old = cache_job(1, "");
    let new = cache_job(
        1,
        "      constraint {\n        attribute = \"${attr.kernel.name}\"\n        value = \"linux\"\n      }",
    );
    let (d, _) = plan(&old, &new);
    let t = &d.task_groups[0].tasks[0];
    let c = &t.objects[0];
    assert_eq!(
        (c.name.as_str(), c.diff_type),
        ("Constraint", DiffType::Added)
    );
    assert_eq!(c.fields.len(), 3);
    assert!(
        !tasks_updated_in(&old, &new, "cache"),
        "the scheduler re-checks feasibility instead"
    );
    assert_eq!(t.annotations, vec!["forces in-place update"]);
}

#[test]
fn added_and_removed_groups() {
    let old = cache_job(1, "");
    let mut new = old.clone();
    let mut extra = new.task_groups[0].clone();
    extra.name = "cache-2".into();
    new.task_groups.push(extra);
    new.task_groups.remove(0);
    let (d, text) = plan(&old, &new);
    let names: Vec<_> = d
        .task_groups
        .iter()
        .map(|g| (g.name.as_str(), g.diff_type))
        .collect();
    assert_eq!(
        names,
        vec![("cache", DiffType::Deleted), ("cache-2", DiffType::Added)]
    );
    assert_eq!(
        d.task_groups[0].tasks[0].annotations,
        vec!["forces destroy"]
    );
    assert_eq!(d.task_groups[1].tasks[0].annotations, vec!["forces create"]);
    assert!(
        text.contains("\n- Task Group: \"cache\"\n  - Task: \"redis\" (forces destroy)\n"),
        "{text}"
    );
    assert!(
        text.contains("\n+ Task Group: \"cache-2\"\n  + Task: \"redis\" (forces create)\n"),
        "{text}"
    );
    assert!(tasks_updated_in(&old, &new, "cache"));
}

#[test]
fn a_new_job_is_all_added() {
    let job = cache_job(2, "");
    let d = diff(None, &job, false).expect("diff");
    assert_eq!(d.diff_type, DiffType::Added);
    assert!(d.fields.iter().all(|f| f.diff_type == DiffType::Added));
    assert!(d.objects.iter().any(|o| o.name == "Datacenters"));
    assert_eq!(d.task_groups[0].diff_type, DiffType::Added);
    let text = render_plan(&d, false);
    assert!(
        text.starts_with(
            "+ Job: \"example\"\n+ Task Group: \"cache\"\n  + Task: \"redis\" (forces create)\n"
        ),
        "{text}"
    );
    let verbose = render_plan(&d, true);
    assert!(
        verbose
            .lines()
            .any(|l| l.trim_start().starts_with("+ Count:") && l.ends_with("\"2\"")),
        "{verbose}"
    );
}

#[test]
fn job_level_changes() {
    let old = cache_job(1, "");
    let mut new = old.clone();
    new.priority = 80;
    new.datacenters.push("dc2".into());
    new.meta.insert("owner".into(), "ops".into());
    let (d, text) = plan(&old, &new);
    let fields: Vec<_> = d
        .fields
        .iter()
        .map(|f| (f.name.as_str(), f.diff_type))
        .collect();
    assert_eq!(
        fields,
        vec![
            ("Meta[owner]", DiffType::Added),
            ("Priority", DiffType::Edited)
        ]
    );
    let dcs = d
        .objects
        .iter()
        .find(|o| o.name == "Datacenters")
        .expect("datacenters");
    assert_eq!(dcs.fields.len(), 1);
    assert_eq!(
        (dcs.fields[0].diff_type, dcs.fields[0].new.as_str()),
        (DiffType::Added, "dc2")
    );
    assert!(
        text.contains("+/- Priority:    \"50\" => \"80\""),
        "aligned values: {text}"
    );
    assert!(
        tasks_updated_in(&old, &new, "cache"),
        "job meta reaches the task's environment"
    );
}

#[test]
fn contextual_diffs_show_unchanged_fields_of_edited_objects() {
    let old = cache_job(1, "");
    let new = cache_job(2, "");
    let d = diff(Some(&old), &new, true).expect("diff");
    let tg = &d.task_groups[0];
    assert!(
        tg.fields
            .iter()
            .any(|f| f.name == "ShutdownDelay" && f.diff_type == DiffType::None)
    );
    assert!(
        d.fields
            .iter()
            .any(|f| f.name == "Priority" && f.diff_type == DiffType::None)
    );
    let plain = diff(Some(&old), &new, false).expect("diff");
    assert!(
        plain.task_groups[0]
            .fields
            .iter()
            .all(|f| f.diff_type != DiffType::None)
    );
}

#[test]
fn different_ids_cannot_be_diffed() {
    let a = cache_job(1, "");
    let mut b = a.clone();
    b.id = "other".into();
    assert!(diff(Some(&a), &b, false).is_err());
}

#[test]
fn serializes_with_nomad_field_names() {
    let old = cache_job(1, "");
    let new = cache_job(3, "");
    let d = diff(Some(&old), &new, false).expect("diff");
    let v = serde_json::to_value(&d).expect("serializes");
    assert_eq!(v["Type"], "Edited");
    assert_eq!(v["ID"], "example");
    assert_eq!(v["TaskGroups"][0]["Fields"][0]["Name"], "Count");
    assert_eq!(v["TaskGroups"][0]["Fields"][0]["Old"], "1");
    assert_eq!(
        v["TaskGroups"][0]["Fields"][0]["Annotations"][0],
        "forces create"
    );
    assert_eq!(v["TaskGroups"][0]["Tasks"][0]["Type"], "None");
}

#[test]
fn plan_annotations_agree_with_tasks_updated() {
    let base = cache_job(1, "");
    let variants = [
        "      user = \"redis\"",
        "      kill_signal = \"SIGINT\"",
        "      leader = true",
        "      meta {\n        a = \"b\"\n      }",
        "      restart {\n        attempts = 9\n      }",
        "      resources {\n        cpu = 900\n      }",
        "      lifecycle {\n        hook = \"prestart\"\n      }",
    ];
    for body in variants {
        let new = cache_job(1, body);
        let d = diff(Some(&base), &new, false).expect("diff");
        let annotation = &d.task_groups[0].tasks[0].annotations;
        let destructive = tasks_updated_in(&base, &new, "cache");
        let expected = if destructive {
            "forces create/destroy update"
        } else {
            "forces in-place update"
        };
        assert_eq!(annotation, &vec![expected.to_string()], "{body}");
    }
}
