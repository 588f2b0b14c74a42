//! `artifact`, `template` and `identity` blocks of a task: read from HCL and JSON with
//! Nomad's defaults, validated with Nomad's texts, the parts Caravan's clients cannot
//! honour refused by name, rendered back unchanged, and shown by plan diffs as
//! destructive updates.

use caravan_jobspec::{
    FORCES_DESTRUCTIVE_UPDATE, JobspecError, ParseOptions, canonicalize, diff, parse_hcl,
    parse_json, render_json, validate, warnings,
};
use serde_json::json;

const SHA256: &str = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

const JOB: &str = r#"
job "shop" {
  group "web" {
    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
      }
      artifact {
        source      = "https://example.com/app.tar.gz"
        destination = "local/app"
        options {
          checksum = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        }
        headers {
          X-Token = "t"
        }
      }
      artifact {
        source = "https://example.com/run.sh"
        mode   = "file"
        chown  = true
      }
      template {
        data        = "id={{ env \"NOMAD_ALLOC_ID\" }}"
        destination = "local/app.env"
        env         = true
      }
      template {
        source        = "local/tmpl.ctmpl"
        destination   = "local/app.conf"
        change_mode   = "script"
        uid           = 0
        perms         = "0600"
        splay         = "0s"
        change_script {
          command = "/bin/reload"
          args    = ["-f"]
        }
        wait {
          min = "2s"
          max = "10s"
        }
      }
      template {
        data          = "x"
        destination   = "local/sig"
        change_mode   = "signal"
        change_signal = "sigusr1"
      }
      identity {
        env  = true
        file = true
      }
      identity {
        name = "vault"
        aud  = ["vault.io"]
        ttl  = "1h"
        file = true
        change_mode = "signal"
        change_signal = "SIGHUP"
      }
    }
  }
}
"#;

use super::hcl_errors as errors;

fn json_errors(job: serde_json::Value) -> Vec<String> {
    let body = serde_json::to_vec(&json!({ "Job": job })).expect("serializes");
    match parse_json(&body, &ParseOptions::default()) {
        Ok(p) => match validate(&p.job) {
            Ok(()) => Vec::new(),
            Err(e) => e.messages(),
        },
        Err(JobspecError::Invalid(e)) => e.messages(),
        Err(other) => vec![other.to_string()],
    }
}

/// `JOB` with `from` replaced by `to` (which must be there).
fn patched(from: &str, to: &str) -> String {
    assert!(JOB.contains(from), "{from}");
    JOB.replacen(from, to, 1)
}

fn assert_has(errs: &[String], want: &str) {
    assert!(
        errs.iter().any(|e| e.contains(want)),
        "want {want:?} in {errs:?}"
    );
}

#[test]
fn blocks_parse_with_nomads_defaults_and_round_trip() {
    let p = parse_hcl(JOB, &ParseOptions::default()).expect("parses");
    validate(&p.job).expect("valid");
    let t = &p.job.task_groups[0].tasks[0];

    let a = &t.artifacts[0];
    assert_eq!(a.source, "https://example.com/app.tar.gz");
    assert_eq!(
        (a.mode.as_str(), a.destination.as_str()),
        ("any", "local/app")
    );
    assert_eq!(a.options["checksum"], SHA256);
    assert_eq!(a.headers["X-Token"], "t");
    let f = &t.artifacts[1];
    assert_eq!(
        (f.mode.as_str(), f.destination.as_str(), f.chown),
        ("file", "local/run.sh", true),
        "a file artifact lands in local/<its name>"
    );

    let env = &t.templates[0];
    assert_eq!(env.change_mode, "restart");
    assert_eq!(env.splay_ns, 5_000_000_000);
    assert_eq!(env.perms, "0644");
    assert_eq!(
        (env.uid, env.gid),
        (-1, -1),
        "left out: the client's choice"
    );
    assert_eq!(
        (env.left_delimiter.as_str(), env.right_delimiter.as_str()),
        ("{{", "}}")
    );
    assert!(env.env && env.wait.is_none());
    let script = &t.templates[1];
    assert_eq!((script.uid, script.gid), (0, -1), "an explicit 0 is root");
    assert_eq!(script.splay_ns, 0, "an explicit 0s splay stays");
    assert_eq!(script.perms, "0600");
    let cs = script.change_script.as_ref().expect("change_script");
    assert_eq!(cs.command, "/bin/reload");
    assert_eq!(cs.args, vec!["-f"]);
    assert_eq!(cs.timeout_ns, 5_000_000_000);
    let w = script.wait.expect("wait");
    assert_eq!((w.min_ns, w.max_ns), (2_000_000_000, 10_000_000_000));
    assert_eq!(t.templates[2].change_signal, "SIGUSR1");

    assert_eq!(t.identities.len(), 2);
    let d = &t.identities[0];
    assert_eq!(d.name, "default");
    assert_eq!(d.audience, vec!["nomadproject.io"]);
    assert!(d.env && d.file);
    let v = &t.identities[1];
    assert_eq!(v.name, "vault");
    assert_eq!(v.audience, vec!["vault.io"]);
    assert_eq!(v.ttl_ns, 3_600_000_000_000);

    // What `job inspect` prints registers the same job.
    let rendered = render_json(&p.job);
    let task = &rendered["TaskGroups"][0]["Tasks"][0];
    assert_eq!(
        task["Artifacts"][0]["GetterSource"],
        "https://example.com/app.tar.gz"
    );
    assert_eq!(
        task["Templates"][1]["ChangeScript"]["Command"],
        "/bin/reload"
    );
    assert_eq!(task["Templates"][0]["Uid"], json!(null));
    assert_eq!(task["Identity"]["Name"], "default");
    assert_eq!(task["Identities"][0]["Name"], "vault");
    let again = parse_json(
        serde_json::to_vec(&json!({ "Job": rendered }))
            .expect("serializes")
            .as_slice(),
        &ParseOptions::default(),
    )
    .expect("the rendered job parses");
    assert_eq!(again.job.task_groups, p.job.task_groups);

    // Canonicalizing a parsed job changes nothing.
    let mut c = p.job.clone();
    canonicalize(&mut c);
    assert_eq!(c, p.job);
}

