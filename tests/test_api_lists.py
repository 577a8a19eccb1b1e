"""The agent API's other lists, who a token is, and comparing two refs (docs/api.md#cursors,
docs/api.md#me, docs/api.md#compare): artifacts, deployments and reviews page by keyset
(`next_cursor` and `Link: rel="next"`), writes between pages never repeat or skip one;
`GET /me` says who the token is; `compare/{base}...{head}` takes every ref `?at=` takes."""

from __future__ import annotations

import re
from itertools import count

import pytest
from api_helpers import ApiClient, make_token, make_user
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from versions import services
from versions.models import AgentToken, ChangeSet
from versions.selectors.paging import encode_cursor

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(app) -> ApiClient:
    make_user("rvaid")
    return ApiClient(make_token("rvaid", "quotes"))


def _next_link(response) -> str | None:
    link = response.get("Link")
    if not link:
        return None
    match = re.fullmatch(r'<(.+)>; rel="next"', link)
    assert match, link
    return match.group(1)


def _pages(api: ApiClient, first, between=None) -> list[dict]:
    """Every page of a keyset walk, following Link; ``between`` runs between two pages."""
    pages = [first.json()]
    link = _next_link(first)
    assert first.json()["next_cursor"] and link
    while link:
        if between is not None:
            between()
        page = api.client.get(link, headers=api._headers(None))
        assert page.status_code == 200, page.content
        pages.append(page.json())
        link = _next_link(page)
        assert (link is None) == (page.json()["next_cursor"] is None)
    return pages


def _walk(api: ApiClient, first, key: str, between=None) -> list:
    """Every item of a keyset walk, following Link; ``between`` runs between two pages."""
    return [item for page in _pages(api, first, between) for item in page[key]]


def _write(app, name: str, source: str = "x\n") -> None:
    services.write_artifact(app, "pltf_page", name, source, requested_by="a", tool="t")


def test_artifacts_walk_by_cursor_in_name_order_and_a_new_one_behind_the_cursor_is_not_repeated(
    api, app
):
    for n in range(7):
        _write(app, f"page-{n}")
    first = api.get("/apps/quotes/artifacts", limit=3)
    assert first.status_code == 200
    assert [a["name"] for a in first.json()["artifacts"]] == ["page-0", "page-1", "page-2"]
    added = iter(["page-00", "page-9"])  # one before the cursor, one after it
    seen = _walk(api, first, "artifacts", between=lambda: _write(app, next(added, "page-99")))
    names = [a["name"] for a in seen]
    assert len(names) == len(set(names))
    assert names[:7] == ["page-0", "page-1", "page-2", "page-3", "page-4", "page-5", "page-6"]
    assert "page-9" in names and "page-00" not in names


def test_artifacts_without_limit_are_the_whole_list_with_no_cursor(api, app):
    _write(app, "index")
    body = api.get("/apps/quotes/artifacts").json()
    assert [a["name"] for a in body["artifacts"]] == ["index"]
    assert body["next_cursor"] is None


def test_a_cursor_the_api_did_not_give_is_refused_in_words(api, app):
    response = api.get("/apps/quotes/artifacts", limit=2, cursor="bm90LWEtY3Vyc29y")
    assert response.status_code == 400
    assert response.json()["field"] == "cursor"
    assert "not one this API gave" in response.json()["message"]


def _promoter(app) -> ApiClient:
    user = make_user("shipper")
    user.user_permissions.add(
        Permission.objects.get(codename="promote_deployment", content_type__app_label="versions")
    )
    token, _row = services.create_agent_token("shipper", ["quotes"], can_promote=True)
    return ApiClient(token)


def test_deployments_walk_by_cursor_newest_first(app):
    ship = _promoter(app)
    for n in range(5):
        _write(app, "index", f"v{n}\n")
        assert ship.post("/apps/quotes/deployments", {}).status_code == 200
    first = ship.get("/apps/quotes/deployments", limit=2)
    assert first.status_code == 200
    body = first.json()
    assert body["production"] == body["deployments"][0]["id"]
    assert body["history"][0]["from"] is not None or body["history"][0]["kind"]
    seen = _walk(ship, first, "deployments")
    ids = [d["id"] for d in seen]
    assert len(ids) == 5 == len(set(ids))
    assert ids == [d["id"] for d in ship.get("/apps/quotes/deployments").json()["deployments"]]


