"""Moving between gateway addresses: reads retry past a gateway that does not
answer, writes are sent at most once, and the token rides along."""

import threading
import time
from concurrent import futures

import grpc
import pytest

import caravan

from conftest import bounded, current_revision, free_port, shell_job, unique
from proxy import Proxy


class FlakyGateway:
    """A gRPC server on loopback that answers the status call (so it looks
    alive) and UNAVAILABLE to everything else, recording each call."""

    def __init__(self, answer_status=True):
        self.calls = []
        self._lock = threading.Lock()
        self.answer_status = answer_status
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers((self,))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.address = f"127.0.0.1:{self.port}"

    def service(self, details):
        method = details.method.rsplit("/", 1)[-1]

        def handle(request, context):
            with self._lock:
                self.calls.append((method, dict(context.invocation_metadata())))
            if method == "Leaders" and self.answer_status:
                return b""  # an empty LeadersResponse
            context.abort(grpc.StatusCode.UNAVAILABLE, "flaky gateway")

        return grpc.unary_unary_rpc_method_handler(handle)

    def methods(self):
        with self._lock:
            return [m for m, _ in self.calls]

    def stop(self):
        self.server.stop(None)


@pytest.fixture
def flaky():
    gateway = FlakyGateway()
    yield gateway
    gateway.stop()


def test_dead_address_first_and_the_live_one_second_still_works(cluster):
    dead = f"127.0.0.1:{free_port()}"
    with caravan.Client([dead, cluster], timeout=5.0) as client:
        started = time.monotonic()
        assert client.leaders()
        job_id = unique("failover")
        client.jobs.register(shell_job(job_id, "true"))
        assert client.jobs.get(job_id).id == job_id
        client.variables.put(f"sdk/{job_id}", {"k": "v"}, cas=0)
        with client.events(topics={"Job": job_id}, index=1) as events:
            assert any(e.key == job_id for e in next(events).events)
        client.jobs.stop(job_id, purge=True)
        assert time.monotonic() - started < 10


def test_reads_move_past_an_unavailable_gateway_but_a_sent_write_is_not_resent(cluster, flaky):
    with caravan.Client([flaky.address, cluster], timeout=5.0) as client:
        job_id = unique("once")
        with pytest.raises(caravan.Unavailable):
            client.jobs.register(shell_job(job_id, "true"))
        assert flaky.methods().count("RegisterJob") == 1
        # Nothing went to the live gateway: the job does not exist there.
        with pytest.raises(caravan.NotFound):
            client.jobs.get(job_id)
        assert flaky.methods().count("GetJob") == 1
        assert job_id not in [j.id for j in client.jobs.list()]


def test_a_write_goes_to_the_gateway_that_answers(cluster):
    down = FlakyGateway(answer_status=False)
    try:
        with caravan.Client([down.address, cluster], timeout=5.0) as client:
            job_id = unique("probe")
            client.jobs.register(shell_job(job_id, "true"))
            assert "RegisterJob" not in down.methods()
            assert client.jobs.get(job_id).id == job_id
            client.jobs.stop(job_id, purge=True)
    finally:
        down.stop()


def test_no_gateway_answering_raises_unavailable():
    dead = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    with caravan.Client(dead, timeout=2.0, retries=2) as client:
        with pytest.raises(caravan.Unavailable):
            client.jobs.list()
        with pytest.raises(caravan.Unavailable):
            client.jobs.stop("anything")


def test_token_is_sent_as_x_nomad_token(flaky):
    with caravan.Client([flaky.address], token="s3cret", retries=1) as client:
        with pytest.raises(caravan.Unavailable):
            client.jobs.list()
    assert flaky.calls and all(md.get("x-nomad-token") == "s3cret" for _, md in flaky.calls)
    with caravan.Client([flaky.address], retries=1) as client:
        with pytest.raises(caravan.Unavailable):
            client.nodes.list()
    assert "x-nomad-token" not in flaky.calls[-1][1]


def test_event_stream_resumes_on_the_next_gateway_without_loss(cluster):
    proxy = Proxy(cluster)
    try:
        with caravan.Client([proxy.address, cluster], timeout=5.0) as client:
            first, second = unique("before-cut"), unique("after-cut")
            since = current_revision(client)
            stream = client.events(topics=[f"Job:{first}", f"Job:{second}"], index=since)
            with bounded(stream):
                client.jobs.register(shell_job(first, "true"))
                assert [e.key for e in next(stream).events] == [first]
                proxy.cut()
                # Made while no stream is open: it must come from the resume.
                client.jobs.register(shell_job(second, "true"))
                batch = next(stream)
            assert [e.key for e in batch.events] == [second]
            # Reads went on through the gateway that is left.
            assert client.jobs.get(second).id == second
            for job_id in (first, second):
                client.jobs.stop(job_id, purge=True)
    finally:
        proxy.cut()
