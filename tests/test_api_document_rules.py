"""The OpenAPI document states every rule a request must keep (docs/api.md#conventions), and the API
keeps exactly those rules: a value the document allows is never refused for its form, a value it
rules out is refused in words."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from api_helpers import ApiClient, make_token, make_user
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from versions import services
from versions.api import schemas
from versions.errors import InvalidInput
from versions.models import COLLECTIONS, Artifact

pytestmark = pytest.mark.django_db

ART = "/apps/quotes/artifacts"
# Characters the services refuse in names, written as the document's escapes and as astral
# characters (U+110BD and U+E0001 are format characters too).
TRICKY = ["\x00", "\x07", "\t", "\x85", "\u00ad", "\u200b", "\u2028", "\ufeff", "\U000110bd"]


@pytest.fixture
def api(app) -> ApiClient:
    make_user("rvaid", can_restore=True)
    return ApiClient(make_token("rvaid", "quotes"))


@pytest.fixture
def document() -> dict:
    return Client().get("/api/v1/openapi.json").json()


def _patterns(node: object):
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            yield node["pattern"]
        for value in node.values():
            yield from _patterns(value)
    elif isinstance(node, list):
        for item in node:
            yield from _patterns(item)


def test_every_path_parameter_states_its_rule(document):
    seen = {}
    for operations in document["paths"].values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path":
                    seen.setdefault(parameter["name"], parameter["schema"])
    assert set(seen) == {
        "slug", "collection", "name", "set_id", "point_id", "comment_id", "refs", "schedule_id"
    }  # fmt: skip
    assert seen["collection"]["enum"] == list(COLLECTIONS)
    assert seen["slug"]["pattern"] == schemas.SLUG_PATTERN
    assert seen["name"]["maxLength"] == 200 and seen["name"]["minLength"] == 1
    assert re.fullmatch(seen["set_id"]["pattern"], "cs_rp_mx4rvs9s_efw70pvk")
    assert re.fullmatch(seen["point_id"]["pattern"], "rp_mx4rvs9s_efw70pvk")
    assert re.fullmatch(seen["comment_id"]["pattern"], "cm_mx4rvs9s_efw70pvk")
    assert re.fullmatch(seen["refs"]["pattern"], "release...cs_rp_mx4rvs9s_efw70pvk")
    assert not re.fullmatch(seen["refs"]["pattern"], "draft..draft")


def test_bodies_state_their_rules_and_the_error_statuses_say_what_they_mean(document):
    parts = document["components"]["schemas"]
    assert parts["WriteIn"]["properties"]["source"]["pattern"] == "^[^\\u0000]*$"
    expected = parts["RestoreSetIn"]["properties"]["expected"]["anyOf"][0]
    assert expected["propertyNames"]["pattern"].startswith("^(" + "|".join(COLLECTIONS) + ")/")
    assert parts["PromoteIn"]["properties"]["ref"]["pattern"] == schemas.PROMOTE_REF_PATTERN
    assert parts["PromoteIn"]["properties"]["note"]["maxLength"] == 500
    assert parts["RestorePointIn"]["properties"]["dry_run"]["type"] == "boolean"
    put = document["paths"]["/api/v1/apps/{slug}/artifacts/{collection}/{name}"]["put"]
    assert "NUL in source" in put["responses"]["400"]["description"]
    assert "NUL or unpaired surrogate" in put["responses"]["422"]["description"]


def test_every_pattern_compiles_without_surrogates_so_validators_keep_it(document):
    """A pattern with a lone-surrogate range is dropped by validators built on Rust's regex
    (schemathesis among them): the document would then state nothing at all."""
    patterns = list(_patterns(document))
    assert len(patterns) > 20
    for pattern in patterns:
        re.compile(pattern)
        assert not re.search(r"\\ud[89a-f]", pattern, re.IGNORECASE), pattern


def _allowed(pattern: str, value: str) -> bool:
    return re.fullmatch(pattern.removeprefix("^").removesuffix("$"), value) is not None


def _accepted(check, value: str) -> bool:
    try:
        check(value)
    except InvalidInput:
        return False
    return True


text_with_tricky = st.text(st.characters(exclude_categories=["Cs"]) | st.sampled_from(TRICKY))


@settings(max_examples=300, deadline=None)
@given(text_with_tricky.filter(lambda v: len(v) <= 200) | st.sampled_from(TRICKY + [" ", "a/b"]))
def test_the_name_pattern_is_the_rule_the_services_check(name):
    allowed = name != "" and _allowed(schemas.name_pattern(), name)
    assert allowed == _accepted(services.validate_name, name), repr(name)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text_with_tricky.filter(lambda v: len(v) <= 200))
def test_the_id_and_message_patterns_are_the_rules_a_write_checks(app, value):
    def write(**field: str) -> None:
        services.write_artifact(app, "pltf_page", "index", "x\n", tool="t", **field)

    assert _allowed(schemas.text_pattern(), value) == _accepted(lambda v: write(run_id=v), value), (
        repr(value)
    )
    assert _allowed(schemas.message_pattern(), value) == _accepted(
        lambda v: write(message=v), value
    ), repr(value)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/apps/quotes/deployments", "[null, null]"),
        ("/apps/quotes/production/rollback", "5"),
        ("/apps/quotes/restore-to-release", "null"),
        ("/apps/quotes/restore-to-release", '"x"'),
    ],
)
def test_a_body_that_is_not_a_json_object_answers_422_and_does_nothing(api, path, body):
    response = api.post(path, body)
    assert response.status_code == 422, response.content
    assert response.json()["error"] == "validation_error"
    assert response.json()["message"] == "body: " + schemas.NOT_AN_OBJECT


def test_no_body_at_all_still_means_the_defaults(api):
    response = api.client.post(
        "/api/v1/apps/quotes/restore-to-release",
        b"",
        content_type="application/json",
        headers={"Authorization": f"Bearer {api.token}"},
    )
    assert response.status_code == 409  # no release: the restore itself answered
    assert response.json()["error"] == "conflict"


def test_dry_run_must_be_a_json_boolean(api):
    response = api.post("/apps/quotes/deployments", {"dry_run": 0})
    assert response.status_code == 422
    assert response.json()["details"][0]["loc"] == ["body", "dry_run"]


def test_a_failed_if_match_is_answered_after_the_input_is_checked(api, app):
    api.put(f"{ART}/pltf_page/a", {"source": "1"})
    bad = api.put(f"{ART}/pltf_page/a", {"source": "2", "message": "\x84"}, {"If-Match": '"x"'})
    assert bad.status_code == 400 and bad.json()["field"] == "message"
    refused = api.put(f"{ART}/pltf_page/a", {"source": "2"}, {"If-Match": '"x"'})
    assert refused.status_code == 412
    assert refused.json()["message"].startswith('If-Match "x" does not match the current ETag')
    gone = api.delete(f"{ART}/pltf_page/a", {"If-Match": '"x"'}, turn_id="\x84")
    assert gone.status_code == 400 and gone.json()["field"] == "turn_id"
    assert api.delete(f"{ART}/pltf_page/a", {"If-Match": '"x"'}).status_code == 412
    exists = api.put(f"{ART}/pltf_page/a", {"source": "3"}, {"If-None-Match": "*"})
    assert exists.status_code == 412
    assert Artifact.objects.get(name="a").sha256 == hashlib.sha256(b"1").hexdigest()


@pytest.fixture
def turn(app) -> str:
    services.write_artifact(app, "pltf_page", "index", "before\n", requested_by="s", tool="t")
    return services.write_artifact(
        app, "pltf_page", "index", "after\n", requested_by="a", tool="t", run_id="turn"
    ).change_set_id


@pytest.mark.parametrize(
    "key", ["nope/index", "pltf_page/", "pltf_page/a\x07b", "pltf_page/" + "n" * 201]
)
def test_an_expected_key_that_can_name_no_artifact_answers_400(api, turn, key):
    response = api.post(f"/change-sets/{turn}/restore", {"expected": {key: "0" * 64}})
    assert response.status_code == 400
    assert response.json()["field"] == "expected"
    assert "can name no artifact" in response.json()["message"]


def test_an_expected_hash_must_be_hex_and_is_compared_in_any_case(api, app, turn):
    now = Artifact.objects.get(app=app, name="index").sha256
    bad = api.post(f"/change-sets/{turn}/restore", {"expected": {"pltf_page/index": "zz"}})
    assert bad.status_code == 400 and bad.json()["field"] == "expected"
    upper = {"dry_run": True, "expected": {"pltf_page/index": now.upper()}}
    preview = api.post(f"/change-sets/{turn}/restore", upper).json()
    assert preview["kind"] == "dry_run" and preview["findings"] == []


def test_a_lone_surrogate_in_a_well_formed_expected_key_is_refused_at_the_door(api, turn):
    body = '{"expected": {"pltf_page/\\ud800": "' + "0" * 64 + '"}}'
    response = api.post(f"/change-sets/{turn}/restore", body)
    assert response.status_code == 422
    assert response.json()["message"].endswith(schemas.BAD_TEXT.format(field="expected"))


def test_nul_answers_422_in_an_id_or_hash_and_400_naming_its_position_in_source(api):
    for field in ("expected_sha256", "run_id"):
        response = api.put(f"{ART}/pltf_page/a", json.dumps({"source": "x", field: "a\x00"}))
        assert response.status_code == 422, field
        assert response.json()["error"] == "validation_error"
        assert response.json()["message"] == f"body.{field}: " + schemas.BAD_TEXT.format(
            field=field
        )
    response = api.put(f"{ART}/pltf_page/a", json.dumps({"source": "ab\x00"}))
    assert response.status_code == 400
    assert response.json()["field"] == "source"
    assert "position 2" in response.json()["message"]
    assert not Artifact.objects.exists()


@pytest.mark.parametrize("value", ["AAA", "g" * 64, "a" * 63, "a" * 64 + "\n"])
def test_an_expected_sha256_that_is_not_a_hash_answers_422_even_with_a_failed_if_match(api, value):
    api.put(f"{ART}/pltf_page/a", {"source": "1"})
    for headers in ({}, {"If-Match": '"nope"'}):
        response = api.put(f"{ART}/pltf_page/a", {"source": "2", "expected_sha256": value}, headers)
        assert response.status_code == 422, (value, headers)
        assert response.json()["message"] == "body.expected_sha256: " + schemas.NOT_A_SHA256
        gone = api.delete(f"{ART}/pltf_page/a", headers, expected_sha256=value)
        assert gone.status_code == 422
    assert Artifact.objects.get(name="a").sha256 == hashlib.sha256(b"1").hexdigest()