def test_an_artifacts_history_walks_by_cursor_and_writes_between_pages_never_repeat_a_point(
    api, app
):
    for n in range(5):
        _write(app, "index", f"v{n}\n")
    path = "/apps/quotes/artifacts/pltf_page/index/history"
    before = [p["id"] for p in api.get(path).json()["items"]]
    written = count(10)
    first = api.get(path, limit=2)
    seen = _walk(api, first, "items", between=lambda: _write(app, "index", f"v{next(written)}\n"))
    assert [p["id"] for p in seen] == before and len(before) == 5


def test_production_history_walks_by_cursor_and_promotions_between_pages_never_repeat_one(app):
    ship = _promoter(app)
    for n in range(5):
        _write(app, "index", f"v{n}\n")
        assert ship.post("/apps/quotes/deployments", {}).status_code == 200
    assert ship.post("/apps/quotes/production/rollback", {}).status_code == 200
    before = ship.get("/apps/quotes/production/history").json()
    assert before["next_cursor"] is None and len(before["items"]) == 6
    assert [e["kind"] for e in before["items"]] == ["rollback"] + ["promotion"] * 5
    made = count(10)

    def promote_again() -> None:  # a newer event between every two pages
        _write(app, "index", f"v{next(made)}\n")
        assert ship.post("/apps/quotes/deployments", {}).status_code == 200

    first = ship.get("/apps/quotes/production/history", limit=2)
    assert first.status_code == 200
    assert len(first.json()["items"]) == 2
    seen = _walk(ship, first, "items", between=promote_again)
    assert seen == before["items"]
    head = ship.client.head(
        "/api/v1/apps/quotes/production/history?limit=2", headers=ship._headers(None)
    )
    assert head.status_code == 200 and head["Link"]


def test_the_deployments_answer_carries_the_newest_history_and_the_cursor_of_the_rest(
    app, monkeypatch
):
    monkeypatch.setattr("versions.selectors.production.HISTORY_LIMIT", 2)
    ship = _promoter(app)
    for n in range(4):
        _write(app, "index", f"v{n}\n")
        assert ship.post("/apps/quotes/deployments", {}).status_code == 200
    overview = ship.get("/apps/quotes/deployments").json()
    assert len(overview["history"]) == 2 and overview["history_next_cursor"]
    rest = ship.get("/apps/quotes/production/history", cursor=overview["history_next_cursor"])
    whole = ship.get("/apps/quotes/production/history").json()["items"]
    assert overview["history"] + rest.json()["items"] == whole
    assert rest.json()["next_cursor"] is None and "Link" not in rest


def _reviewed_set(app) -> tuple[str, services.Actor]:
    """A set with three reviews and three line comment threads, made in turns."""
    first = services.write_artifact(
        app, "pltf_page", "index", "a\nb\nc\nd\ne\nf\n", requested_by="a", tool="t"
    )
    person = get_user_model().objects.create_superuser("ana", password="x" * 20)
    ana = services.actor_for_user(person)
    for line in range(1, 4):
        services.submit_review(first.change_set_id, verdict="comment", body=f"R{line}", actor=ana)
        services.add_comment(
            first.change_set_id, collection="pltf_page", name="index", side="after",
            line=line, body=f"T{line}", actor=ana,
        )  # fmt: skip
    return first.change_set_id, ana


def _talk_more(set_id: str, ana: services.Actor, thread: str):
    """A review, a new thread and a reply, each time it is called."""
    said = count(4)

    def more() -> None:
        n = next(said)
        services.submit_review(set_id, verdict="comment", body=f"R{n}", actor=ana)
        services.add_comment(
            set_id, collection="pltf_page", name="index", side="after", line=n, body=f"T{n}",
            actor=ana,
        )  # fmt: skip
        services.reply(thread, body=f"Reply {n}", actor=ana)

    return more


def test_a_sets_reviews_and_threads_walk_together_by_cursor_and_new_ones_never_repeat_one(api, app):
    set_id, ana = _reviewed_set(app)
    whole = api.get(f"/change-sets/{set_id}/reviews").json()
    assert whole["next_cursor"] is None
    assert [r["body"] for r in whole["reviews"]] == ["R1", "R2", "R3"]  # all, oldest first
    assert [t["comments"][0]["body"] for t in whole["threads"]] == ["T1", "T2", "T3"]
    first = api.get(f"/change-sets/{set_id}/reviews", limit=4)
    assert first.status_code == 200, first.content
    body = first.json()
    assert [r["body"] for r in body["reviews"]] + [
        t["comments"][0]["body"] for t in body["threads"]
    ] == ["R3", "R2", "T3", "T2"]  # the newest four of both, newest first
    assert body["status"] == whole["status"]
    pages = _pages(api, first, between=_talk_more(set_id, ana, whole["threads"][0]["id"]))
    reviews = [r["id"] for page in pages for r in page["reviews"]]
    threads = [t["id"] for page in pages for t in page["threads"]]
    assert reviews == [r["id"] for r in reversed(whole["reviews"])]
    assert threads == [t["id"] for t in reversed(whole["threads"])]
    assert all(len(p["reviews"]) + len(p["threads"]) == 4 for p in pages[:-1])


