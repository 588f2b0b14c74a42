//! `job init`: writes an example job file to start from, in the shape of
//! the one `nomad job init` writes (a Redis cache in Docker), or a job
//! template kept in the variable `nomad/job-templates/<name>`. Nomad's
//! example's task `identity` block is left out, as redis reads no token.

use std::path::PathBuf;

use crate::api::Api;
use crate::error::CliError;
use crate::ui::Ui;

type Result<T> = std::result::Result<T, CliError>;

/// The file written when none is named (Nomad's).
pub const DEFAULT_INIT_NAME: &str = "example.nomad.hcl";

/// Where job templates are kept as variables (Nomad's).
const TEMPLATES_PREFIX: &str = "nomad/job-templates/";

/// What `job init` was asked.
#[derive(Debug, Clone, Default)]
pub struct InitArgs {
    /// The short form.
    pub short: bool,
    /// Nomad's Consul Connect example.
    pub connect: bool,
    /// A template kept in a variable.
    pub template: Option<String>,
    /// List the templates instead.
    pub list_templates: bool,
    /// The file to write.
    pub filename: Option<PathBuf>,
}

/// The example job, with a comment on each block.
pub const EXAMPLE: &str = r#"# An example job: one Redis cache in a Docker container. Change it, then
# check it with `caravan job validate`, see what it would do with
# `caravan job plan`, and run it with `caravan job run`.
job "example" {
  # Any datacenter will do.
  datacenters = ["*"]

  # A long-running service (others: "batch", "system", "sysbatch").
  type = "service"

  # How a new version replaces the running allocations: one at a time,
  # each healthy for 10s before the next, reverting nothing by itself.
  update {
    max_parallel      = 1
    min_healthy_time  = "10s"
    healthy_deadline  = "3m"
    progress_deadline = "10m"
    auto_revert       = false
    canary            = 0
  }

  # How allocations leave a draining node.
  migrate {
    max_parallel     = 1
    health_check     = "checks"
    min_healthy_time = "10s"
    healthy_deadline = "5m"
  }

  # What the web UI shows of the job.
  ui {
    description = "Nomad **Example** Job"
    link {
      label = "Learn more about Nomad"
      url   = "https://developer.hashicorp.com/nomad"
    }
  }

  # A group's tasks are placed together on one node.
  group "cache" {
    count = 1

    # The port Redis listens on, mapped to a dynamic host port.
    network {
      port "db" {
        to = 6379
      }
    }

    # Registered in Caravan's service registry while the task runs:
    # `caravan service info redis-cache` finds its address and port.
    service {
      name     = "redis-cache"
      tags     = ["global", "cache"]
      port     = "db"
      provider = "nomad"
    }

    # Restart a failed task twice in 30 minutes, 15s apart, then fail.
    restart {
      attempts = 2
      interval = "30m"
      delay    = "15s"
      mode     = "fail"
    }

    # Scratch space shared by the group's tasks, in MB.
    ephemeral_disk {
      size = 300
    }

    task "redis" {
      driver = "docker"

      config {
        image          = "redis:7"
        ports          = ["db"]
        auth_soft_fail = true
      }

      # Time between the service's removal and the task's stop.
      shutdown_delay = "10s"

      # CPU in MHz, memory in MB.
      resources {
        cpu    = 500
        memory = 256
      }
    }
  }
}
"#;

/// The example without comments and optional blocks (`-short`).
pub const EXAMPLE_SHORT: &str = r#"job "example" {

  group "cache" {
    network {
      port "db" {
        to = 6379
      }
    }

    task "redis" {
      driver = "docker"

      config {
        image          = "redis:7"
        ports          = ["db"]
        auth_soft_fail = true
      }

      resources {
        cpu    = 500
        memory = 256
      }
    }
  }
}
"#;

/// `job init [-short] [-template NAME | -list-templates] [<filename>]`.
pub async fn init(api: &Api, ui: &mut Ui, args: InitArgs) -> Result<u8> {
    if args.connect {
        return Err(CliError::Usage(
            "-connect is not supported by Caravan: it has no Consul Connect".into(),
        ));
    }
    if args.list_templates {
        let vars = api.list_variables(TEMPLATES_PREFIX).await.map_err(|e| {
            CliError::Other(format!(
                "Error retrieving job templates from the server; unable to read variables at \
                 path {TEMPLATES_PREFIX}. Error: {e}"
            ))
        })?;
        if vars.is_empty() {
            return Err(CliError::NotFound(format!(
                "No variables in {}",
                TEMPLATES_PREFIX.trim_end_matches('/')
            )));
        }
        ui.output("Use caravan job init -template=<template> with any of the following:");
        for v in vars {
            ui.output(format!(
                "  {}",
                v.path.strip_prefix(TEMPLATES_PREFIX).unwrap_or(&v.path)
            ));
        }
        return Ok(0);
    }
    let filename = args
        .filename
        .unwrap_or_else(|| PathBuf::from(DEFAULT_INIT_NAME));
    match std::fs::metadata(&filename) {
        Ok(_) => {
            return Err(CliError::Usage(format!(
                "Job '{}' already exists",
                filename.display()
            )));
        }
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(CliError::Other(format!(
                "Failed to stat '{}': {e}",
                filename.display()
            )));
        }
        Err(_) => {}
    }
    let spec = match &args.template {
        Some(name) => {
            let var = api.variable(&format!("{TEMPLATES_PREFIX}{name}")).await?;
            let Some(text) = var.items.get("template") else {
                return Err(CliError::Other(format!(
                    "Job template {name:?} is malformed and is missing a template field"
                )));
            };
            ui.output(format!("Initializing a job template from {name}"));
            text.clone()
        }
        None if args.short => EXAMPLE_SHORT.to_string(),
        None => EXAMPLE.to_string(),
    };
    std::fs::write(&filename, spec)
        .map_err(|e| CliError::Other(format!("Failed to write '{}': {e}", filename.display())))?;
    ui.output(format!(
        "Example job file written to {}",
        filename.display()
    ));
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_examples_parse_and_validate() {
        for text in [EXAMPLE, EXAMPLE_SHORT] {
            let parsed = caravan_jobspec::parse_hcl(text, &Default::default()).unwrap();
            caravan_jobspec::validate(&parsed.job).unwrap();
            let job = parsed.job;
            assert_eq!(job.id, "example");
            let task = &job.task_groups[0].tasks[0];
            assert_eq!(
                (task.name.as_str(), task.driver.as_str()),
                ("redis", "docker")
            );
            let config = caravan_jobspec::render_json(&job);
            assert_eq!(
                config["TaskGroups"][0]["Tasks"][0]["Config"]["image"],
                "redis:7"
            );
        }
    }
}
