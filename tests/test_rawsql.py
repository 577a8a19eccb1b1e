"""The raw SQL path (versions.rawsql): query-count tests see the statements production runs.

When queries are logged (assertNumQueries, CaptureQueriesContext, DEBUG) the capture's
statements still run on the driver's own cursor — not through Django's cursor, as they did
before — and log themselves, so a query-count test counts the path production takes.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.backends import utils
from django.test.utils import CaptureQueriesContext

from versions import services
from versions.models import App

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def django_cursor_calls(monkeypatch) -> list[str]:
    """Every statement that goes through Django's cursor wrapper."""
    calls: list[str] = []
    for wrapper in (utils.CursorWrapper, utils.CursorDebugWrapper):
        real = wrapper.execute

        def spy(self, sql, params=None, _real=real):
            calls.append(str(sql))
            return _real(self, sql, params)

        monkeypatch.setattr(wrapper, "execute", spy)
    return calls


def test_a_logged_write_runs_on_the_raw_path_and_is_counted(django_cursor_calls):
    app = App.objects.create(slug="quotes", name="Quotes")
    services.write_artifact(app, "pltf_page", "index", "v1\n", requested_by="a", tool="t")
    django_cursor_calls.clear()
    with CaptureQueriesContext(connection) as captured:
        services.write_artifact(app, "pltf_page", "index", "v2\n", requested_by="a", tool="t")
    logged = [q["sql"] for q in captured.captured_queries]
    writes = [sql for sql in logged if sql.startswith(("INSERT", "UPDATE"))]
    # The blob, the change set, the point and the artifact: each logged once...
    assert [w.split()[2 if w.startswith("INSERT") else 1] for w in writes] == [
        '"versions_blob"',
        '"versions_changeset"',
        '"versions_restorepoint"',
        '"versions_artifact"',
    ]
    # ...and none of them went through Django's cursor (only its own BEGIN, on SQLite).
    assert not [sql for sql in django_cursor_calls if sql.startswith(("INSERT", "UPDATE"))]
    assert all(not sql.startswith("SELECT") for sql in django_cursor_calls)


def test_the_logged_statements_carry_their_values_but_not_source_bytes():
    app = App.objects.create(slug="quotes", name="Quotes")
    with CaptureQueriesContext(connection) as captured:
        services.write_artifact(app, "pltf_page", "index", "secret\n", requested_by="a", tool="t")
    blob = next(
        q["sql"]
        for q in captured.captured_queries
        if q["sql"].startswith('INSERT INTO "versions_blob"')
    )
    assert "bytes>'" in blob and "secret" not in blob and "%s" not in blob
