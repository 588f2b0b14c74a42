//! A group network's `hostname` and `dns` block: read from HCL and JSON,
//! rendered back unchanged, validated naming the field, refused for tasks
//! that cannot take them, and a change to them replaces the group's allocs.

use caravan_jobspec::{ParseOptions, diff, parse_hcl, parse_json, render_json, validate};
use serde_json::json;

const JOB: &str = r#"
job "shop" {
  group "web" {
    network {
      mode     = "bridge"
      hostname = "web-${NOMAD_ALLOC_INDEX}"
      port "http" {
        to = 8080
      }
      dns {
        servers  = ["192.0.2.53", "2001:db8::53"]
        searches = ["svc.example"]
        options  = ["ndots:2"]
      }
    }
    task "server" {
      driver = "exec"
      config {
        command = "/bin/sh"
      }
    }
    task "proxy" {
      driver = "docker"
      config {
        image       = "busybox:1"
        extra_hosts = ["db:10.1.2.3"]
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
fn hostname_and_dns_are_read_and_rendered_back() {
    let p = parse_hcl(JOB, &ParseOptions::default()).expect("parses");
    validate(&p.job).expect("valid");
    let net = &p.job.task_groups[0].networks[0];
    assert_eq!(net.hostname, "web-${NOMAD_ALLOC_INDEX}");
    let dns = net.dns.as_ref().expect("dns");
    assert_eq!(dns.servers, vec!["192.0.2.53", "2001:db8::53"]);
    assert_eq!(dns.searches, vec!["svc.example"]);
    assert_eq!(dns.options, vec!["ndots:2"]);

    let rendered = render_json(&p.job);
    let rnet = &rendered["TaskGroups"][0]["Networks"][0];
    assert_eq!(rnet["Hostname"], "web-${NOMAD_ALLOC_INDEX}");
    assert_eq!(rnet["DNS"]["Servers"][1], "2001:db8::53");
    let again = parse_json(
        serde_json::to_vec(&json!({ "Job": rendered }))
            .expect("serializes")
            .as_slice(),
        &ParseOptions::default(),
    )
    .expect("the rendered job parses");
    assert_eq!(again.job.task_groups, p.job.task_groups);
}

#[test]
fn a_changed_hostname_or_dns_replaces_the_allocs() {
    let old = parse_hcl(JOB, &ParseOptions::default())
        .expect("parses")
        .job;
    for (from, to) in [
        (
            "hostname = \"web-${NOMAD_ALLOC_INDEX}\"",
            "hostname = \"web\"",
        ),
        ("options  = [\"ndots:2\"]", "options  = [\"ndots:3\"]"),
    ] {
        let new = parse_hcl(&patched(from, to), &ParseOptions::default())
            .expect("parses")
            .job;
        assert!(
            caravan_model::tasks_updated_in(&old, &new, "web"),
            "{to} is a destructive update"
        );
        let d = diff(Some(&old), &new, true).expect("diffs");
        let shown = format!("{:?}", d.task_groups[0]);
        assert!(
            shown.contains("Hostname") || shown.contains("Options"),
            "{to}: {shown}"
        );
    }
}

#[test]
fn errors_name_the_field() {
    let cases = [
        (
            (
                "hostname = \"web-${NOMAD_ALLOC_INDEX}\"",
                "hostname = \"web server\"",
            ),
            "group \"web\": network[0]: hostname: Hostname is not a valid DNS name: ' ' in label \"web server\"",
        ),
        (
            ("mode     = \"bridge\"", "mode     = \"host\""),
            "group \"web\": network[0]: hostname: applies to a bridge or none network only",
        ),
        (
            ("\"192.0.2.53\",", "\"dns.example\","),
            "group \"web\": network[0]: dns.servers[0]: \"dns.example\" is not an IP address",
        ),
        (
            ("options  = [\"ndots:2\"]", "options  = [\"ndots: 2\"]"),
            "group \"web\": network[0]: dns.options[0]: \"ndots: 2\" is not a resolver option",
        ),
        (
            (
                "searches = [\"svc.example\"]",
                "searches = [\"svc.example\"]\n        domain = \"x\"",
            ),
            "domain: unsupported argument",
        ),
        (
            ("driver = \"exec\"", "driver = \"raw_exec\""),
            "group \"web\": task \"server\": driver: \"raw_exec\" tasks run in the node's own file system, so the group network's hostname and dns cannot reach them",
        ),
        (
            (
                "image       = \"busybox:1\"",
                "image       = \"busybox:1\"\n        hostname = \"p\"",
            ),
            "group \"web\": task \"proxy\": config.hostname: cannot be set for a task that joins the group's bridge/none network",
        ),
        (
            (
                "image       = \"busybox:1\"",
                "image       = \"busybox:1\"\n        network_mode = \"host\"\n        dns_servers = [\"10.0.0.1\"]",
            ),
            "group \"web\": task \"proxy\": config.dns_servers: conflicts with the group network's dns block",
        ),
        (
            (
                "image       = \"busybox:1\"",
                "image       = \"busybox:1\"\n        network_mode = \"host\"",
            ),
            "group \"web\": task \"proxy\": config.network_mode: keeps the task out of the group's bridge/none network, so the group network's hostname cannot reach it",
        ),
    ];
    for ((from, to), want) in cases {
        let errs = errors(&patched(from, to));
        assert!(
            errs.iter().any(|e| e.contains(want)),
            "want {want:?} in {errs:?}"
        );
    }
    // A docker task with a network of its own may set its hostname.
    let own = patched(
        "image       = \"busybox:1\"",
        "image       = \"busybox:1\"\n        network_mode = \"host\"\n        hostname = \"p\"",
    );
    assert_eq!(errors(&own), Vec::<String>::new());
    // A hostname at task level is the group's setting.
    let task_level = r#"
job "j" {
  group "g" {
    task "t" {
      driver = "exec"
      config { command = "/bin/true" }
      resources {
        network {
          hostname = "x"
        }
      }
    }
  }
}
"#;
    let errs = errors(task_level);
    assert!(
        errs.iter()
            .any(|e| e.contains("resources.network[0]: hostname: is a group network setting")),
        "{errs:?}"
    );
}

#[test]
fn json_dns_with_an_unknown_field_is_an_error_naming_it() {
    let p = parse_hcl(JOB, &ParseOptions::default()).expect("parses");
    let mut job = render_json(&p.job);
    job["TaskGroups"][0]["Networks"][0]["DNS"]["Servrs"] = json!(["10.0.0.1"]);
    let body = serde_json::to_vec(&json!({ "Job": job })).expect("serializes");
    let err = parse_json(&body, &ParseOptions::default()).expect_err("refused");
    assert!(
        err.to_string()
            .contains("dns: Servrs: unknown field of a dns block"),
        "{err}"
    );
}
