"""Client nodes: read, drain, scheduling eligibility."""

from caravan import messages
from caravan.base import Calls
from caravan.errors import NotFound
from caravan.v1 import api_pb2, node_pb2

_SERVICE = "NodeService"


class Nodes(Calls):
    """The NodeService of the gateway (`client.nodes`)."""

    def list(self, prefix=""):
        """The client nodes whose ID starts with `prefix`."""
        reply = self._read(_SERVICE, "ListNodes", api_pb2.ListNodesRequest(options=self._options(prefix)))
        return list(reply.nodes)

    def get(self, node_id):
        """One node; NotFound when there is none."""
        reply = self._read(_SERVICE, "GetNode", api_pb2.GetNodeRequest(node_id=node_id, options=self._options()))
        if not reply.HasField("node"):
            raise NotFound(f"node {node_id!r} not found")
        return reply.node

    def allocations(self, node_id):
        """The allocations placed on a node."""
        request = api_pb2.NodeAllocationsRequest(node_id=node_id, options=self._options())
        return list(self._read(_SERVICE, "NodeAllocations", request).allocs)

    def set_eligibility(self, node_id, eligible):
        """Makes a node eligible (`True`, "eligible") or ineligible (`False`,
        "ineligible") for new placements. Safe to repeat."""
        if isinstance(eligible, bool):
            eligible = "eligible" if eligible else "ineligible"
        value = messages.enum_value(node_pb2.SchedulingEligibility.DESCRIPTOR, eligible)
        request = api_pb2.UpdateEligibilityRequest(node_id=node_id, eligibility=value)
        return self._write(_SERVICE, "UpdateEligibility", request, idempotent=True)

    def drain(self, node_id, enable=True, deadline=None, ignore_system_jobs=False, mark_eligible=False):
        """Starts draining a node: its allocations migrate away, within
        `deadline` seconds (None: no deadline; negative: at once). With
        `enable=False` cancels a drain, making the node eligible again when
        `mark_eligible`. Returns a NodeUpdateResponse."""
        request = api_pb2.UpdateDrainRequest(node_id=node_id, mark_eligible=mark_eligible)
        if enable:
            deadline_ns = 0 if deadline is None else int(deadline * 1e9)
            if deadline is not None and deadline < 0:
                deadline_ns = -1
            request.drain_strategy.CopyFrom(
                node_pb2.DrainStrategy(deadline_ns=deadline_ns, ignore_system_jobs=ignore_system_jobs)
            )
        return self._write(_SERVICE, "UpdateDrain", request)

    def evaluate(self, node_id):
        """Creates evaluations for the node's jobs and the system jobs."""
        return self._write(_SERVICE, "EvaluateNode", api_pb2.EvaluateNodeRequest(node_id=node_id))

    def purge(self, node_id):
        """Removes a node; its jobs get evaluations to place elsewhere."""
        return self._write(_SERVICE, "PurgeNode", api_pb2.PurgeNodeRequest(node_id=node_id))