@pytest.mark.parametrize(
    "cursor",
    ["bm90LWEtY3Vyc29y", encode_cursor("yesterday", "rv_1"), encode_cursor("2026-12-01")],
)
def test_a_cursor_the_api_did_not_give_is_refused_in_words_on_every_list(api, app, cursor):
    set_id, _ana = _reviewed_set(app)
    for path in (
        f"/change-sets/{set_id}/reviews",
        "/apps/quotes/production/history",
        "/apps/quotes/artifacts/pltf_page/index/history",
        "/apps/quotes/deployments",
        "/apps/quotes/reviews",
    ):
        response = api.get(path, limit=2, cursor=cursor)
        assert response.status_code == 400, (path, response.content)
        assert response.json()["field"] == "cursor"
        assert "is not one this API gave" in response.json()["message"]


def test_a_history_cursor_naming_no_event_id_is_refused_in_words(api, app):
    forged = encode_cursor("2026-12-01T00:00:00+00:00", "dp_not_a_number")
    response = api.get("/apps/quotes/production/history", cursor=forged)
    assert response.status_code == 400
    assert response.json()["field"] == "cursor"


def test_reviews_walk_by_cursor_and_filter_by_verdict(api, app):
    first = services.write_artifact(app, "pltf_page", "index", "v1\n", requested_by="a", tool="t")
    person = get_user_model().objects.create_superuser("ana", password="x" * 20)
    ana = services.actor_for_user(person)
    for verdict in ("comment", "approve", "comment", "request_changes", "comment"):
        services.submit_review(first.change_set_id, verdict=verdict, body="Seen.", actor=ana)
    page = api.get("/apps/quotes/reviews", limit=2)
    assert page.status_code == 200, page.content
    seen = _walk(api, page, "items")
    assert [r["verdict"] for r in seen] == [
        "comment",
        "request_changes",
        "comment",
        "approve",
        "comment",
    ]
    assert {r["changeSetId"] for r in seen} == {first.change_set_id}
    only = api.get("/apps/quotes/reviews", verdict="comment").json()
    assert [r["verdict"] for r in only["items"]] == ["comment"] * 3


def test_me_says_who_the_token_is_and_what_it_may_do(app):
    ship = _promoter(app)
    body = ship.get("/me").json()
    row = AgentToken.objects.get(user__username="shipper")
    assert body["user"] == "shipper"
    assert body["token"]["prefix"] == row.prefix
    assert body["token"]["can_promote"] is True
    assert body["token"]["expires_on"]
    assert body["token"]["last_used_on"]
    assert body["apps"] == [
        {"slug": "quotes", "name": "Quote approvals", "may": ["view", "write", "promote"]}
    ]


def test_me_without_a_token_is_401(app):
    assert ApiClient(None).get("/me").status_code == 401


def test_compare_takes_every_ref_and_answers_files_with_counts_or_a_diff(app):
    ship = _promoter(app)
    one = services.write_artifact(app, "pltf_page", "index", "a\nb\n", requested_by="a", tool="t")
    assert ship.post("/apps/quotes/deployments", {}).status_code == 200
    services.mark_release(one.change_set_id)
    two = services.write_artifact(
        app, "pltf_page", "index", "a\nB\nc\n", requested_by="a", tool="t", run_id="r2"
    )
    services.write_artifact(
        app, "pltf_page", "about", "hi\n", requested_by="a", tool="t", run_id="r2"
    )
    deployment = ship.get("/apps/quotes/deployments").json()["production"]
    restore = services.run_restore("set", two.change_set_id)
    for base, head in [
        ("production", "draft"),
        ("release", two.change_set_id),
        (deployment, two.change_set_id),
        (one.restore_point_id, "release"),
        (one.change_set_id, restore.set_id),
    ]:
        response = ship.get(f"/apps/quotes/compare/{base}...{head}")
        assert response.status_code == 200, (base, head, response.content)
    body = ship.get(f"/apps/quotes/compare/release...{two.change_set_id}").json()
    assert body["base"] == "release"
    assert [
        (f["name"], f["change"], f["lines_added"], f["lines_removed"]) for f in body["files"]
    ] == [
        ("about", "added", 1, 0),
        ("index", "changed", 2, 1),
    ]
    assert body["lines_added"] == 3 and body["total_files"] == 2
    diff = ship.get(
        f"/apps/quotes/compare/release...{two.change_set_id}", headers={"Accept": "text/x-diff"}
    )
    assert diff["Content-Type"].startswith("text/x-diff")
    text = diff.content.decode()
    assert "--- /dev/null\n+++ b/pltf_page/about\n" in text
    assert "-b\n+B\n+c\n" in text


