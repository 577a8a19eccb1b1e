"""An artifact named only by spaces is refused (SPEC §17): nobody could see or pick it in a list."""

from __future__ import annotations

import pytest
from api_helpers import ApiClient, make_token, make_user

from versions.errors import InvalidInput
from versions.models import PAGE, Artifact
from versions.services import write_artifact


@pytest.mark.parametrize("name", [" ", "   ", "\u00a0", "\u3000", " \u2003 "])
def test_a_name_of_only_spaces_is_refused_and_nothing_is_written(app, name):
    with pytest.raises(InvalidInput) as refused:
        write_artifact(app, PAGE, name, "<p>x</p>\n", requested_by="a", tool="t")
    assert refused.value.message.startswith("The artifact name is only spaces (got ")
    assert refused.value.field == "name"
    assert not Artifact.objects.exists()


def test_spaces_around_a_visible_name_are_still_a_name(app):
    write_artifact(app, PAGE, " about us ", "<p>x</p>\n", requested_by="a", tool="t")
    assert Artifact.objects.get().name == " about us "


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
