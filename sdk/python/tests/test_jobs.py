"""Jobs, evaluations and allocations through the SDK against `caravan dev`."""

import pytest

import caravan
from caravan.v1 import alloc_pb2, eval_pb2, job_pb2

from conftest import bounded, shell_job, unique, wait_for, wait_for_allocs


def test_batch_job_runs_and_its_log_reads_through_the_sdk(client):
    job_id = unique("hello")
    reply = client.jobs.register(shell_job(job_id, "echo hello; echo oops >&2"))
    assert reply.eval_id

    (alloc,) = wait_for_allocs(client, job_id, alloc_pb2.ALLOC_CLIENT_STATUS_COMPLETE)
    assert alloc.job_id == job_id

    with client.allocs.logs(alloc.id) as chunks:
        stdout = b"".join(chunks)
    assert b"hello" in stdout
    assert b"oops" not in stdout
    stderr = b"".join(client.allocs.logs(alloc.id, task="sh", stream="stderr"))
    assert b"oops" in stderr

    job = client.jobs.get(job_id)
    assert job.id == job_id and job.type == job_pb2.JOB_TYPE_BATCH
    assert job.namespace == "default"
    assert [j.id for j in client.jobs.list(prefix=job_id)] == [job_id]
    assert job_id not in [j.id for j in client.jobs.list(prefix="no-such-prefix")]

    evaluation = client.evals.wait(reply.eval_id, timeout=30)
    assert evaluation.job_id == job_id
    assert evaluation.status == eval_pb2.EVAL_STATUS_COMPLETE
    assert client.evals.get(reply.eval_id).status == eval_pb2.EVAL_STATUS_COMPLETE
    assert reply.eval_id in [e.id for e in client.evals.list()]
    assert reply.eval_id in [e.id for e in client.jobs.evaluations(job_id)]
    assert alloc.id in [a.id for a in client.evals.allocations(reply.eval_id)]

    assert client.allocs.get(alloc.id).id == alloc.id
    assert alloc.id in [a.id for a in client.allocs.list(prefix=alloc.id[:8])]
    assert alloc.id in [a.id for a in client.nodes.allocations(alloc.node_id)]
    assert client.nodes.get(alloc.node_id).id == alloc.node_id

    summary = client.jobs.summary(job_id).summary["main"]
    assert summary.complete == 1 and summary.running == 0
    assert [v.version for v in client.jobs.versions(job_id)] == [0]


def test_service_job_scales_and_stops_with_purge(client):
    job_id = unique("svc")
    client.jobs.register(shell_job(job_id, "sleep 300", job_type="service"))
    wait_for_allocs(client, job_id, alloc_pb2.ALLOC_CLIENT_STATUS_RUNNING)

    client.jobs.scale(job_id, "main", 2)
    wait_for_allocs(client, job_id, alloc_pb2.ALLOC_CLIENT_STATUS_RUNNING, count=2)
    assert client.jobs.get(job_id).task_groups[0].count == 2
    assert sorted(v.version for v in client.jobs.versions(job_id)) == [0, 1]
    client.jobs.revert(job_id, 0, prior_version=1)
    assert client.jobs.get(job_id).task_groups[0].count == 1
    assert client.jobs.get(job_id).version == 2
    with pytest.raises(caravan.Conflict):
        client.jobs.revert(job_id, 0, prior_version=1)

    stopped = client.jobs.stop(job_id, purge=True)
    assert stopped.eval_id
    with pytest.raises(caravan.NotFound):
        client.jobs.get(job_id)
    assert job_id not in [j.id for j in client.jobs.list()]

    def all_stopped():
        allocs = client.allocs.list()
        mine = [a for a in allocs if a.job_id == job_id]
        return all(a.client_status != alloc_pb2.ALLOC_CLIENT_STATUS_RUNNING for a in mine)

    wait_for("the purged job's allocations to stop", all_stopped)


def test_plan_and_validate_register_nothing(client):
    job_id = unique("plan")
    plan = client.jobs.plan(shell_job(job_id, "true"))
    assert "main" in plan.annotations.desired_tg_updates
    assert client.jobs.validate(shell_job(job_id, "true")).errors == []
    with pytest.raises(caravan.NotFound):
        client.jobs.get(job_id)


def test_job_accepts_messages_and_short_enum_names(client):
    job = caravan.to_message(job_pb2.Job, shell_job(unique("msg"), "true", job_type="SysBatch"))
    assert job.type == job_pb2.JOB_TYPE_SYSBATCH
    assert job.task_groups[0].tasks[0].config["command"] == "/bin/sh"
    with pytest.raises(ValueError, match="nightly"):
        caravan.to_message(job_pb2.Job, {"id": "x", "type": "nightly"})


def test_followed_log_streams_new_output_until_closed(client):
    job_id = unique("ticker")
    script = "i=0; while true; do echo tick$i; i=$((i+1)); sleep 0.2; done"
    client.jobs.register(shell_job(job_id, script, job_type="service"))
    try:
        (alloc,) = wait_for_allocs(client, job_id, alloc_pb2.ALLOC_CLIENT_STATUS_RUNNING)
        seen = b""
        with bounded(client.allocs.logs(alloc.id, follow=True)) as stream:
            for chunk in stream:
                seen += chunk
                if b"tick5" in seen:
                    break
        assert b"tick0\ntick1\n" in seen, seen
        assert list(stream) == []
    finally:
        client.jobs.stop(job_id, purge=True)


def test_waiting_on_an_evaluation_blocks_until_it_is_terminal(client):
    job_id = unique("wait")
    reply = client.jobs.register(shell_job(job_id, "true"))
    evaluation = client.evals.wait(reply.eval_id, timeout=30)
    assert evaluation.status == eval_pb2.EVAL_STATUS_COMPLETE
    assert [a.job_id for a in client.evals.allocations(evaluation.id)] == [job_id]
    with pytest.raises(caravan.NotFound):
        client.evals.wait("00000000-0000-0000-0000-000000000000", timeout=5)


def test_dispatch_launches_a_child_of_a_parameterized_job(client):
    job_id = unique("param")
    job = shell_job(job_id, 'echo "$NOMAD_META_greeting"')
    job["parameterized"] = {"payload": "optional", "meta_required": ["greeting"]}
    client.jobs.register(job)
    child = client.jobs.dispatch(job_id, meta={"greeting": "dispatched hello"})
    assert child.dispatched_job_id.startswith(job_id + "/dispatch-")
    assert client.jobs.get(child.dispatched_job_id).parent_id == job_id
    (alloc,) = wait_for_allocs(client, child.dispatched_job_id, alloc_pb2.ALLOC_CLIENT_STATUS_COMPLETE)
    assert b"dispatched hello" in b"".join(client.allocs.logs(alloc.id))
    with pytest.raises(caravan.InvalidArgument):
        client.jobs.dispatch(job_id)  # the required meta is missing