#[test]
fn json_blocks_take_nomads_api_defaults() {
    let job = json!({
        "ID": "j", "Name": "j", "Type": "batch",
        "TaskGroups": [{"Name": "g", "Tasks": [{
            "Name": "t", "Driver": "raw_exec", "Config": {"command": "/bin/true"},
            "Artifacts": [{"GetterSource": "https://example.com/a.zip"}],
            "Templates": [{"EmbeddedTmpl": "x", "DestPath": "local/x", "ChangeMode": "signal"}],
            "Identity": {"Name": "default", "Audience": ["nomadproject.io"], "Env": false, "File": false},
        }]}],
    });
    let body = serde_json::to_vec(&json!({ "Job": job })).expect("serializes");
    let p = parse_json(&body, &ParseOptions::default()).expect("parses");
    validate(&p.job).expect("valid");
    let t = &p.job.task_groups[0].tasks[0];
    assert_eq!(t.artifacts[0].mode, "any");
    assert_eq!(t.artifacts[0].destination, "local/");
    let tmpl = &t.templates[0];
    assert_eq!(tmpl.splay_ns, 5_000_000_000);
    assert_eq!(tmpl.perms, "0644");
    assert_eq!(tmpl.change_signal, "SIGHUP", "the signal mode's default");
    assert_eq!((tmpl.uid, tmpl.gid), (-1, -1));
    assert!(
        t.identities.is_empty(),
        "the default identity Nomad gives every task, exposed nowhere, carries nothing"
    );
}

#[test]
fn a_job_built_in_code_gets_the_defaults_at_canonicalization() {
    let p = parse_hcl(JOB, &ParseOptions::default()).expect("parses");
    let mut job = p.job.clone();
    let t = &mut job.task_groups[0].tasks[0];
    t.artifacts[0].mode.clear();
    t.artifacts[1].destination.clear();
    t.templates[0].change_mode.clear();
    t.templates[0].perms.clear();
    t.templates[0].left_delimiter.clear();
    if let Some(s) = t.templates[1].change_script.as_mut() {
        s.timeout_ns = 0;
    }
    t.identities[0].name.clear();
    t.identities[0].audience.clear();
    canonicalize(&mut job);
    assert_eq!(job, p.job);
}

