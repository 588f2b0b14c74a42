"""Nomad Variables through the SDK, check-and-set included."""

import pytest

import caravan

from conftest import unique


def test_put_get_list_and_check_and_set(client):
    path = f"sdk/{unique('var')}"
    written = client.variables.put(path, {"user": "app", "port": 5432}, cas=0)
    assert dict(written.items) == {"user": "app", "port": "5432"}
    revision = written.meta.modify_revision
    assert revision > 0

    assert client.variables.items(path) == {"user": "app", "port": "5432"}
    assert path in [v.path for v in client.variables.list(prefix="sdk/")]

    # cas=0 means "only if new": the variable exists now.
    with pytest.raises(caravan.Conflict) as lost:
        client.variables.put(path, {"user": "other"}, cas=0)
    assert lost.value.current.meta.modify_revision == revision
    assert client.variables.items(path)["user"] == "app"

    updated = client.variables.put(path, {"user": "new"}, cas=revision)
    assert updated.meta.modify_revision > revision
    with pytest.raises(caravan.Conflict):
        client.variables.put(path, {"user": "stale"}, cas=revision)
    with pytest.raises(caravan.Conflict):
        client.variables.delete(path, cas=revision)

    client.variables.delete(path, cas=updated.meta.modify_revision)
    with pytest.raises(caravan.NotFound):
        client.variables.get(path)
