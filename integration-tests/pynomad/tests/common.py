"""Where python-nomad's suite finds the agent under test: Caravan's dev
cluster, started by scripts/pynomad-test on free loopback ports."""
import os

IP = os.environ.get("NOMAD_IP", "127.0.0.1")

NOMAD_PORT = os.environ.get("NOMAD_PORT", 4646)

# Set by the suite's first test (ACL bootstrap) when the agent runs with ACLs.
NOMAD_TOKEN = os.environ.get("NOMAD_TOKEN", None)

# The namespace the suite's namespaced tests use.
NOMAD_NAMESPACE = "admin"
