"""Which requests may read from a replica, and the pin a write leaves (docs/operations.md#read-replicas).

The behaviour against a real standby is in tests/test_replicas.py; this is the routing table
itself, read through the middleware's own decision, on any database.
"""

from __future__ import annotations

import hashlib

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.test import RequestFactory

from versions import replicas
from versions.models import ReplicaPin

pytestmark = [pytest.mark.django_db]


def _request(path: str, *, method: str = "GET", user=None, token: str | None = None, **extra):
    factory = RequestFactory()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    request = factory.generic(method, path, **headers, **extra)
    request.user = user or AnonymousUser()
    if user is not None:
        request.COOKIES["sessionid"] = "x"
    return request


@pytest.mark.parametrize(
    ("path", "tolerant"),
    [
        ("/apps/shop/", True),
        ("/apps/shop/p/about", True),
        ("/apps/shop/at/draft/", True),
        ("/apps/shop/api/orders/7", True),
        ("/api/v1/apps/shop/artifacts/pltf_page/index/history", True),
        ("/api/v1/apps/shop/artifacts/pltf_page/index?at=production", True),
        ("/api/v1/apps/shop/change-sets", True),
        ("/api/v1/change-sets/cs_rp_1_2/diff", True),
        ("/api/v1/apps/shop/artifacts/pltf_page/index", False),  # its ETag guards writes
        ("/api/v1/apps/shop/deployments", False),
        ("/admin/", False),
        ("/accounts/login/", False),
    ],
)
def test_which_reads_may_go_to_a_replica(path, tolerant):
    token = "tok-1" if path.startswith("/api/") else None
    assert replicas.lag_tolerant(_request(path, token=token)) is tolerant
    # A write never does.
    assert replicas.lag_tolerant(_request(path, method="POST", token=token)) is False


def test_panel_pages_go_to_a_replica_for_a_person_who_has_not_written(settings):
    person = User.objects.create_user("ann", password="pw-123456")
    page = "/apps/shop/versions/"
    assert replicas.lag_tolerant(_request(page)) is False  # nobody signed in: the sign-in page
    assert replicas.lag_tolerant(_request(page, user=person)) is True
    replicas.pin(replicas.pin_key(_request(page, user=person)) or "")
    assert ReplicaPin.objects.get(key=f"u:{person.pk}")
    assert replicas.lag_tolerant(_request(page, user=person)) is False
    assert replicas.lag_tolerant(_request("/apps/shop/", user=person)) is False  # live, pinned
    assert replicas.lag_tolerant(_request("/apps/shop/")) is True  # a visitor is not


def test_a_tokens_pin_is_its_own():
    history = "/api/v1/apps/shop/artifacts/pltf_page/index/history"
    replicas.pin("t:" + hashlib.sha256(b"tok-1").hexdigest())
    assert replicas.lag_tolerant(_request(history, token="tok-1")) is False
    assert replicas.lag_tolerant(_request(history, token="tok-2")) is True


@pytest.mark.django_db(transaction=True)
def test_the_router_sends_nothing_to_a_replica_outside_a_tolerant_request_or_in_a_transaction(
    monkeypatch,
):
    from django.db import transaction

    from versions.models import AgentToken, Blob

    monkeypatch.setattr(replicas, "healthy_replica", lambda: "replica_1")
    router = replicas.ReplicaRouter()
    assert router.db_for_read(Blob) is None  # no request said so
    token = replicas._replica_reads.set(True)
    try:
        assert router.db_for_read(Blob) == "replica_1"
        assert router.db_for_read(AgentToken) is None  # access reads the primary
        assert router.db_for_read(User) is None
        with transaction.atomic():
            assert router.db_for_read(Blob) is None  # a read inside a transaction
    finally:
        replicas._replica_reads.reset(token)
    assert router.db_for_write(Blob) == "default"
    assert router.allow_migrate("replica_1", "versions") is False
