"""versions.selectors.agent: what an agent reads over the API and MCP, as plain dicts."""

from __future__ import annotations

import pytest

from versions import selectors, services
from versions.errors import NotFound
from versions.models import App


def _write(app: App, name: str, source: str, run: str = "r") -> services.WriteReceipt:
    return services.write_artifact(
        app, "pltf_page", name, source, requested_by="agent", tool="t", run_id=run
    )


def test_artifacts_are_listed_without_tombstones_unless_asked(app):
    _write(app, "index", "v1\n")
    _write(app, "gone", "x\n")
    services.delete_artifact(app, "pltf_page", "gone", requested_by="a", tool="t")
    assert [a["name"] for a in selectors.list_artifacts(app)] == ["index"]
    listed = selectors.list_artifacts(app, include_deleted=True)
    assert [(a["name"], a["deleted"]) for a in listed] == [("gone", True), ("index", False)]


def test_reading_a_missing_or_deleted_artifact_says_which_in_words(app):
    _write(app, "gone", "x\n")
    services.delete_artifact(app, "pltf_page", "gone", requested_by="a", tool="t")
    with pytest.raises(NotFound) as deleted:
        selectors.read_artifact(app, "pltf_page", "gone")
    assert deleted.value.message == selectors.ARTIFACT_DELETED.format(
        collection="pltf_page", name="gone", slug="quotes"
    )
    with pytest.raises(NotFound) as missing:
        selectors.read_artifact(app, "pltf_page", "never")
    assert missing.value.message == selectors.ARTIFACT_NOT_FOUND.format(
        collection="pltf_page", name="never", slug="quotes"
    )


def test_change_sets_are_paginated_newest_first_with_their_totals(app):
    for n in range(3):
        _write(app, "index", f"v{n}\nline\n", run=f"r{n}")
    page = selectors.list_change_sets(app, page=1, per_page=2)
    assert (page["total"], page["next_page"], len(page["items"])) == (3, 2, 2)
    assert page["items"][0]["created_on"] >= page["items"][1]["created_on"]
    last = selectors.list_change_sets(app, page=2, per_page=2)
    assert last["next_page"] is None and last["items"][0]["artifacts"] == 1


def test_a_set_in_detail_lists_its_points_oldest_first(app):
    first = _write(app, "index", "v1\n")
    _write(app, "about", "a\n")
    detail = selectors.change_set_detail(selectors.change_set_row(app, first.change_set_id))
    assert [p["artifact"]["name"] for p in detail["restore_points"]] == ["index", "about"]
    assert detail["app"] == "quotes" and detail["requested_by"] == ["agent"]
