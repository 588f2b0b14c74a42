"""Connections to the api-gateway replicas and the retry rules of calls.

Every gateway replica answers every call (they keep no state of their own), so
a client holds one channel per address and moves to the next address when one
does not answer. How far it may go depends on the call:

* Idempotent calls (every read, and writes whose repetition leaves the same
  state, such as setting a node's eligibility) are retried on UNAVAILABLE
  against the next address, with exponential backoff between rounds.
* Other writes (registering a job, stopping one, check-and-set writes) are
  sent at most once: the client first finds a gateway that answers a status
  call (StatusService.Leaders), trying the addresses in turn, and sends the
  write there. An UNAVAILABLE after it was sent is raised, since the gateway
  may have applied it.
"""

import threading
import time

import grpc

from caravan import errors
from caravan.v1 import api_pb2, api_pb2_grpc, variable_pb2_grpc

# The largest answer accepted: a list of every allocation of a big cluster.
MAX_MESSAGE_BYTES = 512 * 1024 * 1024

_STUB_MODULES = (api_pb2_grpc, variable_pb2_grpc)


def _stub_class(service):
    for module in _STUB_MODULES:
        stub = getattr(module, f"{service}Stub", None)
        if stub is not None:
            return stub
    raise ValueError(f"no gRPC service {service!r} in caravan.v1")


def _target(address):
    """A gRPC target from `host:port` or `http://host:port`."""
    for scheme in ("http://", "grpc://"):
        if address.startswith(scheme):
            return address[len(scheme):].rstrip("/")
    if address.startswith("https://"):
        raise ValueError(f"{address!r}: TLS is not supported by this client yet")
    return address


class _Endpoint:
    """One gateway address, its channel and its stubs."""

    def __init__(self, address):
        self.address = address
        self.channel = grpc.insecure_channel(
            _target(address),
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ],
        )
        self._stubs = {}

    def method(self, service, name):
        stub = self._stubs.get(service)
        if stub is None:
            stub = self._stubs[service] = _stub_class(service)(self.channel)
        return getattr(stub, name)

    def answers(self, timeout, metadata):
        """Whether the gateway at this address answers a status call within
        `timeout` seconds (any answer but UNAVAILABLE and DEADLINE_EXCEEDED
        proves it is reachable and serving)."""
        try:
            self.method("StatusService", "Leaders")(
                api_pb2.LeadersRequest(), timeout=timeout, metadata=metadata
            )
        except grpc.RpcError as err:
            return err.code() not in (
                grpc.StatusCode.UNAVAILABLE,
                grpc.StatusCode.DEADLINE_EXCEEDED,
            )
        return True

    def close(self):
        self.channel.close()


class Transport:
    """The channels of a client and the calls over them."""

    # How long a gateway may take to answer the status call made before a
    # write or a stream is sent to it.
    PROBE_TIMEOUT = 2.0

    def __init__(self, addresses, token=None, timeout=10.0, retries=3, backoff=0.1):
        if isinstance(addresses, str):
            addresses = [addresses]
        addresses = list(addresses)
        if not addresses:
            raise ValueError("at least one gateway address is needed")
        self.endpoints = [_Endpoint(a) for a in addresses]
        self.token = token
        self.timeout = timeout
        self.retries = max(1, retries)
        self.backoff = backoff
        # The address that answered last; calls start there.
        self._current = 0
        self._lock = threading.Lock()

    @property
    def metadata(self):
        return (("x-nomad-token", self.token),) if self.token else ()

    def _order(self):
        """The endpoints, starting with the one that answered last."""
        with self._lock:
            start = self._current
        n = len(self.endpoints)
        return [self.endpoints[(start + i) % n] for i in range(n)]

    def _answered(self, endpoint):
        with self._lock:
            self._current = self.endpoints.index(endpoint)

    def _sleep(self, round_):
        time.sleep(min(self.backoff * (2**round_), 2.0))

    def call(self, service, name, request, idempotent, timeout=None):
        """One unary call; see the module's docstring for the retry rules."""
        timeout = self.timeout if timeout is None else timeout
        if idempotent:
            return self._call_retrying(service, name, request, timeout)
        return self._call_once(service, name, request, timeout)

    def _call_retrying(self, service, name, request, timeout):
        last = None
        for round_ in range(self.retries):
            if round_:
                self._sleep(round_ - 1)
            for endpoint in self._order():
                try:
                    reply = endpoint.method(service, name)(
                        request, timeout=timeout, metadata=self.metadata
                    )
                except grpc.RpcError as err:
                    if err.code() != grpc.StatusCode.UNAVAILABLE:
                        raise errors.from_rpc_error(err, endpoint.address) from None
                    last = errors.from_rpc_error(err, endpoint.address)
                    continue
                self._answered(endpoint)
                return reply
        raise last

    def connected(self, timeout):
        """An endpoint whose gateway answers, trying each address in turn
        for up to `retries` rounds; raises Unavailable when none does. A
        write sent only after this is never sent to a gateway known to be
        down, so it needs no blind retry."""
        deadline = time.monotonic() + timeout
        for round_ in range(self.retries):
            if round_:
                self._sleep(round_ - 1)
            for endpoint in self._order():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                if endpoint.answers(min(left, self.PROBE_TIMEOUT), self.metadata):
                    self._answered(endpoint)
                    return endpoint
        tried = ", ".join(e.address for e in self.endpoints)
        raise errors.Unavailable(
            f"no api-gateway could be connected to ({tried})",
            code=grpc.StatusCode.UNAVAILABLE,
        )

    def _call_once(self, service, name, request, timeout):
        endpoint = self.connected(timeout)
        try:
            reply = endpoint.method(service, name)(
                request, timeout=timeout, metadata=self.metadata
            )
        except grpc.RpcError as err:
            raise errors.from_rpc_error(err, endpoint.address) from None
        return reply

    def open_stream(self, service, name, request):
        """A server stream on a connected endpoint: (endpoint, call). The call
        is an iterator of replies and can be cancelled."""
        endpoint = self.connected(self.timeout)
        call = endpoint.method(service, name)(request, metadata=self.metadata)
        return endpoint, call

    def close(self):
        for endpoint in self.endpoints:
            endpoint.close()
