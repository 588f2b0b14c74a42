//! Host volumes: a group's `volume` blocks and its tasks' `volume_mount`s, read from HCL
//! and JSON, validated with Nomad's texts, and rendered back unchanged.

use caravan_jobspec::{
    ParseOptions, hcl_to_nomad_json, parse_hcl, parse_json, render_json, validate,
};
use serde_json::json;

const JOB: &str = r#"
job "db" {
  group "db" {
    count = 2
    volume "data" {
      type      = "host"
      source    = "pgdata"
      per_alloc = true
    }
    volume "certs" {
      type      = "host"
      source    = "certs"
      read_only = true
    }
    task "postgres" {
      driver = "exec"
      config {
        command = "/bin/sleep"
        args    = ["60"]
      }
      volume_mount {
        volume      = "data"
        destination = "/var/lib/postgresql"
      }
      volume_mount {
        volume      = "certs"
        destination = "/etc/certs"
        read_only   = true
      }
    }
  }
}
"#;

use super::hcl_errors as errors;

#[test]
fn host_volumes_parse_validate_and_round_trip() {
    let p = parse_hcl(JOB, &ParseOptions::default()).expect("parses");
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    validate(&p.job).expect("valid");
    let g = &p.job.task_groups[0];
    let data = &g.volumes["data"];
    assert_eq!(
        (
            data.r#type.as_str(),
            data.source.as_str(),
            data.per_alloc,
            data.read_only
        ),
        ("host", "pgdata", true, false)
    );
    assert!(g.volumes["certs"].read_only);
    let mounts = &g.tasks[0].volume_mounts;
    assert_eq!(mounts.len(), 2);
    assert_eq!(mounts[0].destination, "/var/lib/postgresql");
    assert_eq!(mounts[0].propagation_mode, "private", "Nomad's default");
    assert!(mounts[1].read_only);

    // Nomad's JSON both ways: what `job inspect` prints registers the same job.
    let rendered = render_json(&p.job);
    assert_eq!(
        rendered["TaskGroups"][0]["Volumes"]["data"]["Source"],
        "pgdata"
    );
    assert_eq!(
        rendered["TaskGroups"][0]["Volumes"]["data"]["PerAlloc"],
        true
    );
    assert_eq!(
        rendered["TaskGroups"][0]["Tasks"][0]["VolumeMounts"][1]["Destination"],
        "/etc/certs"
    );
    let again = parse_json(rendered.to_string().as_bytes(), &ParseOptions::default())
        .expect("the rendering parses");
    assert!(again.warnings.is_empty(), "{:?}", again.warnings);
    assert_eq!(again.job, p.job);

    // jobs/parse as written keeps the blocks.
    let (raw, _) = hcl_to_nomad_json(JOB, false, &ParseOptions::default()).expect("parses");
    assert_eq!(raw["TaskGroups"][0]["Volumes"]["certs"]["ReadOnly"], true);
}

