"""What every group of calls shares: the transport, the namespace, and the
query options of reads."""

from caravan.v1 import api_pb2


class Calls:
    """A group of calls of one domain (jobs, allocations, ...) over a client's
    transport, in the client's namespace."""

    def __init__(self, transport, namespace):
        self._transport = transport
        self.namespace = namespace

    def _options(self, prefix="", namespace=None):
        return api_pb2.QueryOptions(namespace=namespace or self.namespace, prefix=prefix)

    def _read(self, service, name, request, timeout=None):
        return self._transport.call(service, name, request, idempotent=True, timeout=timeout)

    def _write(self, service, name, request, idempotent=False, timeout=None):
        return self._transport.call(service, name, request, idempotent=idempotent, timeout=timeout)
