"""Allocations: the placements of task groups on nodes; read, stop, logs."""

from caravan.base import Calls
from caravan.errors import InvalidArgument, NotFound
from caravan.streams import Stream
from caravan.v1 import api_pb2, internal_pb2

_SERVICE = "AllocService"


class Allocations(Calls):
    """The AllocService of the gateway (`client.allocs`)."""

    def get(self, alloc_id):
        """One allocation; NotFound when there is none."""
        request = api_pb2.GetAllocationRequest(alloc_id=alloc_id, options=self._options())
        reply = self._read(_SERVICE, "GetAllocation", request)
        if not reply.HasField("alloc"):
            raise NotFound(f"allocation {alloc_id!r} not found")
        return reply.alloc

    def list(self, prefix=""):
        """The allocations of the namespace whose ID starts with `prefix`."""
        reply = self._read(_SERVICE, "ListAllocations", api_pb2.ListAllocationsRequest(options=self._options(prefix)))
        return list(reply.allocs)

    def stop(self, alloc_id):
        """Stops an allocation; the scheduler replaces it if its job still
        wants it. Returns a StopAllocationResponse (`eval_id`)."""
        return self._write(_SERVICE, "StopAllocation", api_pb2.StopAllocationRequest(alloc_id=alloc_id))

    def logs(self, alloc_id, task=None, stream="stdout", follow=False, offset=0):
        """A task's log as an iterator of bytes, read from the client node
        running the allocation through the gateway. `task` may be left out
        when the allocation has one task. With `follow`, the iterator waits
        for more output until closed (`close()` or a `with` block).

        A stream that breaks before its first chunk is opened again on the
        next gateway; once data has been read it is not, since the log may
        have rotated meanwhile."""
        if stream not in ("stdout", "stderr"):
            raise InvalidArgument(f"stream: {stream!r} is neither stdout nor stderr")
        if task is None:
            task = self._only_task(alloc_id)
        request = internal_pb2.ReadLogsRequest(
            alloc_id=alloc_id, task=task, stream=stream, follow=follow, offset=offset
        )
        return Stream(
            lambda: self._transport.open_stream(_SERVICE, "ReadLogs", request),
            transform=lambda chunk: chunk.data or None,
            reopen=lambda yielded: yielded == 0,
        )

    def _only_task(self, alloc_id):
        alloc = self.get(alloc_id)
        tasks = sorted(alloc.task_states)
        if len(tasks) != 1:
            raise InvalidArgument(
                f"task: allocation {alloc_id} has tasks {tasks}; name the one to read"
            )
        return tasks[0]
