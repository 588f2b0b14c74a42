"""Evaluations: the scheduler's units of work, read-only."""

import time

from caravan.base import Calls
from caravan.errors import NotFound
from caravan.v1 import api_pb2, eval_pb2

_SERVICE = "EvalService"

# The statuses an evaluation does not leave.
TERMINAL = frozenset(
    (eval_pb2.EVAL_STATUS_COMPLETE, eval_pb2.EVAL_STATUS_FAILED, eval_pb2.EVAL_STATUS_CANCELED)
)

# The longest one blocking read of `wait` lasts before it is asked again.
_POLL_SECONDS = 5.0


class Evaluations(Calls):
    """The EvalService of the gateway (`client.evals`)."""

    def get(self, eval_id):
        """One evaluation; NotFound when there is none."""
        return self._get(eval_id).eval

    def _get(self, eval_id, min_revision=0, wait=0.0):
        """The GetEvaluationResponse, answered once the state is past
        `min_revision` or `wait` seconds have passed (a blocking read)."""
        options = self._options()
        options.min_revision = min_revision
        options.wait_ns = int(wait * 1e9)
        request = api_pb2.GetEvaluationRequest(eval_id=eval_id, options=options)
        reply = self._read(_SERVICE, "GetEvaluation", request, timeout=wait + self._transport.timeout)
        if not reply.HasField("eval"):
            raise NotFound(f"evaluation {eval_id!r} not found")
        return reply

    def wait(self, eval_id, timeout=60.0):
        """The evaluation once it is complete, failed or canceled, watched
        with blocking reads (no busy polling); TimeoutError after `timeout`
        seconds. A complete evaluation has placed what it could: its
        allocations are in `allocations(eval_id)`, and `blocked_eval` names
        the evaluation waiting for room for the rest."""
        deadline = time.monotonic() + timeout
        revision = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"evaluation {eval_id} still not terminal after {timeout}s")
            reply = self._get(eval_id, min_revision=revision, wait=min(left, _POLL_SECONDS))
            if reply.eval.status in TERMINAL:
                return reply.eval
            revision = max(revision, reply.meta.revision)

    def list(self, prefix=""):
        """The evaluations of the namespace whose ID starts with `prefix`."""
        reply = self._read(_SERVICE, "ListEvaluations", api_pb2.ListEvaluationsRequest(options=self._options(prefix)))
        return list(reply.evals)

    def allocations(self, eval_id):
        """The allocations an evaluation placed or changed."""
        request = api_pb2.EvaluationAllocationsRequest(eval_id=eval_id, options=self._options())
        return list(self._read(_SERVICE, "EvaluationAllocations", request).allocs)
