"""Python client of Caravan, the Nomad-compatible workload scheduler.

    import caravan
    client = caravan.Client(["127.0.0.1:4647"])
    client.jobs.list()

The messages and gRPC stubs generated from Caravan's protos are in
`caravan.v1` (`caravan.v1.job_pb2.Job`, ...).
"""

from caravan.client import DEFAULT_ADDRESS, Client
from caravan.errors import (
    CaravanError,
    Conflict,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unavailable,
)
from caravan.messages import to_message
from caravan.streams import Stream

__all__ = [
    "DEFAULT_ADDRESS",
    "CaravanError",
    "Client",
    "Conflict",
    "InvalidArgument",
    "NotFound",
    "PermissionDenied",
    "Stream",
    "Unavailable",
    "to_message",
]
