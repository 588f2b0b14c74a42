"""A `caravan dev` cluster for the whole test session, on free loopback ports
with its own data directory, and helpers to build jobs and wait on them."""

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

import caravan
from caravan.v1 import alloc_pb2, node_pb2

REPO = Path(__file__).resolve().parents[3]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, probe, timeout=60.0, interval=0.2):
    """`probe()`'s first truthy answer, polling until `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except caravan.CaravanError as err:
            last = err
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}; last answer: {last!r}")


@pytest.fixture(scope="session")
def cluster():
    """The gRPC address of a running `caravan dev`."""
    bin_dir = Path(os.environ.get("CARAVAN_BIN_DIR") or REPO / "target" / "debug")
    binary = bin_dir / "caravan"
    if not binary.is_file():
        pytest.fail(f"no caravan binary at {binary}; build it or set CARAVAN_BIN_DIR")
    data_dir = tempfile.mkdtemp(prefix="caravan-sdk-python-")
    grpc_port, http_port = free_port(), free_port()
    log = open(Path(data_dir) / "caravan-dev.log", "wb")
    proc = subprocess.Popen(
        [str(binary), "dev", "--grpc-port", str(grpc_port), "--http-port", str(http_port),
         "--data-dir", str(Path(data_dir) / "data"), "--log-level", "warn"],
        stdout=log, stderr=subprocess.STDOUT, cwd=data_dir,
    )
    address = f"127.0.0.1:{grpc_port}"
    client = caravan.Client([address], timeout=5.0)
    try:
        def ready():
            if proc.poll() is not None:
                raise AssertionError(f"caravan dev exited with {proc.returncode}")
            nodes = client.nodes.list()
            return nodes and nodes[0].status == node_pb2.NODE_STATUS_READY and "eval-broker" in client.leaders()

        wait_for("caravan dev to have a ready node and leaders", ready, timeout=90)
        yield address
    except BaseException:
        log.flush()
        print((Path(data_dir) / "caravan-dev.log").read_text(errors="replace")[-4000:])
        raise
    finally:
        client.close()
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
def client(cluster):
    with caravan.Client([cluster]) as c:
        yield c


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def shell_job(job_id, script, job_type="batch"):
    """A one-task raw_exec job running `/bin/sh -c script`, as a dict."""
    return {
        "id": job_id,
        "type": job_type,
        "datacenters": ["*"],
        "task_groups": [{
            "name": "main",
            "count": 1,
            "tasks": [{
                "name": "sh",
                "driver": "raw_exec",
                "config": {"command": "/bin/sh", "args": ["-c", script]},
            }],
        }],
    }


def wait_for_allocs(client, job_id, status, count=1, timeout=60.0):
    """The job's allocations once `count` of them have client status `status`."""
    def settled():
        allocs = client.jobs.allocations(job_id)
        done = [a for a in allocs if a.client_status == status]
        return done if len(done) >= count else None

    name = alloc_pb2.AllocClientStatus.Name(status)
    return wait_for(f"{count} allocation(s) of {job_id} {name}", settled, timeout=timeout)


@contextlib.contextmanager
def bounded(stream, seconds=60.0):
    """`stream`, closed after `seconds` so that a missing event fails the
    test instead of hanging it, and closed on leaving."""
    timer = threading.Timer(seconds, stream.close)
    timer.start()
    try:
        yield stream
    finally:
        timer.cancel()
        stream.close()


def current_revision(client):
    """A store revision at or after every write made so far (that of a fresh
    write), for event streams that must not miss what comes next."""
    return client.variables.put("sdk/revision-marker", {"at": str(time.time())}).meta.modify_revision