#[test]
fn volume_errors_name_the_field_with_nomads_texts() {
    let cases = [
        (
            "volume \"v\" {\n type = \"host\"\n }",
            "",
            r#"group "g": volume "v": source: volume has an empty source"#,
        ),
        (
            "volume \"v\" {\n type = \"nfs\"\n source = \"s\"\n }",
            "",
            r#"group "g": volume "v": type: volume has unrecognized type nfs"#,
        ),
        (
            "volume \"v\" {\n type = \"host\"\n source = \"s\"\n }",
            "volume_mount {\n volume = \"w\"\n destination = \"/w\"\n }",
            r#"group "g": task "t": volume_mount[0]: volume: Volume Mount (0) references undefined volume w"#,
        ),
        (
            "volume \"v\" {\n type = \"host\"\n source = \"s\"\n }",
            "volume_mount {\n volume = \"v\"\n }",
            r#"group "g": task "t": volume_mount[0]: destination: volume mount has an empty destination"#,
        ),
        (
            "volume \"v\" {\n type = \"host\"\n source = \"s\"\n }",
            "volume_mount {\n volume = \"v\"\n destination = \"/v\"\n propagation_mode = \"sideways\"\n }",
            r#"volume_mount[0]: propagation_mode: volume mount has an invalid propagation mode: "sideways""#,
        ),
        (
            "volume \"v\" {\n type = \"host\"\n source = \"s\"\n }",
            "volume_mount {\n volume = \"v\"\n destination = \"/v\"\n propagation_mode = \"bidirectional\"\n }",
            "propagation_mode: \"bidirectional\" is not supported by Caravan",
        ),
        (
            "volume \"v\" {\n type = \"csi\"\n source = \"s\"\n }",
            "",
            r#"group "g": volume "v": type: csi volumes are not supported by Caravan"#,
        ),
        (
            "volume \"v\" {\n type = \"host\"\n source = \"s\"\n access_mode = \"single-node-writer\"\n }",
            "",
            r#"group "g": volume "v": access_mode: is for dynamic host volumes and CSI volumes, which are not supported by Caravan"#,
        ),
        (
            "volume \"v\" {\n type = \"host\"\n source = \"s\"\n sticky = true\n }",
            "",
            r#"group "g": volume "v": sticky: is for dynamic host volumes"#,
        ),
        (
            "volume \"v\" {\n type = \"host\"\n source = \"s\"\n mount_options {\n fs_type = \"ext4\"\n }\n }",
            "",
            r#"group "g": volume "v": mount_options: host volumes cannot have mount options"#,
        ),
        (
            "volume \"v\" {\n type = \"host\"\n source = \"s\"\n per_alloc = true\n }\n update {\n canary = 1\n }",
            "",
            r#"group "g": volume "v": per_alloc: volume cannot be per_alloc when canaries are in use"#,
        ),
    ];
    for (group_lines, task_lines, want) in cases {
        let text = format!(
            "job \"x\" {{\n group \"g\" {{\n {group_lines}\n task \"t\" {{\n driver = \"mock\"\n {task_lines}\n }}\n }}\n}}\n"
        );
        let errs = errors(&text);
        assert!(
            errs.iter().any(|e| e.contains(want)),
            "want {want:?} in {errs:?}"
        );
    }
}

#[test]
fn raw_exec_cannot_mount_volumes() {
    let errs = errors(
        "job \"x\" {\n group \"g\" {\n volume \"v\" {\n type = \"host\"\n source = \"s\"\n }\n task \"t\" {\n driver = \"raw_exec\"\n config {\n command = \"/bin/true\"\n }\n volume_mount {\n volume = \"v\"\n destination = \"/v\"\n }\n }\n }\n}\n",
    );
    assert!(
        errs.iter().any(|e| e
            == r#"group "g": task "t": volume_mount: task driver "raw_exec" for "t" does not support host volumes"#),
        "{errs:?}"
    );
}

#[test]
fn per_alloc_is_refused_for_system_jobs() {
    let errs = errors(
        "job \"x\" {\n type = \"system\"\n group \"g\" {\n volume \"v\" {\n type = \"host\"\n source = \"s\"\n per_alloc = true\n }\n task \"t\" {\n driver = \"mock\"\n }\n }\n}\n",
    );
    assert!(
        errs.iter()
            .any(|e| e.contains("volume cannot be per_alloc for system or sysbatch jobs")),
        "{errs:?}"
    );
}

#[test]
fn what_nomads_api_sends_for_a_host_volume_is_accepted() {
    let p = parse_json(
        json!({"Job": {"ID": "x", "TaskGroups": [{
            "Name": "g",
            "Volumes": {"v": {"Name": "v", "Type": "host", "Source": "s", "ReadOnly": false,
                "Sticky": false, "AccessMode": "", "AttachmentMode": "", "MountOptions": null,
                "PerAlloc": false}},
            "Tasks": [{"Name": "t", "Driver": "mock", "VolumeMounts": [{"Volume": "v",
                "Destination": "/v", "ReadOnly": false, "PropagationMode": "private",
                "SELinuxLabel": ""}]}]
        }]}})
        .to_string()
        .as_bytes(),
        &ParseOptions::default(),
    )
    .expect("parses");
    validate(&p.job).expect("valid");
    assert_eq!(p.job.task_groups[0].volumes["v"].source, "s");
}
