# The job python-nomad's suite registers: the example `nomad init` writes,
# with its docker task replaced by a raw_exec one (Caravan's clients run
# raw_exec; the suite only needs a long-running task in group "cache") and
# without its `service` block, which Caravan refuses until it registers
# services.
job "example" {
  datacenters = ["*"]
  type        = "service"

  update {
    max_parallel      = 1
    min_healthy_time  = "10s"
    healthy_deadline  = "3m"
    progress_deadline = "10m"
    auto_revert       = false
    canary            = 0
  }

  migrate {
    max_parallel     = 1
    health_check     = "checks"
    min_healthy_time = "10s"
    healthy_deadline = "5m"
  }

  group "cache" {
    count = 1

    network {
      port "db" {
        to = 6379
      }
    }

    restart {
      attempts = 2
      interval = "30m"
      delay    = "15s"
      mode     = "fail"
    }

    ephemeral_disk {
      size = 300
    }

    task "redis" {
      driver = "raw_exec"

      # Runs until stopped; SIGUSR1 (the suite's signal tests) is caught.
      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'echo caught USR1' USR1; while :; do sleep 1; done"]
      }

      resources {
        cpu    = 500
        memory = 256
      }
    }
  }
}
