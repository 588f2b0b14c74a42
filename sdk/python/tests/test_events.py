"""The event stream through the SDK."""

from conftest import bounded, current_revision, shell_job, unique


def test_event_stream_yields_the_jobs_events_and_closes(client):
    job_id = unique("events")
    # From a revision before the registration, so the job's events come
    # whether the gateway starts the stream before or after it lands.
    since = current_revision(client)
    stream = client.events(topics={"Job": job_id, "Evaluation": "*"}, index=since)
    with bounded(stream):
        reply = client.jobs.register(shell_job(job_id, "true"))
        seen = []
        for batch in stream:
            assert batch.index > since and not batch.heartbeat
            seen.extend((e.topic, e.type, e.key) for e in batch.events)
            if ("Job", "JobRegistered", job_id) in seen and any(
                t == "Evaluation" and k == reply.eval_id for t, _, k in seen
            ):
                break
    assert ("Job", "JobRegistered", job_id) in seen, seen
    job_events = [e for e in seen if e[0] == "Job"]
    assert all(key == job_id for _, _, key in job_events), job_events
    # A closed stream yields nothing more.
    assert list(stream) == []


def test_event_stream_replays_from_an_index(client):
    job_id = unique("replay")
    reply = client.jobs.register(shell_job(job_id, "true"))
    with bounded(client.events(topics=[f"Job:{job_id}"], index=reply.job_modify_revision - 1)) as replay:
        batch = next(replay)
    assert batch.index == reply.job_modify_revision
    assert [(e.type, e.key) for e in batch.events] == [("JobRegistered", job_id)]
    assert batch.events[0].job.id == job_id
