use caravan_proto::{
    Constraint, EphemeralDisk, NetworkResource, Port, Resources, RestartPolicy, UpdateStrategy,
};

use super::*;

fn job() -> Job {
    Job {
        id: "j".into(),
        task_groups: vec![TaskGroup {
            name: "g".into(),
            count: 1,
            ephemeral_disk: Some(EphemeralDisk {
                size_mb: 300,
                ..Default::default()
            }),
            tasks: vec![Task {
                name: "t".into(),
                driver: "raw_exec".into(),
                resources: Some(Resources {
                    cpu_mhz: 100,
                    memory_mb: 128,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn changed(f: impl FnOnce(&mut Job)) -> bool {
    let old = job();
    let mut new = old.clone();
    f(&mut new);
    tasks_updated_in(&old, &new, "g")
}

fn affinity() -> Affinity {
    Affinity {
        l_target: "${node.datacenter}".into(),
        r_target: "dc1".into(),
        operand: "=".into(),
        weight: 50,
    }
}

fn spread() -> Spread {
    Spread {
        attribute: "${meta.rack}".into(),
        weight: 50,
        targets: vec![],
    }
}

#[test]
fn in_place_changes() {
    assert!(!changed(|_| {}));
    assert!(!changed(|j| j.task_groups[0].count = 5));
    assert!(!changed(|j| j.task_groups[0].tasks[0].kill_timeout_ns = 9));
    assert!(!changed(
        |j| j.task_groups[0].tasks[0].kill_signal = "SIGINT".into()
    ));
    assert!(!changed(
        |j| j.task_groups[0].update = Some(UpdateStrategy::default())
    ));
    assert!(!changed(
        |j| j.task_groups[0].restart_policy = Some(RestartPolicy::default())
    ));
    assert!(!changed(|j| j.task_groups[0]
        .constraints
        .push(Constraint::default())));
    assert!(!changed(|j| j.priority = 90));
    // No logs block is Nomad's default one.
    assert!(!changed(|j| {
        j.task_groups[0].tasks[0].log_config = Some(caravan_proto::LogConfig {
            max_files: 10,
            max_file_size_mb: 10,
            disabled: false,
        });
    }));
}

#[test]
fn destructive_changes() {
    assert!(changed(|j| j.task_groups[0].tasks[0].driver = "exec".into()));
    assert!(changed(|j| {
        j.task_groups[0].tasks[0].env.insert("A".into(), "1".into());
    }));
    assert!(changed(
        |j| j.task_groups[0].tasks[0].config = Some(Default::default())
    ));
    assert!(changed(|j| {
        if let Some(r) = j.task_groups[0].tasks[0].resources.as_mut() {
            r.memory_mb = 256;
        }
    }));
    assert!(changed(|j| j.task_groups[0].tasks[0].user = "nobody".into()));
    assert!(changed(|j| {
        j.task_groups[0].tasks[0].log_config = Some(caravan_proto::LogConfig {
            max_files: 3,
            max_file_size_mb: 10,
            disabled: false,
        });
    }));
    assert!(changed(|j| {
        j.meta.insert("k".into(), "v".into());
    }));
    assert!(changed(|j| {
        j.task_groups[0].meta.insert("k".into(), "v".into());
    }));
    assert!(changed(|j| j.task_groups[0].networks.push(
        NetworkResource {
            dynamic_ports: vec![Port {
                label: "http".into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    )));
    assert!(changed(|j| j.task_groups[0].ephemeral_disk = None));
    assert!(changed(
        |j| j.task_groups[0].tasks[0].name = "renamed".into()
    ));
    assert!(changed(|j| {
        let t = j.task_groups[0].tasks[0].clone();
        j.task_groups[0].tasks.push(t);
    }));
    assert!(
        changed(|j| j.task_groups.clear()),
        "a removed group is a change"
    );
}

#[test]
fn a_group_missing_from_either_version_is_a_change() {
    let old = job();
    let mut renamed = old.clone();
    renamed.task_groups[0].name = "h".into();
    assert!(tasks_updated_in(&old, &renamed, "g"));
    assert!(tasks_updated_in(&renamed, &old, "g"));
    assert!(tasks_updated_in(&old, &old, "absent"));
    assert!(!tasks_updated_in(&old, &old.clone(), "g"));
}

#[test]
fn placement_preference_changes_are_destructive() {
    assert!(changed(|j| j.affinities.push(affinity())));
    assert!(changed(|j| j.task_groups[0].affinities.push(affinity())));
    assert!(changed(|j| j.task_groups[0].tasks[0]
        .affinities
        .push(affinity())));
    assert!(changed(|j| j.spreads.push(spread())));
    assert!(changed(|j| j.task_groups[0].spreads.push(spread())));
    let mut old = job();
    old.affinities.push(affinity());
    let mut new = old.clone();
    new.affinities[0].weight = 100;
    assert!(tasks_updated_in(&old, &new, "g"));
    assert!(!tasks_updated_in(&old, &old.clone(), "g"));
}

#[test]
fn affinity_and_spread_changes_by_level() {
    let j = job();
    let tg = &j.task_groups[0];
    let mut at_job = j.clone();
    at_job.affinities.push(affinity());
    assert!(tasks_updated(&j, tg, &at_job, tg));
    let mut at_group = tg.clone();
    at_group.affinities.push(affinity());
    assert!(tasks_updated(&j, tg, &j, &at_group));
    let mut at_task = tg.clone();
    at_task.tasks[0].affinities.push(affinity());
    assert!(tasks_updated(&j, tg, &j, &at_task));
    let mut reweighted = at_task.clone();
    reweighted.tasks[0].affinities[0].weight = -50;
    assert!(tasks_updated(&j, &at_task, &j, &reweighted));
    assert!(!tasks_updated(&j, &at_task, &j, &at_task.clone()));

    let mut spread_job = j.clone();
    spread_job.spreads.push(spread());
    assert!(tasks_updated(&j, tg, &spread_job, tg));
    let mut spread_group = tg.clone();
    spread_group.spreads.push(spread());
    assert!(tasks_updated(&j, tg, &j, &spread_group));
    assert!(!tasks_updated(&spread_job, tg, &spread_job, tg));
}

#[test]
fn meta_overridden_to_the_same_value_is_not_a_change() {
    let mut old = job();
    old.meta.insert("k".into(), "v".into());
    let mut new = job();
    new.task_groups[0].meta.insert("k".into(), "v".into());
    assert!(!tasks_updated_in(&old, &new, "g"));
    let mut task_level = job();
    task_level.task_groups[0].tasks[0]
        .meta
        .insert("k".into(), "v".into());
    assert!(!tasks_updated_in(&old, &task_level, "g"));
    task_level.task_groups[0].tasks[0]
        .meta
        .insert("k".into(), "w".into());
    assert!(tasks_updated_in(&old, &task_level, "g"));
}

/// A group as a registered job carries it: a network with a port, a disk,
/// policies and a constraint, so that clearing any of them is a change.
fn full_job() -> Job {
    let mut j = job();
    let tg = &mut j.task_groups[0];
    tg.count = 2;
    tg.networks.push(NetworkResource {
        dynamic_ports: vec![Port {
            label: "db".into(),
            to: 6379,
            ..Default::default()
        }],
        ..Default::default()
    });
    tg.update = Some(UpdateStrategy {
        max_parallel: 1,
        ..Default::default()
    });
    tg.restart_policy = Some(RestartPolicy {
        attempts: 2,
        ..Default::default()
    });
    tg.constraints.push(Constraint {
        l_target: "${attr.kernel.name}".into(),
        r_target: "linux".into(),
        operand: "=".into(),
    });
    tg.tasks[0].env.insert("A".into(), "1".into());
    j
}

#[test]
fn each_field_is_in_place_or_destructive() {
    type Change = Box<dyn Fn(&mut Job)>;
    let in_place: Vec<(&str, Change)> = vec![
        ("nothing", Box::new(|_| {})),
        ("count", Box::new(|j| j.task_groups[0].count = 7)),
        ("priority", Box::new(|j| j.priority = 90)),
        (
            "kill timeout",
            Box::new(|j| j.task_groups[0].tasks[0].kill_timeout_ns = 1),
        ),
        (
            "kill signal",
            Box::new(|j| j.task_groups[0].tasks[0].kill_signal = "SIGHUP".into()),
        ),
        ("update", Box::new(|j| j.task_groups[0].update = None)),
        (
            "restart",
            Box::new(|j| j.task_groups[0].restart_policy = None),
        ),
        (
            "constraints",
            Box::new(|j| j.task_groups[0].constraints.clear()),
        ),
    ];
    let destructive: Vec<(&str, Change)> = vec![
        (
            "driver",
            Box::new(|j| j.task_groups[0].tasks[0].driver = "exec".into()),
        ),
        (
            "user",
            Box::new(|j| j.task_groups[0].tasks[0].user = "u".into()),
        ),
        (
            "leader",
            Box::new(|j| j.task_groups[0].tasks[0].leader = true),
        ),
        (
            "dispatch payload",
            Box::new(|j| j.task_groups[0].tasks[0].dispatch_payload_file = "in".into()),
        ),
        (
            "env",
            Box::new(|j| {
                j.task_groups[0].tasks[0].env.insert("A".into(), "2".into());
            }),
        ),
        (
            "job meta",
            Box::new(|j| {
                j.meta.insert("m".into(), "v".into());
            }),
        ),
        (
            "group meta",
            Box::new(|j| {
                j.task_groups[0].meta.insert("m".into(), "v".into());
            }),
        ),
        ("networks", Box::new(|j| j.task_groups[0].networks.clear())),
        (
            "ephemeral disk",
            Box::new(|j| j.task_groups[0].ephemeral_disk = None),
        ),
        (
            "resources",
            Box::new(|j| {
                if let Some(r) = j.task_groups[0].tasks[0].resources.as_mut() {
                    r.cpu_mhz += 1;
                }
            }),
        ),
        (
            "added task",
            Box::new(|j| {
                let t = j.task_groups[0].tasks[0].clone();
                j.task_groups[0].tasks.push(Task {
                    name: "side".into(),
                    ..t
                });
            }),
        ),
        (
            "artifact",
            Box::new(|j| {
                j.task_groups[0].tasks[0]
                    .artifacts
                    .push(caravan_proto::Artifact {
                        source: "https://example.com/a.tgz".into(),
                        ..Default::default()
                    });
            }),
        ),
        (
            "template",
            Box::new(|j| {
                j.task_groups[0].tasks[0]
                    .templates
                    .push(caravan_proto::Template {
                        data: "x".into(),
                        destination: "local/x".into(),
                        ..Default::default()
                    });
            }),
        ),
        (
            "identity",
            Box::new(|j| {
                j.task_groups[0].tasks[0]
                    .identities
                    .push(caravan_proto::WorkloadIdentity {
                        name: "default".into(),
                        env: true,
                        ..Default::default()
                    });
            }),
        ),
        ("job affinity", Box::new(|j| j.affinities.push(affinity()))),
        (
            "group affinity",
            Box::new(|j| j.task_groups[0].affinities.push(affinity())),
        ),
        (
            "task affinity",
            Box::new(|j| j.task_groups[0].tasks[0].affinities.push(affinity())),
        ),
        ("job spread", Box::new(|j| j.spreads.push(spread()))),
        (
            "group spread",
            Box::new(|j| j.task_groups[0].spreads.push(spread())),
        ),
    ];
    let base = full_job();
    let cases = in_place
        .iter()
        .map(|(name, change)| (name, change, false))
        .chain(
            destructive
                .iter()
                .map(|(name, change)| (name, change, true)),
        );
    for (name, change, expected) in cases {
        let mut new = base.clone();
        change(&mut new);
        let by_group = tasks_updated(&base, &base.task_groups[0], &new, &new.task_groups[0]);
        assert_eq!(by_group, expected, "{name}");
        assert_eq!(tasks_updated_in(&base, &new, "g"), expected, "{name}");
    }
}

#[test]
fn the_parts_name_what_they_judge() {
    let old = full_job();
    let mut new = old.clone();
    new.task_groups[0].ephemeral_disk = None;
    assert!(group_destructive(&old.task_groups[0], &new.task_groups[0]));
    let (otg, ntg) = (&old.task_groups[0], &new.task_groups[0]);
    assert!(!task_destructive(
        &old,
        otg,
        &otg.tasks[0],
        &new,
        ntg,
        &ntg.tasks[0]
    ));

    let mut new = old.clone();
    new.meta.insert("k".into(), "v".into());
    let (otg, ntg) = (&old.task_groups[0], &new.task_groups[0]);
    assert!(!group_destructive(otg, ntg));
    assert!(task_destructive(
        &old,
        otg,
        &otg.tasks[0],
        &new,
        ntg,
        &ntg.tasks[0]
    ));
}
