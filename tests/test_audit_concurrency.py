"""Concurrent appends on PostgreSQL: the chain's head is locked, so no two events chain onto
the same prev_hash, and the chain stays whole."""

from __future__ import annotations

import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import transaction
from thread_helpers import failures, run_in_threads

from versions import services
from versions.models import App, AuditEvent

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_twelve_writers_appending_at_once_make_one_unbroken_chain():
    app = App.objects.create(slug="race", name="Race")

    def append(i: int) -> int:
        for n in range(4):
            with transaction.atomic():
                services.record("set_named", actor=None, app=app, targets=[f"w{i}-{n}"])
                time.sleep(0.005)  # the action's own work, while the head is held
        return i

    results = run_in_threads(12, append)

    assert failures(results) == []
    events = list(AuditEvent.objects.order_by("seq"))
    assert [e.seq for e in events] == list(range(1, 49))
    assert len({e.prev_hash for e in events}) == 48
    out = StringIO()
    call_command("verify_audit", stdout=out)
    assert out.getvalue().strip() == "48 events, chain intact"
