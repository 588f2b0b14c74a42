"""The clients python-nomad's tests are handed: one in the default namespace
and one in the suite's own, both with the token the ACL bootstrap made."""
import nomad
import pytest

import tests.common as common


def _client(**extra):
    return nomad.Nomad(
        host=common.IP,
        port=common.NOMAD_PORT,
        verify=False,
        token=common.NOMAD_TOKEN,
        **extra,
    )


@pytest.fixture
def nomad_setup():
    return _client()


@pytest.fixture
def nomad_setup_with_namespace():
    # Jobs go only into a namespace that exists, in Caravan as in Nomad:
    # the suite's own is created (again: an upsert) before it is used.
    _client().namespace.create_namespace(
        {"Name": common.NOMAD_NAMESPACE, "Description": "python-nomad's namespaced tests"}
    )
    return _client(namespace=common.NOMAD_NAMESPACE)
