//! Issue 44's templates with real clients: a raw_exec task's config file and
//! environment come from templates reading a Variable; updating the Variable
//! re-renders them and restarts (or signals) the task; a missing key with
//! `error_on_missing_key`, or a Variable that never appears, fails the task
//! with an event that says why.

use std::path::Path;

use caravan_integration_tests::{Cluster, HttpApi, Progress, jobs, wait_for};
use caravan_proto::{AllocClientStatus, Allocation};
use serde_json::{Value, json};

use crate::{
    Reaper, SECOND_NS, STEP, job_allocs, pid_dir, register, set, task_events, wait_running_version,
    wait_task_event,
};

/// A control plane serving Variables and one raw_exec client with `extra`
/// settings.
async fn cluster(name: &str, extra: &[(&str, &str)]) -> Cluster {
    let mut c = Cluster::new(name).await.unwrap();
    c.start_control_plane_with_variables().await.unwrap();
    let mut settings = vec![("drivers", "raw_exec")];
    settings.extend_from_slice(extra);
    c.start_client(&format!("{name}-node"), &settings)
        .await
        .unwrap();
    c
}

/// Writes the Variable `path` with `items` through the HTTP API.
async fn put_var(http: &HttpApi, path: &str, items: Value) {
    let reply = http
        .put_json(&format!("/v1/var/{path}"), &json!({ "Items": items }))
        .await
        .unwrap();
    reply.ok_json().unwrap();
}

/// A template block in Nomad's JSON: `data` into `dest`, re-rendered within
/// a second of a change, applied at once.
fn template(data: &str, dest: &str, change_mode: &str) -> Value {
    json!({
        "EmbeddedTmpl": data,
        "DestPath": dest,
        "ChangeMode": change_mode,
        "Splay": 0,
        "Wait": { "Min": SECOND_NS / 5, "Max": SECOND_NS },
    })
}

/// Waits until `file` holds a line equal to `line`; returns the whole text.
async fn wait_line(file: &Path, line: &str) -> String {
    wait_for(
        &format!("{} to hold {line:?}", file.display()),
        STEP,
        async || {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            Ok(if text.lines().any(|l| l == line) {
                Progress::Done(text)
            } else {
                Progress::Waiting(text)
            })
        },
    )
    .await
    .unwrap()
}

/// The events of task `t` of `alloc`.
fn events(alloc: &Allocation) -> Vec<(String, String)> {
    task_events(alloc, "t")
}

/// Waits until the job's only alloc records `(kind, message)` for task `t`.
async fn wait_event(c: &Cluster, job_id: &str, kind: &str, message: &str) -> Allocation {
    wait_task_event(c, job_id, "t", kind, message).await
}

