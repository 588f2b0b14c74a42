# A periodic batch job: every 15 minutes, three workers each crunch one shard and exit.
job "crunch" {
  type        = "batch"
  datacenters = ["dc1", "dc2"]
  priority    = 40

  periodic {
    crons            = ["*/15 * * * *"]
    prohibit_overlap = true
    time_zone        = "Europe/Paris"
  }

  meta {
    owner = "data-team"
  }

  group "workers" {
    count = 3

    restart {
      attempts = 1
      delay    = "10s"
      interval = "5m"
      mode     = "fail"
    }

    reschedule {
      attempts       = 2
      interval       = "1h"
      delay          = "30s"
      delay_function = "constant"
      unlimited      = false
    }

    ephemeral_disk {
      size = 500
    }

    task "crunch" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo crunching shard ${NOMAD_ALLOC_INDEX} of ${NOMAD_JOB_NAME}; sleep 5"]
      }

      env {
        SHARD_COUNT = "3"
        LOG_LEVEL   = "info"
      }

      resources {
        cpu    = 200
        memory = 128
      }

      kill_timeout = "20s"
    }
  }
}
