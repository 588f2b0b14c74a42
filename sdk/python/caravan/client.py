"""The synchronous client of Caravan's public gRPC API."""

from caravan.allocs import Allocations
from caravan.deployments import Deployments
from caravan.evals import Evaluations
from caravan.events import open_events
from caravan.jobs import Jobs
from caravan.nodes import Nodes
from caravan.transport import Transport
from caravan.v1 import api_pb2
from caravan.variables import Variables

DEFAULT_ADDRESS = "127.0.0.1:4647"


class Client:
    """A client of one Caravan cluster, over any of its api-gateway replicas.

    `addresses` are the gateways' gRPC addresses (`host:port` or
    `http://host:port`); calls go to the one that answered last and move on
    when it does not answer (see caravan.transport for which calls are
    retried). `namespace` is that of every read and write; `token` is sent as
    `x-nomad-token`; `timeout` is the deadline of one call in seconds.

    The calls are grouped by domain: `jobs`, `evals`, `allocs`,
    `deployments`, `nodes`, `variables`; `events()` and `leaders()` are on
    the client itself. Answers are the generated messages of `caravan.v1`."""

    def __init__(self, addresses=(DEFAULT_ADDRESS,), namespace="default", token=None, timeout=10.0, retries=3):
        self.namespace = namespace
        self._transport = Transport(addresses, token=token, timeout=timeout, retries=retries)
        self.jobs = Jobs(self._transport, namespace)
        self.evals = Evaluations(self._transport, namespace)
        self.allocs = Allocations(self._transport, namespace)
        self.deployments = Deployments(self._transport, namespace)
        self.nodes = Nodes(self._transport, namespace)
        self.variables = Variables(self._transport, namespace)

    def events(self, topics=None, namespace=None, index=0, heartbeats=False):
        """The event stream: an iterator of EventBatch that can be closed
        (`close()` or a `with` block). See caravan.events.open_events."""
        return open_events(
            self._transport,
            topics=topics,
            namespace=self.namespace if namespace is None else namespace,
            index=index,
            heartbeats=heartbeats,
        )

    def leaders(self):
        """The leader address of each leader-elected service, by service name."""
        reply = self._transport.call("StatusService", "Leaders", api_pb2.LeadersRequest(), idempotent=True)
        return dict(reply.leaders)

    def garbage_collect(self):
        """Runs a garbage collection now: a GarbageCollectResponse with the
        counts deleted."""
        return self._transport.call(
            "SystemService", "GarbageCollect", api_pb2.GarbageCollectRequest(), idempotent=True
        )

    def close(self):
        """Closes the connections."""
        self._transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
