"""versions.selectors.panel: the panel's lists, rows and lookups."""

from __future__ import annotations

import hashlib

import pytest

from versions import selectors, services
from versions.errors import NotFound
from versions.models import App


def _write(app: App, source: str, run: str) -> services.WriteReceipt:
    return services.write_artifact(
        app, "pltf_page", "index", source, requested_by="agent", tool="t", run_id=run
    )


def test_the_app_list_shows_only_the_apps_asked_for(app):
    other = App.objects.create(slug="billing", name="Billing")
    assert [a.slug for a in selectors.app_list()] == ["billing", "quotes"]
    assert [a.slug for a in selectors.app_list([other.pk])] == ["billing"]


def test_a_set_or_point_of_another_app_is_not_found_in_words(app):
    other = App.objects.create(slug="billing", name="Billing")
    receipt = _write(app, "v1\n", "a")
    with pytest.raises(NotFound) as missing:
        selectors.change_set_row(other, receipt.change_set_id)
    assert missing.value.message == selectors.SET_NOT_IN_APP.format(
        id=receipt.change_set_id, slug="billing"
    )
    with pytest.raises(NotFound):
        selectors.get_point(other, receipt.restore_point_id)
    with pytest.raises(NotFound) as no_app:
        selectors.app_of("nope")
    assert no_app.value.message == selectors.APP_NOT_FOUND.format(slug="nope")


def test_a_set_row_has_the_totals_of_the_list(app):
    receipt = _write(app, "a\nb\n", "a")
    _write(app, "a\nc\n", "a")
    row = selectors.change_set_row(app, receipt.change_set_id)
    assert (row.artifact_count, row.point_count, row.tools) == (1, 2, ["t"])


def test_the_restore_sets_that_undid_a_restore_are_listed(app):
    receipt = _write(app, "v1\n", "a")
    _write(app, "v2\n", "b")
    first = services.restore_change_set(receipt.change_set_id, by="boss")
    undo = services.restore_change_set(first.set_id, by="boss")
    restore_set = selectors.restore_set(app, first.set_id)
    assert [s.id for s in selectors.undone_by(app, restore_set)] == [undo.set_id]
    assert selectors.artifact_shas(app, ["pltf_page/index"]) == {
        "pltf_page/index": hashlib.sha256(b"v2\n").hexdigest()  # the undo put v2 back
    }


def test_the_apps_list_is_paginated_filtered_by_name_and_its_queries_do_not_grow(
    app, django_assert_max_num_queries
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries(**kw) -> int:
        with CaptureQueriesContext(connection) as captured:
            page = selectors.app_page(None, kw.get("q", ""), kw.get("page"))
            list(page.object_list)
        return len(captured.captured_queries)

    _write(app, "v1\n", "a")
    few = queries()
    for n in range(60):
        App.objects.create(slug=f"team-{n:02d}", name=f"Team {n}")
    assert queries() == few
    page = selectors.app_page(None, "", 1)
    assert page.paginator.count == 61 and len(page.object_list) == selectors.APPS_PER_PAGE
    quotes = selectors.app_page(None, "quote", 1).object_list
    assert [a.slug for a in quotes] == ["quotes"] and quotes[0].set_count == 1
    assert [a.slug for a in selectors.app_page(None, "Team 5", 1).object_list] == [
        "team-05",
        "team-50",
        "team-51",
        "team-52",
        "team-53",
        "team-54",
        "team-55",
        "team-56",
        "team-57",
        "team-58",
        "team-59",
    ]
