"""The gateway's refusals as the SDK's exceptions."""

import pytest

import caravan

from conftest import shell_job, unique


def test_invalid_job_raises_invalid_argument_naming_the_field(client):
    job = shell_job(unique("bad"), "true")
    job["task_groups"][0]["count"] = -1
    with pytest.raises(caravan.InvalidArgument) as err:
        client.jobs.register(job)
    assert err.value.field == 'group "main": count'
    assert "count" in str(err.value)
    assert isinstance(err.value, caravan.CaravanError)


def test_missing_job_id_names_the_id_field(client):
    job = shell_job("", "true")
    with pytest.raises(caravan.InvalidArgument) as err:
        client.jobs.register(job)
    assert err.value.field is not None and "id" in err.value.field.lower(), err.value


def test_unknown_objects_raise_not_found(client):
    with pytest.raises(caravan.NotFound):
        client.jobs.get(unique("missing"))
    with pytest.raises(caravan.NotFound):
        client.allocs.get("00000000-0000-0000-0000-000000000000")
    with pytest.raises(caravan.NotFound):
        client.evals.get("00000000-0000-0000-0000-000000000000")


def test_check_index_mismatch_raises_conflict(client):
    job_id = unique("cas")
    first = client.jobs.register(shell_job(job_id, "true"), check_revision=0)
    with pytest.raises(caravan.Conflict):
        client.jobs.register(shell_job(job_id, "true"), check_revision=0)
    client.jobs.register(shell_job(job_id, "echo v2"), check_revision=first.job_modify_revision)
    client.jobs.stop(job_id, purge=True)
