"""Names people can tell apart: an artifact named only by spaces, or with spaces around its
name, is refused (nobody could see or pick it in a list); names are NFC-normalised on the way
in, so one name in two Unicode spellings is one artifact; and a new name that looks like an
existing one of the same collection (the same confusable skeleton, Unicode TS #39) is refused
in words naming the existing one. App slugs are held to the same rule."""

from __future__ import annotations

import unicodedata
from urllib.parse import quote

import pytest
from api_helpers import ApiClient, make_token, make_user

from versions.errors import InvalidInput
from versions.messages import (
    NAME_EDGE_SPACES,
    NAME_LOOKS_LIKE,
    SLUG_LOOKS_LIKE,
)
from versions.models import PAGE, STYLESHEET, App, Artifact, RestorePoint
from versions.services import (
    delete_artifact,
    write_artifact,
)

NFC = unicodedata.normalize("NFC", "café")
NFD = unicodedata.normalize("NFD", "café")


def write(app, name, source="<p>x</p>\n", collection=PAGE):
    return write_artifact(app, collection, name, source, requested_by="a", tool="t")


@pytest.mark.parametrize("name", [" ", "   ", "\u00a0", "\u3000", " \u2003 "])
def test_a_name_of_only_spaces_is_refused_and_nothing_is_written(app, name):
    with pytest.raises(InvalidInput) as refused:
        write_artifact(app, PAGE, name, "<p>x</p>\n", requested_by="a", tool="t")
    assert refused.value.message.startswith("The artifact name is only spaces (got ")
    assert refused.value.field == "name"
    assert not Artifact.objects.exists()


@pytest.mark.parametrize("name", [" about us", "about us ", "\u00a0index", "index\u3000"])
def test_spaces_around_a_name_are_refused_in_words(app, name):
    with pytest.raises(InvalidInput) as refused:
        write(app, name)
    assert refused.value.message == NAME_EDGE_SPACES.format(name=name, stripped=name.strip())
    assert not Artifact.objects.exists()


def test_spaces_inside_a_name_are_still_a_name(app):
    write(app, "about us")
    assert Artifact.objects.get().name == "about us"


def test_one_name_in_two_unicode_spellings_is_one_artifact(app):
    assert NFC != NFD
    write(app, NFC, "<p>one</p>\n")
    receipt = write(app, NFD, "<p>two</p>\n")

    artifact = Artifact.objects.get()
    assert artifact.name == NFC and receipt.name == NFC
    assert artifact.source == "<p>two</p>\n"
    assert RestorePoint.objects.count() == 2
    delete_artifact(app, PAGE, NFD, requested_by="a", tool="t")
    assert Artifact.objects.get().deleted


def test_an_artifact_is_read_by_either_spelling_of_its_name(app):
    make_user("owner")
    api = ApiClient(make_token("owner", "quotes"))
    write(app, NFC, "<p>caf\u00e9</p>\n")
    response = api.get(f"/apps/quotes/artifacts/pltf_page/{quote(NFD)}")
    assert response.status_code == 200
    assert response.json()["source"] == "<p>caf\u00e9</p>\n"


def test_a_name_written_in_nfd_is_stored_in_nfc(app):
    write(app, NFD)
    assert Artifact.objects.get().name == NFC


@pytest.mark.parametrize(
    "look_alike",
    [
        "\uff49\uff4e\uff44\uff45\uff58",  # full-width ｉｎｄｅｘ
        "\u0456nd\u0435\u0445",  # Cyrillic і, е and х
    ],
)
def test_a_new_name_that_looks_like_an_existing_one_is_refused_naming_it(app, look_alike):
    write(app, "index")
    with pytest.raises(InvalidInput) as refused:
        write(app, look_alike)
    assert refused.value.message == NAME_LOOKS_LIKE.format(
        name=look_alike, existing="index", collection=PAGE
    )
    assert refused.value.field == "name"
    assert list(Artifact.objects.values_list("name", flat=True)) == ["index"]
    assert RestorePoint.objects.count() == 1


def test_a_deleted_artifact_still_holds_its_look(app):
    write(app, "logo-1")
    delete_artifact(app, PAGE, "logo-1", requested_by="a", tool="t")
    with pytest.raises(InvalidInput) as refused:
        write(app, "logo-l")
    assert "“logo-1”" in refused.value.message


def test_names_that_merely_differ_or_live_elsewhere_are_fine(app):
    write(app, "index")
    write(app, "Index")  # case is seen
    write(app, "indices")
    write(app, "\uff49\uff4e\uff44\uff45\uff58", "a {}\n", collection=STYLESHEET)
    other = App.objects.create(slug="other", name="Other")
    write(other, "\uff49\uff4e\uff44\uff45\uff58")
    assert Artifact.objects.count() == 5


def test_the_api_refuses_a_look_alike_name_in_words(app):
    make_user("owner")
    api = ApiClient(make_token("owner", "quotes"))
    first = api.put("/apps/quotes/artifacts/pltf_page/index", {"source": "<p>x</p>\n"})
    assert first.status_code in (200, 201)
    look_alike = "\u0456nd\u0435\u0445"
    response = api.put(
        f"/apps/quotes/artifacts/pltf_page/{quote(look_alike)}", {"source": "<p>y</p>\n"}
    )
    assert response.status_code == 400
    assert response.json()["message"] == NAME_LOOKS_LIKE.format(
        name=look_alike, existing="index", collection=PAGE
    )


def test_an_app_slug_that_looks_like_an_existing_one_is_refused_in_the_admin(
    client, app, django_user_model
):
    App.objects.create(slug="team-1", name="Team one")
    root = django_user_model.objects.create_superuser("root", password="x" * 20)
    client.force_login(root)
    response = client.post(
        "/admin/versions/app/add/", {"slug": "team-l", "name": "Team L"}, follow=True
    )
    assert response.status_code == 200  # back on the form, the refusal in words
    assert SLUG_LOOKS_LIKE.format(slug="team-l", existing="team-1") in response.content.decode()
    assert not App.objects.filter(slug="team-l").exists()
    added = client.post("/admin/versions/app/add/", {"slug": "team-2", "name": "Team two"})
    assert added.status_code == 302 and App.objects.filter(slug="team-2").exists()


def test_the_api_refuses_a_space_name_in_words(app):
    make_user("owner")
    api = ApiClient(make_token("owner", "quotes"))
    response = api.put("/apps/quotes/artifacts/pltf_page/%20", {"source": "<p>x</p>\n"})
    assert response.status_code == 400
    assert response.json()["message"] == (
        'The artifact name is only spaces (got " "): give it a name people can see, '
        "such as “index”."
    )
    assert not Artifact.objects.exists()
