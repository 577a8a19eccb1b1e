"""versions.selectors.release: the release, when it was complete, what changed since."""

from __future__ import annotations

import pytest

from versions import selectors, services
from versions.errors import Conflict
from versions.models import App


def _write(app: App, name: str, source: str, run: str) -> services.WriteReceipt:
    return services.write_artifact(
        app, "pltf_page", name, source, requested_by="a", tool="t", run_id=run
    )


def test_no_release_is_a_conflict_in_words(app):
    with pytest.raises(Conflict) as refused:
        selectors.release_set(app)
    assert refused.value.message == selectors.NO_RELEASE.format(slug="quotes")


def test_since_release_lists_the_later_sets_and_what_differs(app):
    release = _write(app, "index", "v1\n", "a")
    _write(app, "about", "a1\n", "a")
    services.mark_release(release.change_set_id, by="boss")
    later = _write(app, "index", "v2\n", "b")
    _write(app, "new", "n\n", "c")
    review = selectors.since_release(app)
    assert review.release.id == release.change_set_id
    assert [s.id for s in review.sets][-1] == later.change_set_id
    assert [s.artifact.name for s in review.changed] == ["index"]
    assert [s.artifact.name for s in review.added] == ["new"]
    assert review.moment == selectors.release_moment(app)


def test_the_sets_after_the_release_come_in_pages(app):
    release = _write(app, "index", "v0\n", "r")
    services.mark_release(release.change_set_id, by="boss")
    for n in range(30):
        _write(app, "index", f"v{n + 1}\n", f"t{n}")
    first = selectors.since_release(app, with_sources=False)
    second = selectors.since_release(app, with_sources=False, page=2)
    assert first.set_count == 30 and len(first.sets) == 25 and len(second.sets) == 5
    assert {s.id for s in first.sets}.isdisjoint({s.id for s in second.sets})
    assert [s.artifact.name for s in first.changes] == ["index"]
