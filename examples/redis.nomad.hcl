# The job `nomad job init` writes: one Redis container, its port `db`
# published from a dynamic host port to the container's 6379, registered as
# the service `redis-cache`. Nomad's also has a task `identity` block
# (`env = true`, `file = true`); it is left out here, as redis reads no token.
# Caravan runs it on a node with the docker driver (`caravan dev` enables it
# when the Docker daemon answers):
#
#   caravan job run examples/redis.nomad.hcl
#
# The `redis:7` image must be on the node; with no registry to pull from,
# `scripts/test-images` builds one from Debian's redis-server.
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

  ui {
    description = "Nomad **Example** Job"
    link {
      label = "Learn more about Nomad"
      url   = "https://developer.hashicorp.com/nomad"
    }
  }

  group "cache" {
    count = 1

    network {
      port "db" {
        to = 6379
      }
    }

    service {
      name     = "redis-cache"
      tags     = ["global", "cache"]
      port     = "db"
      provider = "nomad"
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
      driver = "docker"

      config {
        image          = "redis:7"
        ports          = ["db"]
        auth_soft_fail = true
      }

      shutdown_delay = "10s"

      resources {
        cpu    = 500
        memory = 256
      }
    }
  }
}
