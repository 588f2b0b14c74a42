"""The errors a Caravan call raises, one class per kind of gRPC status the
api-gateway answers with."""

import re

import grpc

__all__ = [
    "CaravanError",
    "NotFound",
    "InvalidArgument",
    "Conflict",
    "PermissionDenied",
    "Unavailable",
    "from_rpc_error",
]


class CaravanError(Exception):
    """Any failed call. `code` is the gRPC status code (None when the error did
    not come from the gateway), `message` the gateway's text."""

    def __init__(self, message, code=None, address=None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.address = address

    def __str__(self):
        where = f" (at {self.address})" if self.address else ""
        return f"{self.message}{where}"


class NotFound(CaravanError):
    """The job, allocation, evaluation, node, deployment or variable does not exist."""


class InvalidArgument(CaravanError):
    """The request was refused as malformed; nothing was written.

    `field` is the first field the gateway named (`job.task_groups[0].count`,
    `group "web": count`), `fields` every one, in the gateway's order; both are
    empty when the message names none."""

    def __init__(self, message, code=None, address=None):
        super().__init__(message, code, address)
        self.fields = field_names(message)
        self.field = self.fields[0] if self.fields else None


class Conflict(CaravanError):
    """The request lost to the current state: a check-and-set or check-index
    mismatch (FAILED_PRECONDITION) or a write that kept losing to concurrent
    writers (ABORTED). `current` holds the conflicting object when the gateway
    returns one (variables)."""

    def __init__(self, message, code=None, address=None, current=None):
        super().__init__(message, code, address)
        self.current = current


class PermissionDenied(CaravanError):
    """The token lacks the capability, or the cluster refuses the operation."""


class Unavailable(CaravanError):
    """No gateway answered, or the gateway could not reach a peer (client node,
    deployment-watcher, store)."""


# The gateway's field errors: one `path: message`, or Nomad's multierror
# layout with one `\t* path: message` line per problem. A path joins segments
# such as `group "web"`, `task "app"` and `count` with ": ".
_BULLET = re.compile(r"^\s*\*\s+(.*)$", re.MULTILINE)
_SEGMENT = re.compile(r'^[A-Za-z_][\w.\[\]]*( "[^"]*")?$')


def _path(line):
    parts = line.split(": ")
    taken = []
    for part in parts[:-1]:  # at least the last part is the message
        if not _SEGMENT.match(part):
            break
        taken.append(part)
    return ": ".join(taken) or None


def field_names(message):
    """The fields a gateway error message names, in order."""
    lines = _BULLET.findall(message) or [message.splitlines()[0] if message else ""]
    return [p for p in map(_path, lines) if p]


_BY_CODE = {
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.OUT_OF_RANGE: InvalidArgument,
    grpc.StatusCode.FAILED_PRECONDITION: Conflict,
    grpc.StatusCode.ABORTED: Conflict,
    grpc.StatusCode.ALREADY_EXISTS: Conflict,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAUTHENTICATED: PermissionDenied,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: Unavailable,
}


def from_rpc_error(err, address=None):
    """The CaravanError for a failed gRPC call."""
    code = err.code() if hasattr(err, "code") else None
    details = err.details() if hasattr(err, "details") else None
    message = details or str(err)
    return _BY_CODE.get(code, CaravanError)(message, code=code, address=address)
