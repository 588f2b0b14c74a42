"""Nomad Variables: secrets and settings kept per namespace and path."""

from caravan.base import Calls
from caravan.errors import Conflict
from caravan.v1 import variable_pb2

_SERVICE = "VariableService"


class Variables(Calls):
    """The VariableService of the gateway (`client.variables`)."""

    def get(self, path):
        """The variable at `path` with its items in clear: a VariableDecrypted
        (`items`, and `meta.modify_revision` for check-and-set). NotFound when
        there is none."""
        request = variable_pb2.GetVariableRequest(path=path, options=self._options())
        return self._read(_SERVICE, "GetVariable", request).variable

    def items(self, path):
        """The items of the variable at `path` as a dict."""
        return dict(self.get(path).items)

    def list(self, prefix=""):
        """The metadata (never the items) of the variables under `prefix`."""
        request = variable_pb2.ListVariablesRequest(options=self._options(prefix))
        return list(self._read(_SERVICE, "ListVariables", request).variables)

    def put(self, path, items, cas=None):
        """Writes the items of the variable at `path`, replacing the old ones.
        With `cas`, only if the variable's modify revision is `cas` (0: only if
        it does not exist); otherwise Conflict is raised with the current
        variable as `current`. Returns the written VariableDecrypted.

        Retried on an unreachable gateway only without `cas`: a repeated
        check-and-set would find its own first write and report a conflict."""
        request = variable_pb2.PutVariableRequest(
            namespace=self.namespace, path=path, items={k: str(v) for k, v in items.items()}
        )
        if cas is not None:
            request.cas = cas
        reply = self._write(_SERVICE, "PutVariable", request, idempotent=cas is None)
        if not reply.written:
            raise Conflict(
                f"variable {path!r}: check-and-set at {cas} lost to revision "
                f"{reply.variable.meta.modify_revision}",
                current=reply.variable,
            )
        return reply.variable

    def delete(self, path, cas=None):
        """Deletes the variable at `path` (nothing when there is none). With
        `cas`, only if its modify revision is `cas`; otherwise Conflict is
        raised with the current variable as `current`."""
        request = variable_pb2.DeleteVariableRequest(namespace=self.namespace, path=path)
        if cas is not None:
            request.cas = cas
        reply = self._write(_SERVICE, "DeleteVariable", request, idempotent=cas is None)
        if not reply.deleted:
            raise Conflict(
                f"variable {path!r}: check-and-set delete at {cas} lost to revision "
                f"{reply.conflict.meta.modify_revision}",
                current=reply.conflict,
            )
        return reply.revision
