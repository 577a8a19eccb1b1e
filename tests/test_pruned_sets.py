"""A set a write's pruner left with no point, on both databases.

A write's pruner lists the points it removes in their sets and owes the emptied sets to the
app's debt: the pruner that settles a batch removes them. Until then such a set is listed as
pruned and never shown as restorable, through every door.
"""

from __future__ import annotations

import pytest
from api_helpers import ApiClient, make_token, make_user
from django.contrib.auth.models import User
from django.test import Client

from versions import services
from versions.errors import Conflict, PreflightFailed
from versions.models import App, Artifact, ChangeSet, RestorePoint, SweepDebt

pytestmark = pytest.mark.django_db(transaction=True)

PAGE = "pltf_page"


def write(app, source: str, name: str = "index"):
    return services.write_artifact(app, PAGE, name, source, requested_by="agent", tool="t")


@pytest.fixture
def lingering(settings) -> tuple[App, str, str]:
    """An app at its limit of 2 whose oldest set's only point was pruned: (app, that set, a
    set that keeps its point)."""
    settings.VERSIONS_POINTS_PER_APP = 2
    settings.VERSIONS_SWEEP_BATCH = 16
    app = App.objects.create(slug="pruned", name="Pruned")
    write(app, "v0\n")
    emptied = write(app, "v1\n").change_set_id
    write(app, "v2\n")
    kept = write(app, "v3\n").change_set_id  # prunes the first two writes' points
    assert not RestorePoint.objects.filter(change_set_id=emptied).exists()
    assert ChangeSet.objects.filter(id=emptied).exists()  # owed to the next batch
    return app, emptied, kept


@pytest.fixture
def boss() -> Client:
    """The panel, signed in as a superuser."""
    client = Client()
    client.force_login(User.objects.create_superuser("boss", "b@example.com", "pw-123456"))
    return client


def test_an_emptied_set_lists_its_pruned_point_and_is_owed_to_the_next_batch(lingering):
    app, emptied, _kept = lingering
    cs = ChangeSet.objects.get(id=emptied)
    assert len(cs.pruned) == 1
    assert cs.pruned[0]["artifactId"] == Artifact.objects.get(app=app).pk
    assert SweepDebt.objects.filter(app=app, change_set_id=emptied).exists()


def test_the_panel_lists_it_as_pruned_and_offers_nothing_to_restore(lingering, boss):
    app, emptied, kept = lingering
    client = boss

    listing = client.get(f"/apps/{app.slug}/versions/").content.decode()
    row = listing[listing.index(f'id="set-{emptied}"') :]
    row = row[: row.index("</li>")]
    assert ">pruned</span>" in row
    other = listing[listing.index(f'id="set-{kept}"') :]
    assert ">pruned</span>" not in other[: other.index("</li>")]

    page = client.get(f"/apps/{app.slug}/versions/change-sets/{emptied}/").content.decode()
    assert "Retention pruned every restore point of this set" in page
    for button in ("Restore all", "Revert this set", "Promote to production", "Save name"):
        assert f">{button}</button>" not in page, button
    assert ">Mark as release</button>" not in page
    kept_page = client.get(f"/apps/{app.slug}/versions/change-sets/{kept}/").content.decode()
    assert ">Restore all</button>" in kept_page
    assert "Retention pruned every restore point of this set" not in kept_page


def test_it_cannot_be_named_marked_or_restored_through_the_services(lingering):
    app, emptied, _kept = lingering
    with pytest.raises(Conflict, match="Retention pruned every restore point"):
        services.name_change_set(emptied, "keep me", by="person")
    with pytest.raises(Conflict, match="no longer be marked as the release"):
        services.mark_release(emptied, by="person")
    with pytest.raises(PreflightFailed):
        services.restore_change_set(emptied, by="person")
    assert ChangeSet.objects.get(id=emptied).name == ""
    assert App.objects.get(pk=app.pk).release_set_id is None
    assert Artifact.objects.get(app=app).source == "v3\n"  # nothing written
    services.name_change_set(emptied, "", by="person")  # clearing a name is no harm


def test_the_api_answers_409_in_words_and_shows_no_point_to_restore(lingering):
    app, emptied, _kept = lingering
    make_user("owner", can_restore=True, is_superuser=True)
    api = ApiClient(make_token("owner", app.slug))

    detail = api.get(f"/change-sets/{emptied}").json()
    assert detail["restore_points"] == []
    assert len(detail["pruned"]) == 1
    restore = api.post(f"/change-sets/{emptied}/restore")
    assert restore.status_code == 409, restore.content
    assert Artifact.objects.get(app=app).source == "v3\n"


def test_the_batch_that_settles_the_debt_removes_it(lingering, settings, boss):
    app, emptied, kept = lingering
    settings.VERSIONS_SWEEP_BATCH = 3  # the app owes two rows: the next prune settles
    write(app, "v4\n")
    assert not ChangeSet.objects.filter(id=emptied).exists()
    assert ChangeSet.objects.filter(id=kept).exists()
    assert boss.get(f"/apps/{app.slug}/versions/change-sets/{emptied}/").status_code == 404