def test_compare_of_a_missing_ref_or_a_bad_range_is_404_in_words(api, app):
    _write(app, "index")
    missing = api.get("/apps/quotes/compare/cs_rp_zzzzzz_00000000...draft")
    assert missing.status_code == 404
    assert "cs_rp_zzzzzz_00000000" in missing.json()["message"]
    no_release = api.get("/apps/quotes/compare/release...draft")
    assert no_release.status_code == 404
    assert "no release yet" in no_release.json()["message"]
    assert api.get("/apps/quotes/compare/draft..draft").status_code in (404, 422)


def test_read_at_release_is_the_state_right_after_the_release_set(api, app):
    one = services.write_artifact(app, "pltf_page", "index", "v1\n", requested_by="a", tool="t")
    services.mark_release(one.change_set_id)
    services.write_artifact(
        app, "pltf_page", "index", "v2\n", requested_by="a", tool="t", run_id="b"
    )
    body = api.get("/apps/quotes/artifacts/pltf_page/index", at="release").json()
    assert body["source"] == "v1\n"
    assert ChangeSet.objects.count() == 2


def test_a_retried_plain_rollback_rolls_back_twice_and_a_rollback_to_a_deployment_once(app):
    """What docs/api.md#retrying-a-rollback tells a client that lost the answer to a rollback:
    a plain rollback sent again moves production once more; one that names ``to`` is a no-op
    the second time."""
    ship = _promoter(app)
    ids = []
    for n in range(3):
        _write(app, "index", f"v{n}\n")
        ids.append(ship.post("/apps/quotes/deployments", {}).json()["deploymentId"])
    first = ship.post("/apps/quotes/production/rollback", {}).json()
    again = ship.post("/apps/quotes/production/rollback", {}).json()
    assert (first["deploymentId"], again["deploymentId"]) == (ids[1], ids[0])
    forward = ship.post("/apps/quotes/production/rollback", {"to": ids[2]}).json()
    retried = ship.post("/apps/quotes/production/rollback", {"to": ids[2]}).json()
    assert forward["kind"] == "rollback" and forward["deploymentId"] == ids[2]
    assert retried["kind"] == "noop"
    assert ship.get("/apps/quotes/deployments").json()["production"] == ids[2]


def test_a_change_set_filter_with_a_control_character_is_refused_as_the_document_says(api, app):
    response = api.get("/apps/quotes/change-sets", written_by="token:\x84")
    assert response.status_code == 422
    assert "control characters" in response.content.decode()
    too_long = api.get("/apps/quotes/change-sets", run_id="r" * 201)
    assert too_long.status_code == 422
    assert "at most 200 characters" in too_long.content.decode()


def test_the_document_says_revert_takes_a_writers_set_only(api, app):
    document = api.client.get("/api/v1/openapi.json").json()
    revert = document["paths"]["/api/v1/change-sets/{set_id}/revert"]["post"]
    (set_id,) = [p for p in revert["parameters"] if p["name"] == "set_id"]
    assert set_id["schema"]["pattern"].startswith("^cs_rp_")
    first = services.write_artifact(app, "pltf_page", "index", "v1\n", requested_by="a", tool="t")
    restore = services.run_restore("set", first.change_set_id)
    make_user("restorer", can_restore=True)
    restorer = ApiClient(make_token("restorer", "quotes"))
    refused = restorer.post(f"/change-sets/{restore.set_id}/revert")
    assert refused.status_code == 400  # a restore set is undone by restoring it, in words
    assert "Undo this restore" in refused.json()["message"]


def test_since_is_a_date_and_time_not_a_number(api, app):
    assert api.get("/apps/quotes/change-sets", since="0.5").status_code == 422
    assert api.get("/apps/quotes/change-sets", since="2026-12-01").status_code == 422
    assert api.get("/apps/quotes/change-sets", since="2026-12-01T00:00:00Z").status_code == 200
