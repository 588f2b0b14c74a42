"""Deployments: the rollouts of service jobs' new versions, read and steered."""

from caravan.base import Calls
from caravan.errors import NotFound
from caravan.v1 import api_pb2

_SERVICE = "DeploymentService"


class Deployments(Calls):
    """The DeploymentService of the gateway (`client.deployments`)."""

    def list(self, prefix=""):
        """The deployments of the namespace whose ID starts with `prefix`."""
        reply = self._read(_SERVICE, "ListDeployments", api_pb2.ListDeploymentsRequest(options=self._options(prefix)))
        return list(reply.deployments)

    def get(self, deployment_id):
        """One deployment; NotFound when there is none."""
        request = api_pb2.GetDeploymentRequest(deployment_id=deployment_id, options=self._options())
        reply = self._read(_SERVICE, "GetDeployment", request)
        if not reply.HasField("deployment"):
            raise NotFound(f"deployment {deployment_id!r} not found")
        return reply.deployment

    def promote(self, deployment_id, groups=None):
        """Promotes the canaries of `groups`, or of every group when None."""
        request = api_pb2.PromoteDeploymentRequest(
            deployment_id=deployment_id, all=groups is None, groups=list(groups or [])
        )
        return self._write(_SERVICE, "PromoteDeployment", request)

    def fail(self, deployment_id):
        """Marks a running deployment failed (rolling back if it auto-reverts)."""
        request = api_pb2.FailDeploymentRequest(deployment_id=deployment_id)
        return self._write(_SERVICE, "FailDeployment", request)

    def pause(self, deployment_id, pause=True):
        """Pauses (or with `pause=False` resumes) a deployment. Safe to repeat."""
        request = api_pb2.PauseDeploymentRequest(deployment_id=deployment_id, pause=pause)
        return self._write(_SERVICE, "PauseDeployment", request, idempotent=True)

    def resume(self, deployment_id):
        """Resumes a paused deployment."""
        return self.pause(deployment_id, pause=False)

    def set_alloc_health(self, deployment_id, healthy=(), unhealthy=()):
        """Marks allocations of a deployment healthy or unhealthy by hand.
        Safe to repeat."""
        request = api_pb2.SetAllocHealthRequest(
            deployment_id=deployment_id,
            healthy_alloc_ids=list(healthy),
            unhealthy_alloc_ids=list(unhealthy),
        )
        return self._write(_SERVICE, "SetAllocHealth", request, idempotent=True)