/// Waits for the job's alloc to have failed; returns it.
async fn wait_failed(c: &Cluster, job_id: &str) -> Allocation {
    wait_for(&format!("{job_id}'s alloc to fail"), STEP, async || {
        let allocs = job_allocs(&c.state, job_id).await?;
        Ok(
            match allocs
                .iter()
                .find(|a| a.client_status() == AllocClientStatus::Failed)
            {
                Some(a) => Progress::Done(a.clone()),
                None => Progress::Waiting(format!(
                    "{:?}",
                    allocs.iter().map(events).collect::<Vec<_>>()
                )),
            },
        )
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_reads_a_variable_and_its_update_re_renders_and_restarts_the_task() {
    let c = cluster("templates-restart", &[]).await;
    let dir = pid_dir(&c);
    let _reaper = Reaper(dir.clone());
    let http = c.http().unwrap();
    put_var(&http, "nomad/jobs/app", json!({ "greeting": "hello" })).await;
    let log = dir.join("app.log");
    // Each start logs the rendered file and the env template's variable.
    let script = format!(
        "echo $$ > {pids}/$NOMAD_ALLOC_ID.pid; \
         cat local/app.conf >> {log}; echo \"env=$GREETING\" >> {log}; exec sleep 300",
        pids = dir.display(),
        log = log.display()
    );
    let mut job = jobs::service_job("app", 1, jobs::raw_exec_task(&script));
    let mut env = template(
        "{{ with nomadVar \"nomad/jobs/app\" }}GREETING={{ .greeting }}{{ end }}\n",
        "secrets/app.env",
        "restart",
    );
    env["Envvars"] = json!(true);
    set(
        &mut job,
        "/Job/TaskGroups/0/Tasks/0/Templates",
        json!([
            template(
                "{{ with nomadVar \"nomad/jobs/app\" }}greeting={{ .greeting }}{{ end }}\n",
                "local/app.conf",
                "restart",
            ),
            env,
        ]),
    );
    register(&http, &job).await;
    wait_running_version(&c, "app", 1, 0).await;
    let text = wait_line(&log, "env=hello").await;
    assert!(text.lines().any(|l| l == "greeting=hello"), "{text}");

    put_var(&http, "nomad/jobs/app", json!({ "greeting": "bonjour" })).await;
    let text = wait_line(&log, "env=bonjour").await;
    assert!(text.lines().any(|l| l == "greeting=bonjour"), "{text}");
    // Restarted in place (one alloc), once.
    let alloc = wait_event(
        &c,
        "app",
        "Restart Signaled",
        "Template with change_mode restart re-rendered",
    )
    .await;
    assert_eq!(alloc.task_states["t"].restarts, 1, "{:?}", events(&alloc));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_template_change_signals_the_running_task_without_a_restart() {
    let c = cluster("templates-signal", &[]).await;
    let dir = pid_dir(&c);
    let _reaper = Reaper(dir.clone());
    let http = c.http().unwrap();
    put_var(&http, "nomad/jobs/sig", json!({ "v": "1" })).await;
    let log = dir.join("sig.log");
    // Reloads (logs the file again) on SIGHUP.
    let script = format!(
        "echo $$ > {pids}/$NOMAD_ALLOC_ID.pid; \
         trap 'cat local/v.txt >> {log}' HUP; cat local/v.txt >> {log}; \
         while true; do sleep 0.1; done",
        pids = dir.display(),
        log = log.display()
    );
    let mut job = jobs::service_job("sig", 1, jobs::raw_exec_task(&script));
    let mut tmpl = template(
        "{{ with nomadVar \"nomad/jobs/sig\" }}v={{ .v }}{{ end }}\n",
        "local/v.txt",
        "signal",
    );
    tmpl["ChangeSignal"] = json!("SIGHUP");
    set(
        &mut job,
        "/Job/TaskGroups/0/Tasks/0/Templates",
        json!([tmpl]),
    );
    register(&http, &job).await;
    wait_running_version(&c, "sig", 1, 0).await;
    wait_line(&log, "v=1").await;
    put_var(&http, "nomad/jobs/sig", json!({ "v": "2" })).await;
    wait_line(&log, "v=2").await;
    let alloc = wait_event(&c, "sig", "Signaling", "Template re-rendered").await;
    assert_eq!(alloc.task_states["t"].restarts, 0, "{:?}", events(&alloc));
    let starts = events(&alloc)
        .iter()
        .filter(|(t, _)| t == "Started")
        .count();
    assert_eq!(starts, 1, "{:?}", events(&alloc));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_key_or_a_variable_that_never_appears_fails_the_task_with_the_reason() {
    let c = cluster("templates-fail", &[("template_render_timeout_ms", "1500")]).await;
    let http = c.http().unwrap();
    put_var(&http, "nomad/jobs/strict", json!({ "present": "x" })).await;
    let no_restarts =
        json!({ "Attempts": 0, "Mode": "fail", "Delay": SECOND_NS, "Interval": 60 * SECOND_NS });

    let mut job = jobs::service_job("strict", 1, jobs::raw_exec_task("exec sleep 300"));
    let mut tmpl = template(
        "{{ with nomadVar \"nomad/jobs/strict\" }}{{ .absent }}{{ end }}",
        "local/x",
        "restart",
    );
    tmpl["ErrMissingKey"] = json!(true);
    set(
        &mut job,
        "/Job/TaskGroups/0/Tasks/0/Templates",
        json!([tmpl]),
    );
    set(
        &mut job,
        "/Job/TaskGroups/0/RestartPolicy",
        no_restarts.clone(),
    );
    set(
        &mut job,
        "/Job/TaskGroups/0/ReschedulePolicy",
        json!({ "Attempts": 0, "Unlimited": false }),
    );
    register(&http, &job).await;
    let alloc = wait_failed(&c, "strict").await;
    let failed = events(&alloc);
    let hook = failed
        .iter()
        .find(|(t, _)| t == "Task hook failed")
        .unwrap_or_else(|| panic!("{failed:?}"));
    assert!(hook.1.contains("absent"), "{hook:?}");
    assert!(!failed.iter().any(|(t, _)| t == "Started"), "{failed:?}");

    let mut job = jobs::service_job("waits", 1, jobs::raw_exec_task("exec sleep 300"));
    let tmpl = template(
        "{{ with nomadVar \"nomad/jobs/never\" }}{{ .x }}{{ end }}",
        "local/x",
        "restart",
    );
    set(
        &mut job,
        "/Job/TaskGroups/0/Tasks/0/Templates",
        json!([tmpl]),
    );
    set(&mut job, "/Job/TaskGroups/0/RestartPolicy", no_restarts);
    set(
        &mut job,
        "/Job/TaskGroups/0/ReschedulePolicy",
        json!({ "Attempts": 0, "Unlimited": false }),
    );
    register(&http, &job).await;
    let alloc = wait_failed(&c, "waits").await;
    let failed = events(&alloc);
    let hook = failed
        .iter()
        .find(|(t, _)| t == "Task hook failed")
        .unwrap_or_else(|| panic!("{failed:?}"));
    assert!(
        hook.1.contains(
            "not rendered within 1.5s; missing: nomad.var.block(nomad/jobs/never@default)"
        ),
        "{hook:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_lists_a_services_instances_and_follows_them_going_away() {
    let c = cluster("templates-services", &[]).await;
    let dir = pid_dir(&c);
    let _reaper = Reaper(dir.clone());
    let http = c.http().unwrap();
    // A server registering service "web" on its dynamic port.
    let server = format!(
        "echo $$ > {}/$NOMAD_ALLOC_ID.pid; exec sleep 300",
        dir.display()
    );
    let mut web = jobs::service_job("web", 1, jobs::raw_exec_task(&server));
    set(
        &mut web,
        "/Job/TaskGroups/0/Networks",
        json!([{ "DynamicPorts": [{ "Label": "http" }] }]),
    );
    set(
        &mut web,
        "/Job/TaskGroups/0/Services",
        json!([{ "Name": "web", "PortLabel": "http", "Provider": "nomad" }]),
    );
    register(&http, &web).await;
    let web_alloc = wait_running_version(&c, "web", 1, 0).await.remove(0);
    let port = web_alloc
        .allocated_resources
        .as_ref()
        .and_then(|r| r.shared.as_ref())
        .and_then(|s| s.ports.iter().find(|p| p.label == "http"))
        .map(|p| p.value)
        .expect("the alloc's http port");

    // A consumer whose config lists the instances; each start logs it.
    let log = dir.join("upstreams.log");
    let script = format!(
        "echo $$ > {pids}/$NOMAD_ALLOC_ID.pid; cat local/upstreams >> {log}; exec sleep 300",
        pids = dir.display(),
        log = log.display()
    );
    let mut consumer = jobs::service_job("consumer", 1, jobs::raw_exec_task(&script));
    set(
        &mut consumer,
        "/Job/TaskGroups/0/Tasks/0/Templates",
        json!([template(
            "upstreams={{ range nomadService \"web\" }}{{ .Address }}:{{ .Port }},{{ end }}\n",
            "local/upstreams",
            "restart",
        )]),
    );
    register(&http, &consumer).await;
    let text = wait_for("the consumer to log one upstream", STEP, async || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        Ok(if text.contains(&format!(":{port},")) {
            Progress::Done(text)
        } else {
            Progress::Waiting(text)
        })
    })
    .await
    .unwrap();
    assert!(text.starts_with("upstreams="), "{text}");

    // The server stops: its instance is deregistered, the consumer re-renders.
    let reply = http.delete("/v1/job/web").await.unwrap();
    reply.ok_json().unwrap();
    wait_for(
        "the consumer to log no upstream after one",
        STEP,
        async || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let after = lines
                .iter()
                .position(|l| l.contains(&format!(":{port},")))
                .map(|i| &lines[i + 1..]);
            Ok(match after {
                Some(rest) if rest.contains(&"upstreams=") => Progress::Done(()),
                _ => Progress::Waiting(text),
            })
        },
    )
    .await
    .unwrap();
    wait_event(
        &c,
        "consumer",
        "Restart Signaled",
        "Template with change_mode restart re-rendered",
    )
    .await;
}

/// A job file as Nomad users write it: an env template and a config file
/// from a Variable, run with `caravan job run`.
const HCL_JOB: &str = r#"
job "hcl-app" {
  datacenters = ["dc1"]

  group "app" {
    restart {
      attempts = 0
      mode     = "fail"
    }

    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "cat local/app.conf > ${LOG}; echo \"port=$APP_PORT\" >> ${LOG}; exec sleep 300"]
      }

      env {
        LOG = "LOG_PATH"
      }

      template {
        data        = <<EOH
{{- with nomadVar "nomad/jobs/hcl-app" -}}
APP_PORT={{ .port }}
{{- end }}
EOH
        destination = "secrets/app.env"
        env         = true
      }

      template {
        data        = <<EOH
[server]
{{ range $k, $v := nomadVar "nomad/jobs/hcl-app" -}}
{{ $k }} = {{ $v | toUpper }}
{{ end -}}
EOH
        destination = "local/app.conf"
        change_mode = "noop"
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nomad_job_file_with_templates_runs_unchanged_through_the_cli() {
    let c = cluster("templates-hcl", &[]).await;
    let dir = pid_dir(&c);
    let http = c.http().unwrap();
    put_var(
        &http,
        "nomad/jobs/hcl-app",
        json!({ "port": "8080", "mode": "prod" }),
    )
    .await;
    let log = dir.join("hcl-app.log");
    let file = c.dir().join("app.nomad.hcl");
    std::fs::write(
        &file,
        HCL_JOB.replace("LOG_PATH", &log.display().to_string()),
    )
    .unwrap();
    let file = file.display().to_string();
    let out = c.cli(&["job", "run", "-detach", &file]).await.unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = wait_line(&log, "port=8080").await;
    assert_eq!(text, "[server]\nmode = PROD\nport = 8080\nport=8080\n");
    let allocs = wait_running_version(&c, "hcl-app", 1, 0).await;
    let alloc = &allocs[0];
    // The env file is in the task's secrets dir, mode 0644 as Nomad's default.
    let env_file = c
        .dir()
        .join("data-templates-hcl-node/allocs")
        .join(&alloc.id)
        .join("t/secrets/app.env");
    let meta =
        std::fs::metadata(&env_file).unwrap_or_else(|e| panic!("{}: {e}", env_file.display()));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(meta.permissions().mode() & 0o777, 0o644);
    assert_eq!(
        std::fs::read_to_string(&env_file).unwrap(),
        "APP_PORT=8080\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_template_change_runs_the_script_inside_the_running_task() {
    let c = cluster("templates-script", &[]).await;
    let dir = pid_dir(&c);
    let _reaper = Reaper(dir.clone());
    let http = c.http().unwrap();
    put_var(&http, "nomad/jobs/scr", json!({ "v": "1" })).await;
    let log = dir.join("scr.log");
    let script = format!(
        "echo $$ > {pids}/$NOMAD_ALLOC_ID.pid; cat local/v.txt >> {log}; exec sleep 300",
        pids = dir.display(),
        log = log.display()
    );
    let mut job = jobs::service_job("scr", 1, jobs::raw_exec_task(&script));
    let mut tmpl = template(
        "{{ with nomadVar \"nomad/jobs/scr\" }}v={{ .v }}{{ end }}\n",
        "local/v.txt",
        "script",
    );
    // The script runs in the task's directory and logs what it reloads.
    tmpl["ChangeScript"] = json!({
        "Command": "/bin/sh",
        "Args": ["-c", format!("sed 's/^/reloaded /' local/v.txt >> {}", log.display())],
        "Timeout": 5 * SECOND_NS,
        "FailOnError": true,
    });
    set(
        &mut job,
        "/Job/TaskGroups/0/Tasks/0/Templates",
        json!([tmpl]),
    );
    register(&http, &job).await;
    wait_running_version(&c, "scr", 1, 0).await;
    wait_line(&log, "v=1").await;
    put_var(&http, "nomad/jobs/scr", json!({ "v": "2" })).await;
    let text = wait_line(&log, "reloaded v=2").await;
    assert_eq!(text, "v=1\nreloaded v=2\n", "ran once, no restart");
    let alloc = wait_event(
        &c,
        "scr",
        "Task hook message",
        "Template successfully ran script /bin/sh with arguments: [-c sed 's/^/reloaded /' local/v.txt >> LOG]. Exit code: 0"
            .replace("LOG", &log.display().to_string())
            .as_str(),
    )
    .await;
    assert_eq!(alloc.task_states["t"].restarts, 0, "{:?}", events(&alloc));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_file_fetched_as_an_artifact_is_rendered_from_its_source() {
    let c = cluster("templates-source", &[]).await;
    let dir = pid_dir(&c);
    let _reaper = Reaper(dir.clone());
    let http = c.http().unwrap();
    put_var(&http, "nomad/jobs/fromfile", json!({ "who": "artifact" })).await;
    // The template text ships as an artifact (a file on the node here); the
    // artifact hook runs before the template hook, so `source` finds it.
    let tpl = c.dir().join("greeting.tpl");
    std::fs::write(
        &tpl,
        "[[ with nomadVar \"nomad/jobs/fromfile\" ]]hello from [[ .who ]][[ end ]]\n",
    )
    .unwrap();
    let log = dir.join("fromfile.log");
    let script = format!(
        "echo $$ > {pids}/$NOMAD_ALLOC_ID.pid; cat local/greeting >> {log}; exec sleep 300",
        pids = dir.display(),
        log = log.display()
    );
    let mut job = jobs::service_job("fromfile", 1, jobs::raw_exec_task(&script));
    set(
        &mut job,
        "/Job/TaskGroups/0/Tasks/0/Artifacts",
        json!([{ "GetterSource": format!("file://{}", tpl.display()), "RelativeDest": "local/" }]),
    );
    set(
        &mut job,
        "/Job/TaskGroups/0/Tasks/0/Templates",
        json!([{
            "SourcePath": "local/greeting.tpl",
            "DestPath": "local/greeting",
            "LeftDelim": "[[",
            "RightDelim": "]]",
        }]),
    );
    register(&http, &job).await;
    let text = wait_line(&log, "hello from artifact").await;
    assert_eq!(text, "hello from artifact\n");
}