#[test]
fn errors_name_the_field_with_nomads_texts() {
    let cases = [
        (
            ("destination = \"local/app.env\"", "destination = \"\""),
            "template[0]: destination: Must specify a destination for the template",
        ),
        (
            (
                "destination = \"local/app.env\"",
                "destination = \"../../etc/x\"",
            ),
            "template[0]: destination: destination escapes allocation directory",
        ),
        (
            (
                "destination = \"local/app.env\"",
                "destination = \"local/app.conf\"",
            ),
            "template[1]: destination: Template 2 has same destination as 1",
        ),
        (
            (
                "data        = \"id={{ env \\\"NOMAD_ALLOC_ID\\\" }}\"",
                "data = \"\"",
            ),
            "template[0]: source: Must specify a source path or have an embedded template",
        ),
        (
            (
                "data        = \"id={{ env \\\"NOMAD_ALLOC_ID\\\" }}\"",
                "data = \"id={{ env\"",
            ),
            "template[0]: data: template: 1:10: unclosed action",
        ),
        (
            ("change_mode   = \"script\"", "change_mode   = \"reload\""),
            "template[1]: change_mode: Invalid change mode. Must be one of the following: noop, signal, script, restart",
        ),
        (
            ("command = \"/bin/reload\"", "command = \"\""),
            "template[1]: change_script.command: must specify script path value when change mode is script",
        ),
        (
            ("perms         = \"0600\"", "perms         = \"0985\""),
            "template[1]: perms: Failed to parse \"0985\" as octal",
        ),
        (
            ("max = \"10s\"", "max = \"1s\""),
            "template[1]: wait: wait min 2s is greater than max 1s",
        ),
        (
            (
                "        env         = true\n",
                "        env         = true\n        change_mode = \"signal\"\n",
            ),
            "template[0]: env: cannot use signals with env var templates",
        ),
        (
            (
                "source      = \"https://example.com/app.tar.gz\"",
                "source = \"\"",
            ),
            "artifact[0]: source: source must be specified",
        ),
        (
            ("mode   = \"file\"", "mode   = \"tree\""),
            "artifact[1]: mode: invalid artifact mode \"tree\"; must be one of: any, file, dir",
        ),
        (
            (
                "destination = \"local/app\"",
                "destination = \"../../../x\"",
            ),
            "artifact[0]: destination: destination escapes allocation directory",
        ),
        (
            ("checksum = \"sha256:9f86", "checksum = \"sha256:9f"),
            "artifact[0]: options.checksum: invalid sha256 checksum",
        ),
        (
            ("checksum = \"sha256:", "checksum = \"crc:"),
            "artifact[0]: options.checksum: unsupported checksum type: crc",
        ),
        (
            ("name = \"vault\"", "name = \"va ult\""),
            "identity \"va ult\": name: invalid name \"va ult\". Must match regex",
        ),
        (
            ("name = \"vault\"", "name = \"default\""),
            "identity \"default\": name: Duplicate identity name \"default\"",
        ),
        (
            ("aud  = [\"vault.io\"]", "aud  = [\"\"]"),
            "identity \"vault\": aud: an empty string is an invalid audience (1)",
        ),
        (
            (
                "change_mode = \"signal\"\n        change_signal = \"SIGHUP\"",
                "change_mode = \"signal\"",
            ),
            "identity \"vault\": change_signal: change_signal must be specified when using change_mode=\"signal\"",
        ),
        (
            ("change_mode = \"signal\"", "change_mode = \"reload\""),
            "identity \"vault\": change_mode: invalid change_mode: reload",
        ),
        (
            (
                "        env  = true\n        file = true",
                "        env  = true\n        ttl = \"1h\"",
            ),
            "identity \"default\": ttl: ttl for default identity not yet supported",
        ),
        (
            (
                "        env  = true\n        file = true",
                "        env  = true\n        aud = [\"x\"]",
            ),
            "identity \"default\": aud: the default identity's audience is always \"nomadproject.io\"",
        ),
    ];
    for ((from, to), want) in cases {
        let errs = errors(&patched(from, to));
        assert_has(&errs, want);
        assert!(
            errs.iter()
                .all(|e| e.contains("group \"web\": task \"server\"")),
            "{errs:?}"
        );
    }
}

