//! HCL2 job files with variables, run through the real `caravan` CLI: the
//! count comes from `-var` over a `-var-file`, or from `NOMAD_VAR_count`, and a
//! value that fails the variable's validation is refused naming the variable.

use caravan_integration_tests::Cluster;

use crate::wait_running;

const JOB_FILE: &str = r#"
variable "count" {
  type        = number
  description = "How many sleepers to run."
  default     = 1
  validation {
    condition     = var.count >= 1 && var.count <= 5
    error_message = "count must be between 1 and 5."
  }
}

variable "seconds" {
  type = number
}

locals {
  script = "echo started; exec sleep ${var.seconds}"
}

job "vars" {
  datacenters = ["*"]

  group "sleepers" {
    count = var.count

    task "sleep" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", local.script]
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
"#;

fn output_text(out: &std::process::Output) -> String {
    format!(
        "status {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn var_flags_files_and_environment_set_the_count() {
    let mut c = Cluster::new("hcl2-vars").await.unwrap();
    c.start_control_plane().await.unwrap();
    c.start_client("node-a", &[("drivers", "raw_exec")])
        .await
        .unwrap();
    let job = c.dir().join("job.nomad.hcl");
    std::fs::write(&job, JOB_FILE).unwrap();
    let prod = c.dir().join("prod.hcl");
    std::fs::write(&prod, "count   = 2\nseconds = 300\n").unwrap();
    let (job, prod) = (job.to_str().unwrap(), prod.to_str().unwrap());

    // -var wins over the -var-file.
    let out = c
        .cli(&[
            "job",
            "run",
            "-detach",
            "-var",
            "count=3",
            "-var-file",
            prod,
            job,
        ])
        .await
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    wait_running(&c, "vars", 3).await;

    // NOMAD_VAR_count, with the file's count overridden by nothing else.
    let out = c
        .cli_with_env(
            &["job", "run", "-detach", "-var=seconds=300", job],
            &[("NOMAD_VAR_count", "4")],
        )
        .await
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    wait_running(&c, "vars", 4).await;

    // A value the validation refuses names the variable; nothing is submitted.
    let out = c
        .cli_with_env(
            &["job", "run", "-detach", "-var", "seconds=1", job],
            &[("NOMAD_VAR_count", "9")],
        )
        .await
        .unwrap();
    let text = output_text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains(
            "variable \"count\": Invalid value for env variable: count must be between 1 and 5."
        ),
        "{text}"
    );

    // job validate and job plan read the same flags.
    let out = c
        .cli(&["job", "validate", "-var", "seconds=1", job])
        .await
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Job validation successful"));
    let out = c.cli(&["job", "validate", job]).await.unwrap();
    let text = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("Unset variable \"seconds\""), "{text}");
    let out = c
        .cli(&["job", "plan", "-var", "count=4", "-var-file", prod, job])
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "no change: {}",
        output_text(&out)
    );
    assert!(c.exited().is_empty(), "{:?}", c.exited());
}
