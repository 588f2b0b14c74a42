"""The event stream: every change to jobs, evaluations, allocations,
deployments and nodes, one batch per store revision."""

from caravan.streams import Stream
from caravan.v1 import api_pb2

TOPICS = ("Job", "Evaluation", "Allocation", "Deployment", "Node")


def open_events(transport, topics=None, namespace="", index=0, heartbeats=False):
    """An iterator of EventBatch (`index`, `events`) that can be closed.

    `topics` are "Topic" or "Topic:Key" ("*" for any), or a dict of topic to
    key(s); none means every topic. `index` resumes after that revision (0:
    from now). Heartbeat batches, sent while nothing happens, are skipped
    unless `heartbeats`. If the gateway goes away, the stream is opened again
    on the next address from the last revision seen, so no batch is lost or
    repeated."""
    wanted = _topics(topics)
    state = {"index": index}

    def open_call():
        request = api_pb2.EventStreamRequest(
            topics=wanted, namespace=namespace, index=state["index"]
        )
        return transport.open_stream("EventService", "Stream", request)

    def transform(batch):
        if batch.heartbeat or not batch.events:
            return batch if heartbeats else None
        state["index"] = batch.index
        return batch

    return Stream(open_call, transform=transform, reopen=lambda yielded: True)


def _topics(topics):
    if topics is None:
        return []
    if isinstance(topics, str):
        return [topics]
    if isinstance(topics, dict):
        out = []
        for topic, keys in topics.items():
            keys = [keys] if isinstance(keys, str) else list(keys or ["*"])
            out.extend(f"{topic}:{key}" for key in keys)
        return out
    return list(topics)
