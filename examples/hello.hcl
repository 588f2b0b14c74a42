# A raw_exec service job: one process that prints a line every second.
#
#   caravan job run examples/hello.hcl
#   caravan alloc logs <alloc-id>
job "hello" {
  type        = "service"
  datacenters = ["*"]

  group "hello" {
    count = 1

    task "hello" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args = [
          "-c",
          "while true; do echo \"hello from $NOMAD_ALLOC_NAME (${NOMAD_ALLOC_INDEX})\"; sleep 1; done",
        ]
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
