"""Existence never leaks (docs/api.md#existence): every route of the agent API, enumerated from
the API's own routers (not a hand list), answers another app's id or slug exactly as it answers
a missing one — the same status and the same body, the id itself aside — and so does every app
URL for a token whose user holds no role anywhere."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from api_helpers import ApiClient, make_token, make_user
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.utils import timezone

from versions import services
from versions.api import api as agent_api
from versions.models import App, AppMembership, ChangeSet

pytestmark = pytest.mark.django_db

# A missing value of each path parameter, of the right form (a wrong form names nothing either).
MISSING = {
    "slug": "nope",
    "collection": "pltf_page",
    "name": "index",
    "set_id": "cs_rp_zzzzzz_00000000",
    "point_id": "rp_zzzzzz_00000000",
    "comment_id": "cm_zzzzzz_00000000",
    "refs": "cs_rp_zzzzzz_00000000...rp_zzzzzz_00000000",
    "schedule_id": "sp_zzzzzz_00000000",
}
# What each method sends: a body of the right shape, so that only existence decides.
BODIES: dict[str, Any] = {
    "PUT": {"source": "<h1>elsewhere</h1>\n"},
    "PATCH": {"message": "mine"},
    "POST": {},
    "DELETE": None,
}


def routes() -> list[tuple[str, str]]:
    """Every (method, path template) the agent API serves, from its routers."""
    found = []
    for prefix, router in agent_api._routers:
        for path, view in router.path_operations.items():
            for operation in view.operations:
                for method in operation.methods:
                    found.append((method, prefix.rstrip("/") + path))
    return sorted(set(found))


def _fill(template: str, values: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            pytest.fail(f"{template}: say how to name another app's {{{name}}} in this test")
        return values[name]

    return re.sub(r"\{(\w+)\}", value, template)


def _answer(client: ApiClient, method: str, path: str, ids: list[str]) -> tuple[int, Any]:
    """The status and the body, with the ids of the request replaced by "<id>"."""
    body = {"body": "Done."} if path.endswith("/replies") else BODIES.get(method)
    if method == "POST":  # safe promotion's bodies with a required field
        if path.endswith("/production/freeze"):
            body = {"reason": "existence"}
        elif path.endswith("/schedules"):
            body = {"at": "2099-01-01T00:00:00Z"}
        elif path.endswith("/rollout"):
            body = {"to": 10}
    response = client.client.generic(
        method,
        "/api/v1" + path,
        json.dumps(body) if body is not None else "",
        content_type="application/json",
        headers={"Authorization": f"Bearer {client.token}"},
    )
    text = response.content.decode()
    for ident in sorted(ids, key=len, reverse=True):
        text = text.replace(ident, "<id>")
    try:
        content: Any = json.loads(text) if text else None
    except ValueError:
        content = text
    return response.status_code, (response["Content-Type"], content)


def _elsewhere_ids(app: App) -> dict[str, str]:
    """Real ids of ``app``: a set, a point, a restore set (for the receipt route)."""
    first = services.write_artifact(app, "pltf_page", "index", "v1\n", requested_by="a", tool="t")
    services.write_artifact(app, "pltf_page", "index", "v2\n", requested_by="a", tool="t")
    services.run_restore("set", first.change_set_id)
    restore_set = ChangeSet.objects.filter(app=app, kind=ChangeSet.RESTORE).get()
    person = get_user_model().objects.create_superuser("elsewhere", password="x" * 20)
    reviewer = services.actor_for_user(person)
    comment = services.add_comment(
        first.change_set_id,
        collection="pltf_page",
        name="index",
        side="after",
        line=1,
        body="Why this line?",
        actor=reviewer,
    )
    schedule = services.promote(app, by="a", at=timezone.now() + timedelta(hours=1))
    return {
        "slug": app.slug,
        "schedule_id": schedule.schedule_id or "",
        "collection": "pltf_page",
        "name": "index",
        "set_id": first.change_set_id,
        "point_id": first.restore_point_id,
        "restore_set_id": restore_set.id,
        "comment_id": comment.id,
        "refs": f"{first.change_set_id}...{first.restore_point_id}",
    }


def _values(ids: dict[str, str], template: str) -> dict[str, str]:
    values = dict(ids)
    if template.startswith("/restore-sets/"):
        values["set_id"] = ids["restore_set_id"]
    return values


def _walk(client: ApiClient, there: dict[str, str]) -> list[str]:
    """Every route with ``there``'s ids and with missing ones; the differences, in words."""
    missing = {**MISSING, "restore_set_id": "rs_zzzzzz_00000000"}
    differences = []
    walked = 0
    for method, template in routes():
        if "{" not in template:
            continue  # names nothing that belongs to an app
        walked += 1
        there_path = _fill(template, _values(there, template))
        missing_path = _fill(template, _values(missing, template))
        there_ids = [v for k, v in there.items() if k not in ("collection", "name") and v]
        missing_ids = [v for k, v in missing.items() if k not in ("collection", "name") and v]
        elsewhere = _answer(client, method, there_path, there_ids)
        nowhere = _answer(client, method, missing_path, missing_ids)
        if elsewhere != nowhere or elsewhere[0] != 404:
            differences.append(f"{method} {template}: {elsewhere} ≠ {nowhere}")
    assert walked >= 15, "the walk found the API's routes"
    return differences


@pytest.fixture
def restorer(app) -> ApiClient:
    """A token of app quotes whose user may restore and promote everywhere."""
    user = make_user("rvaid", can_restore=True)
    user.user_permissions.add(
        Permission.objects.get(codename="promote_deployment", content_type__app_label="versions")
    )
    token, _row = services.create_agent_token("rvaid", ["quotes"], can_promote=True)
    return ApiClient(token)


def test_every_route_answers_another_apps_ids_as_missing_ones(app, restorer):
    other = App.objects.create(slug="other", name="Other")
    differences = _walk(restorer, _elsewhere_ids(other))
    assert differences == []


def test_a_user_with_no_role_anywhere_finds_no_app(app):
    make_user("nobody")
    token = make_token("nobody", "quotes")  # before the app had members
    there = _elsewhere_ids(app)
    AppMembership.objects.create(app=app, user=make_user("owner"), role=AppMembership.OWNER)
    differences = _walk(ApiClient(token), there)
    assert differences == []


def test_the_walk_sees_a_difference_when_there_is_one(app, restorer):
    """The walk can fail: the token's own app answers, a missing one does not."""
    mine = _elsewhere_ids(app)
    assert _walk(restorer, mine) != []


def test_refs_of_another_app_answer_as_missing_ones_in_compare_and_at(app, restorer):
    """In the token's own app, another app's set, point and restore set as a ref (compare's
    base or head, ?at=) answer exactly what a missing one does."""
    services.write_artifact(app, "pltf_page", "index", "mine\n", requested_by="a", tool="t")
    there = _elsewhere_ids(App.objects.create(slug="other", name="Other"))
    missing = {**MISSING, "restore_set_id": "rs_zzzzzz_00000000"}
    for key in ("set_id", "point_id", "restore_set_id"):
        for path in (
            "/apps/quotes/compare/{ref}...draft",
            "/apps/quotes/compare/draft...{ref}",
            "/apps/quotes/artifacts/pltf_page/index?at={ref}",
        ):
            elsewhere = _answer(restorer, "GET", path.format(ref=there[key]), [there[key]])
            nowhere = _answer(restorer, "GET", path.format(ref=missing[key]), [missing[key]])
            assert elsewhere == nowhere, path
            assert elsewhere[0] == 404
