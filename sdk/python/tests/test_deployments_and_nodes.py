"""Deployments steered and the node's eligibility toggled through the SDK."""

import pytest

import caravan
from caravan.v1 import deployment_pb2, node_pb2

from conftest import shell_job, unique, wait_for

SECOND = 10**9


def rolling_job(job_id):
    """A service job whose deployment stays running for a minute: its one
    allocation must be healthy that long before the deployment succeeds."""
    job = shell_job(job_id, "sleep 300", job_type="service")
    job["update"] = {
        "max_parallel": 1,
        "stagger_ns": 30 * SECOND,
        "health_check": "task_states",
        "min_healthy_time_ns": 60 * SECOND,
        "healthy_deadline_ns": 120 * SECOND,
        "progress_deadline_ns": 180 * SECOND,
    }
    return job


def test_deployment_pause_resume_and_fail(client):
    job_id = unique("rollout")
    client.jobs.register(rolling_job(job_id))
    try:
        deployment = wait_for(
            "the job's deployment",
            lambda: next((d for d in client.deployments.list() if d.job_id == job_id), None),
        )
        assert client.deployments.get(deployment.id).job_id == job_id

        def status(expected):
            return lambda: client.deployments.get(deployment.id).status == expected

        client.deployments.pause(deployment.id)
        client.deployments.pause(deployment.id)  # pausing twice is harmless
        wait_for("the deployment to pause", status(deployment_pb2.DEPLOYMENT_STATUS_PAUSED))
        client.deployments.resume(deployment.id)
        wait_for("the deployment to resume", status(deployment_pb2.DEPLOYMENT_STATUS_RUNNING))
        client.deployments.fail(deployment.id)
        wait_for("the deployment to fail", status(deployment_pb2.DEPLOYMENT_STATUS_FAILED))
        with pytest.raises(caravan.Conflict):
            client.deployments.pause(deployment.id)
    finally:
        client.jobs.stop(job_id, purge=True)
    with pytest.raises(caravan.NotFound):
        client.deployments.get("00000000-0000-0000-0000-000000000000")


def test_node_eligibility_round_trip(client):
    (node,) = client.nodes.list()
    assert client.nodes.get(node.id).name == node.name
    try:
        client.nodes.set_eligibility(node.id, "ineligible")
        assert client.nodes.get(node.id).scheduling_eligibility == node_pb2.SCHEDULING_ELIGIBILITY_INELIGIBLE
    finally:
        client.nodes.set_eligibility(node.id, True)
    assert client.nodes.get(node.id).scheduling_eligibility == node_pb2.SCHEDULING_ELIGIBILITY_ELIGIBLE
    with pytest.raises(ValueError):
        client.nodes.set_eligibility(node.id, "maybe")
    assert "eval-broker" in client.leaders()
