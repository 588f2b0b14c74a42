use crate::{ParseOptions, parse_hcl, validate};

/// The errors of the job `hcl`, as Nomad lists them.
fn errors(hcl: &str) -> Vec<String> {
    let parsed = parse_hcl(hcl, &ParseOptions::default()).expect("the job parses");
    match validate(&parsed.job) {
        Ok(()) => Vec::new(),
        Err(e) => e.messages(),
    }
}

/// A job of one docker task with `config` and a group port `db`.
fn docker_job(config: &str) -> String {
    format!(
        r#"job "example" {{
  datacenters = ["*"]
  group "cache" {{
    network {{
      port "db" {{
        to = 6379
      }}
    }}
    task "redis" {{
      driver = "docker"
      config {{
{config}
      }}
    }}
  }}
}}"#
    )
}

fn has(errs: &[String], want: &str) -> bool {
    errs.iter().any(|e| e.contains(want))
}

#[test]
fn the_job_nomad_job_init_writes_is_valid() {
    let errs = errors(&docker_job(
        r#"        image = "redis:7"
        ports = ["db"]
        auth_soft_fail = true"#,
    ));
    assert!(errs.is_empty(), "{errs:?}");
}

#[test]
fn every_supported_option_type_checks() {
    let errs = errors(&docker_job(
        r#"        image = "busybox:1"
        command = "httpd"
        args = ["-f", "-p", "${NOMAD_PORT_db}"]
        entrypoint = ["/bin/sh", "-c"]
        work_dir = "/local"
        hostname = "web"
        force_pull = false
        image_pull_timeout = "2m"
        ports = ["db"]
        network_mode = "bridge"
        volumes = ["local/data:/data:ro"]
        cpu_hard_limit = true
        cpu_cfs_period = 100000
        memory_hard_limit = 512
        init = true
        dns_servers = ["127.0.0.1"]
        extra_hosts = ["db.local:127.0.0.1"]
        oom_score_adj = 100
        pids_limit = 64
        readonly_rootfs = false
        shm_size = 65536
        labels {
          team = "web"
        }
        sysctl = {
          "net.core.somaxconn" = "1024"
        }
        ulimit {
          nofile = "2048:4096"
        }
        healthchecks {
          disable = true
        }
        mount {
          type   = "tmpfs"
          target = "/scratch"
          tmpfs_options {
            size = 100000
          }
        }
        mount {
          type   = "bind"
          source = "local/conf"
          target = "/etc/app"
          readonly = true
        }"#,
    ));
    assert!(errs.is_empty(), "{errs:?}");
}