#[test]
fn what_caravans_clients_cannot_honour_is_refused_by_name() {
    let cases = [
        (
            (
                "source      = \"https://example.com/app.tar.gz\"",
                "source = \"git::https://example.com/x.git\"",
            ),
            "artifact[0]: source: the \"git\" getter is not supported by Caravan",
        ),
        (
            (
                "source      = \"https://example.com/app.tar.gz\"",
                "source = \"s3://bucket/key\"",
            ),
            "artifact[0]: source: the \"s3\" getter is not supported by Caravan",
        ),
        (
            (
                "source      = \"https://example.com/app.tar.gz\"",
                "source = \"github.com/hashicorp/nomad\"",
            ),
            "the \"git\" getter is not supported by Caravan",
        ),
        (
            (
                "        chown  = true",
                "        chown  = true\n        insecure = true",
            ),
            "artifact[1]: insecure: is not supported by Caravan",
        ),
        (
            (
                "args    = [\"-f\"]",
                "args    = [\"-f\"]\n          run_on_first_render = true",
            ),
            "template[1]: change_script: run_on_first_render: is not supported by Caravan",
        ),
        (
            ("ttl  = \"1h\"", "ttl  = \"1h\"\n        filepath = \"x\""),
            "identity \"vault\": filepath: filepath (Filepath) is not supported by Caravan",
        ),
        (
            (
                "ttl  = \"1h\"",
                "ttl  = \"1h\"\n        service_name = \"api\"",
            ),
            "identity \"vault\": service_name: service_name (ServiceName) is not supported by Caravan",
        ),
        (
            (
                "ttl  = \"1h\"",
                "ttl  = \"1h\"\n        extra_claims = [\"a\"]",
            ),
            "identity \"vault\": extra_claims: extra_claims (ExtraClaims) is not supported by Caravan",
        ),
    ];
    for ((from, to), want) in cases {
        assert_has(&errors(&patched(from, to)), want);
    }
    let job = |options: serde_json::Value| {
        json!({
            "ID": "j", "Name": "j", "Type": "batch",
            "TaskGroups": [{"Name": "g", "Tasks": [{
                "Name": "t", "Driver": "raw_exec", "Config": {"command": "/bin/true"},
                "Artifacts": [{"GetterSource": "https://example.com/a", "GetterOptions": options}],
            }]}],
        })
    };
    assert_has(
        &json_errors(job(json!({"sshkey": "k"}))),
        "artifact[0]: options.sshkey: artifact option \"sshkey\" is not supported by Caravan",
    );
    assert!(json_errors(job(json!({"archive": "false", "checksum": SHA256}))).is_empty());
}

#[test]
fn vault_grace_is_dropped_with_nomads_warning() {
    let text = patched(
        "        env         = true\n",
        "        env         = true\n        vault_grace = \"15s\"\n",
    );
    let p = parse_hcl(&text, &ParseOptions::default()).expect("parses");
    assert!(
        p.warnings.iter().any(|w| w.contains("template[0]")
            && w.contains("VaultGrace has been deprecated as of Nomad 0.11")),
        "{:?}",
        p.warnings
    );
    validate(&p.job).expect("valid");
}

#[test]
fn identities_are_warned_about_as_nomad_does() {
    let p = parse_hcl(JOB, &ParseOptions::default()).expect("parses");
    let w = warnings(&p.job);
    assert!(
        w.iter().any(|w| w.contains("identity \"default\"")
            && w.contains("using env=true without change_mode=\"restart\"")),
        "{w:?}"
    );
    assert!(
        !w.iter().any(|w| w.contains("without an expiration")),
        "the vault identity has a ttl: {w:?}"
    );
}

#[test]
fn a_changed_template_artifact_or_identity_replaces_the_task() {
    let old = parse_hcl(JOB, &ParseOptions::default())
        .expect("parses")
        .job;
    for (from, to, object) in [
        (
            "destination = \"local/app\"",
            "destination = \"local/app2\"",
            "Artifact",
        ),
        (
            "perms         = \"0600\"",
            "perms         = \"0640\"",
            "Template",
        ),
        ("ttl  = \"1h\"", "ttl  = \"2h\"", "Identity"),
    ] {
        let new = parse_hcl(&patched(from, to), &ParseOptions::default())
            .expect("parses")
            .job;
        let d = diff(Some(&old), &new, false).expect("diffs");
        let task = &d.task_groups[0].tasks[0];
        assert!(
            task.objects.iter().any(|o| o.name == object),
            "{object} shows: {task:?}"
        );
        assert!(
            task.annotations
                .iter()
                .any(|a| a == FORCES_DESTRUCTIVE_UPDATE),
            "{object}: {task:?}"
        );
    }
}

#[test]
fn a_template_calling_consul_or_vault_is_refused_at_submit() {
    for (text, function) in [
        (r#"{{ key \"config/a\" }}"#, "key"),
        (
            r#"{{ with secret \"kv/a\" }}{{ .Data }}{{ end }}"#,
            "secret",
        ),
    ] {
        let errs = errors(&patched(
            "data          = \"x\"",
            &format!("data          = \"{text}\""),
        ));
        assert!(
            errs.iter().any(|e| e
                .starts_with("group \"web\": task \"server\": template[2]: data: ")
                && e.contains(function)),
            "{function}: {errs:?}"
        );
    }
}
