//! What the client's tests share: a dev cluster on free ports, jobs parsed
//! from HCL with Nomad's defaults, and waiting for a condition.

#![allow(clippy::unwrap_used, dead_code)]

use std::path::Path;
use std::time::Duration;

use caravan_cli::{DevCluster, DevOptions};
use caravan_client::proto::Job;

pub use caravan_testkit::wait::eventually_some;

/// How long a condition may take to come true on a busy two-core machine.
pub const WAIT: Duration = Duration::from_secs(30);

/// The options of a dev cluster on free ports with its client's data under `dir`.
pub fn options(dir: &Path) -> DevOptions {
    DevOptions {
        data_dir: Some(dir.join("client")),
        grpc_port: 0,
        http_port: 0,
        ..Default::default()
    }
}

/// A dev cluster on free ports.
pub async fn cluster(dir: &Path) -> DevCluster {
    DevCluster::start(options(dir))
        .await
        .expect("dev cluster starts")
}

/// A job from an HCL job file, with Nomad's defaults.
pub fn hcl(text: &str) -> Job {
    caravan_jobspec::parse_hcl(text, &Default::default())
        .expect("job file parses")
        .job
}

/// A service job `id` of `count` mock tasks that run for an hour.
pub fn service_job(id: &str, count: u32) -> Job {
    hcl(&format!(
        r#"
job "{id}" {{
  type = "service"
  group "web" {{
    count = {count}
    task "app" {{
      driver = "mock"
      config {{
        run_for = "1h"
      }}
      resources {{
        cpu    = 10
        memory = 10
      }}
    }}
  }}
}}
"#
    ))
}
