# A system job: one node agent on every Linux client of the default pool.
job "node-agent" {
  type      = "system"
  node_pool = "default"

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  update {
    stagger      = "10s"
    max_parallel = 2
  }

  group "agent" {
    network {
      port "metrics" {
        static = 9100
      }
    }

    task "agent" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo agent on ${node.unique.name} serving :${NOMAD_PORT_metrics}; sleep 3600"]
      }

      resources {
        cpu    = 50
        memory = 64
      }
    }
  }
}