#[test]
fn unknown_keys_and_wrong_types_name_the_field() {
    let errs = errors(&docker_job(
        r#"        image = "redis:7"
        imagee = "typo"
        force_pull = "yes"
        ports = "db"
        labels = ["x"]"#,
    ));
    assert!(
        has(
            &errs,
            r#"group "cache": task "redis": config.imagee: the docker driver has no option "imagee""#
        ),
        "{errs:?}"
    );
    assert!(
        has(&errs, "config.force_pull: expected a bool, got a string"),
        "{errs:?}"
    );
    assert!(
        has(
            &errs,
            "config.ports: expected a list of strings, got a string"
        ),
        "{errs:?}"
    );
    assert!(has(&errs, "config.labels: expected a map"), "{errs:?}");
    let errs = errors(&docker_job(r#"        command = "x""#));
    assert!(has(&errs, "config.image: required"), "{errs:?}");
}

#[test]
fn ports_must_be_the_groups_and_volumes_stay_in_the_task_dir() {
    let errs = errors(&docker_job(
        r#"        image = "redis:7"
        ports = ["db", "http"]
        volumes = ["../../etc:/etc", "/srv:/srv", "local:data"]
        mount {
          type = "bind"
          source = "../secret"
          target = "/s"
        }
        mount {
          type = "volume"
          target = "/v"
        }"#,
    ));
    assert!(
        has(
            &errs,
            r#"config.ports[1]: port label "http" is not defined in the group's network"#
        ),
        "{errs:?}"
    );
    assert!(!has(&errs, "config.ports[0]"), "{errs:?}");
    assert!(
        has(
            &errs,
            "config.volumes[0]: \"../../etc:/etc\": the relative source leaves the task directory"
        ),
        "{errs:?}"
    );
    assert!(
        !has(&errs, "config.volumes[1]"),
        "an absolute path is the client's decision: {errs:?}"
    );
    assert!(
        has(
            &errs,
            "config.volumes[2]: \"local:data\": the target must be an absolute path"
        ),
        "{errs:?}"
    );
    assert!(has(&errs, "config.mount[0].source"), "{errs:?}");
    assert!(
        has(
            &errs,
            "config.mount[1].type: named Docker volumes are not supported"
        ),
        "{errs:?}"
    );
}

#[test]
fn options_caravan_does_not_honour_are_refused_by_name() {
    let errs = errors(&docker_job(
        r#"        image = "redis:7"
        privileged = true
        network_mode = "my-net"
        cap_add = ["NET_ADMIN"]
        logging {
          type = "syslog"
        }
        auth {
          username = "u"
        }"#,
    ));
    for want in [
        "config.privileged: not supported by Caravan's docker driver",
        "config.network_mode: \"my-net\" is not supported",
        "config.cap_add: not supported by Caravan's docker driver",
        "config.logging: not supported by Caravan's docker driver",
        "config.auth: not supported by Caravan's docker driver: registry credentials",
    ] {
        assert!(has(&errs, want), "{want} not in {errs:?}");
    }
    let errs = errors(&docker_job(
        r#"        image = "redis:7"
        ports = ["db"]
        port_map {
          db = 6379
        }"#,
    ));
    assert!(
        has(&errs, "config.port_map: use of port_map and ports together"),
        "{errs:?}"
    );
}

#[test]
fn raw_exec_exec_and_mock_configs_are_checked_too() {
    let job = |driver: &str, config: &str| {
        format!(
            r#"job "j" {{
  datacenters = ["dc1"]
  group "g" {{
    task "t" {{
      driver = "{driver}"
      config {{
        {config}
      }}
    }}
  }}
}}"#
        )
    };
    assert!(errors(&job("raw_exec", r#"command = "/bin/true""#)).is_empty());
    let errs = errors(&job("raw_exec", r#"args = ["x"]"#));
    assert!(
        has(&errs, r#"task "t": config.command: required"#),
        "{errs:?}"
    );
    let errs = errors(&job(
        "raw_exec",
        r#"command = "x"
        oom_score_adj = 5"#,
    ));
    assert!(
        has(
            &errs,
            "config.oom_score_adj: not supported by Caravan's raw_exec driver"
        ),
        "{errs:?}"
    );
    assert!(
        errors(&job(
            "exec",
            r#"command = "/bin/true"
        cap_add = ["chown"]"#
        ))
        .is_empty()
    );
    let errs = errors(&job(
        "exec",
        r#"command = "/bin/true"
        pid_mode = "shared"
        cap_drop = ["all", "cap_nope"]"#,
    ));
    assert!(
        has(&errs, r#"config.pid_mode: must be "private" or "host""#),
        "{errs:?}"
    );
    assert!(
        has(
            &errs,
            r#"config.cap_drop[1]: unknown capability "cap_nope""#
        ),
        "{errs:?}"
    );
    let errs = errors(&job(
        "exec",
        r#"command = "/bin/true"
        privileged = true"#,
    ));
    assert!(!errs.is_empty(), "unknown keys are refused: {errs:?}");
    assert!(
        errors(&job(
            "mock",
            r#"run_for = "10s"
        exit_code = 2"#
        ))
        .is_empty()
    );
    let errs = errors(&job("mock", r#"run_for = "soon""#));
    assert!(
        has(&errs, "config.run_for: expected a duration"),
        "{errs:?}"
    );
    let errs = errors(&job("mock", r#"stdout_repeat = 3"#));
    assert!(
        has(
            &errs,
            "config.stdout_repeat: not supported by Caravan's mock driver"
        ),
        "{errs:?}"
    );
    // A driver Caravan has no schema for is left to its node.
    assert!(errors(&job("qemu", r#"image_path = "/x.img""#)).is_empty());
}
