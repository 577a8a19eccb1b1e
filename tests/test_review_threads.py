"""Line comments in the panel and threads answered by writes (docs/architecture.md#reviews):
a clicked line number opens a comment form anchored to (artifact, side, blob, line), with htmx
and without; the thread shows under its line, on later states while its line reads unchanged,
and is outdated once it changed; writes may name the threads they answer (``addresses``),
strictly checked; who is awaited for a review; how far the draft is ahead of production."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

import pytest
from api_helpers import ApiClient, make_token
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from versions import messages, selectors, services
from versions.mcp import build_server
from versions.models import PAGE, App, AuditEvent, Comment, RestorePoint

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def person(app: App, name: str, role: str) -> services.Actor:
    if not User.objects.filter(username=name).exists():
        User.objects.create_user(name, password=None)
    services.add_member(app, role=role, username=name, by="setup")
    return services.actor_for_user(User.objects.get(username=name))


def write(app: App, source: str, run: str, who: str = "ada") -> Any:
    return services.write_artifact(
        app, PAGE, "index", source, requested_by=who, tool="t", run_id=run
    )


@pytest.fixture
def turn(app) -> dict[str, Any]:
    write(app, "one\ntwo\nthree\n", "0")
    receipt = write(app, "one\nTWO\nthree\n", "1")
    rita = person(app, "rita", "reviewer")
    return {"set": receipt.change_set_id, "sha": receipt.sha256, "rita": rita}


def _links(html: str) -> list[str]:
    return [
        unquote(u).replace("&amp;", "&")
        for u in re.findall(r'class="ln-link" href="([^"]+)"', html)
    ]


def test_a_reviewer_clicks_a_line_number_comments_and_the_thread_shows_under_its_line(
    client, app, turn
):
    client.force_login(User.objects.get(username="rita"))
    page = client.get(f"/apps/{app.slug}/versions/change-sets/{turn['set']}/").content.decode()
    links = _links(page)
    [after_2] = [u for u in links if "side=after&line=2" in u]
    assert f"set={turn['set']}" in after_2 and f"right={turn['sha']}" in after_2

    form = client.get(after_2, **HX)
    assert form.status_code == 200
    html = form.content.decode()
    assert 'class="comment-form-row"' in html and "TWO" in html and 'name="sha256"' in html

    posted = client.post(
        f"/apps/{app.slug}/versions/change-sets/{turn['set']}/comments/",
        {
            "artifact": f"{PAGE}/index",
            "side": "after",
            "line": "2",
            "sha256": turn["sha"],
            "body": "Why **upper** case?",
            "inline": "1",
        },
        **HX,
    )
    assert posted.status_code == 200
    thread = Comment.objects.get()
    assert (thread.side, thread.line, thread.line_text, thread.blob_sha256) == (
        "after",
        2,
        "TWO",
        turn["sha"],
    )
    assert 'class="thread-row"' in posted.content.decode()
    assert "<strong>upper</strong>" in posted.content.decode()

    page = client.get(f"/apps/{app.slug}/versions/change-sets/{turn['set']}/").content.decode()
    assert f'id="line-thread-{thread.id}"' in page  # under its line in the diff
    assert f'id="thread-{thread.id}"' in page  # and in the set's list of threads


def test_without_javascript_the_line_form_is_a_page_and_posting_returns_to_the_thread(
    client, app, turn
):
    client.force_login(User.objects.get(username="rita"))
    page = client.get(f"/apps/{app.slug}/versions/change-sets/{turn['set']}/").content.decode()
    [before_2] = [u for u in _links(page) if "side=before&line=2" in u]
    form = client.get(before_2)
    assert form.status_code == 200 and "<h2" in form.content.decode()
    assert "two" in form.content.decode()
    posted = client.post(
        f"/apps/{app.slug}/versions/change-sets/{turn['set']}/comments/",
        {"artifact": f"{PAGE}/index", "side": "before", "line": "2", "body": "It was fine."},
    )
    thread = Comment.objects.get()
    assert posted.status_code == 302 and posted["Location"].endswith(f"#thread-{thread.id}")


def test_a_line_form_on_a_state_that_changed_since_is_refused_in_words(client, app, turn):
    client.force_login(User.objects.get(username="rita"))
    answer = client.post(
        f"/apps/{app.slug}/versions/change-sets/{turn['set']}/comments/",
        {
            "artifact": f"{PAGE}/index",
            "side": "after",
            "line": "2",
            "sha256": "0" * 64,
            "body": "Hm",
            "inline": "1",
        },
        **HX,
    )
    assert answer.status_code == 422
    assert messages.LINE_CHANGED_SINCE.format(collection=PAGE, name="index").split(":")[
        0
    ] in answer.content.decode().replace("&ldquo;", "“").replace("&rdquo;", "”")
    assert not Comment.objects.exists()


def test_a_viewer_sees_threads_but_no_line_links(client, app, turn):
    services.add_comment(
        turn["set"], collection=PAGE, name="index", side="after", line=2, body="Hm",
        actor=turn["rita"],
    )  # fmt: skip
    person(app, "vic", "viewer")
    client.force_login(User.objects.get(username="vic"))
    page = client.get(f"/apps/{app.slug}/versions/change-sets/{turn['set']}/").content.decode()
    assert "ln-link" not in page and "line-thread-" in page and ">Reply<" not in page


def test_reply_and_resolve_inline_answer_the_thread_alone(client, app, turn):
    root = services.add_comment(
        turn["set"], collection=PAGE, name="index", side="after", line=2, body="Hm",
        actor=turn["rita"],
    )  # fmt: skip
    client.force_login(User.objects.get(username="rita"))
    base = f"/apps/{app.slug}/versions/change-sets/{turn['set']}/comments/{root.id}"
    replied = client.post(f"{base}/reply/", {"body": "More: see line 3", "inline": "1"}, **HX)
    html = replied.content.decode()
    assert replied.status_code == 200 and html.startswith('<div class="thread')
    assert "More: see line 3" in html
    resolved = client.post(f"{base}/resolve/", {"resolved": "1", "inline": "1"}, **HX)
    assert "Reopen" in resolved.content.decode() and "resolved" in resolved.content.decode()
    assert Comment.objects.get(pk=root.id).resolved
    reopened = client.post(f"{base}/resolve/", {"resolved": "0", "inline": "1"}, **HX)
    assert ">Resolve<" in reopened.content.decode()
    assert not Comment.objects.get(pk=root.id).resolved


def test_a_thread_follows_its_unchanged_line_into_later_states_and_is_outdated_once_it_changed(
    client, app, turn
):
    root = services.add_comment(
        turn["set"], collection=PAGE, name="index", side="after", line=3, body="three?",
        actor=turn["rita"],
    )  # fmt: skip
    later = write(app, "zero\none\nTWO\nthree\n", "2")  # a line above: "three" is line 4 now
    client.force_login(User.objects.get(username="rita"))
    page = client.get(
        f"/apps/{app.slug}/versions/change-sets/{later.change_set_id}/"
    ).content.decode()
    assert f'id="line-thread-{root.id}"' in page
    # it sits under "three" (before line 3, after line 4 in the later set's diff)
    above = page.split('<tr class="thread-row">')[0].rsplit("<tr", 1)[-1]
    assert "</span>three</td>" in above and "line=4" in above
    [thread] = selectors.threads(root.change_set)
    assert thread.outdated is False

    changed = write(app, "zero\none\nTWO\nTHREE\n", "3")
    [thread] = selectors.threads(root.change_set)
    assert thread.outdated is True
    page = client.get(
        f"/apps/{app.slug}/versions/change-sets/{changed.change_set_id}/"
    ).content.decode()
    assert f'id="line-thread-{root.id}"' not in page
    own = client.get(f"/apps/{app.slug}/versions/change-sets/{turn['set']}/").content.decode()
    assert "outdated" in own


def test_a_line_in_a_compare_is_commented_on_the_set_that_wrote_that_state(client, app, turn):
    client.force_login(User.objects.get(username="rita"))
    oldest = list(selectors.change_set_page(app, None).object_list)[-1].id
    page = client.get(f"/apps/{app.slug}/versions/compare/{oldest}...draft/").content.decode()
    [right_2] = [u for u in _links(page) if "side=after&line=2" in u]
    assert "set=" not in right_2
    form = client.get(right_2, **HX).content.decode()
    assert turn["set"] in form  # the set that wrote the draft's state of index
    posted = client.post(
        f"/apps/{app.slug}/versions/change-sets/{turn['set']}/comments/",
        {"artifact": f"{PAGE}/index", "side": "after", "line": "2", "sha256": turn["sha"],
         "body": "From the compare", "inline": "1"},
        **HX,
    )  # fmt: skip
    assert posted.status_code == 200
    assert Comment.objects.get().change_set_id == turn["set"]
    page = client.get(f"/apps/{app.slug}/versions/compare/{oldest}...draft/").content.decode()
    assert "From the compare" in page


def test_a_compare_line_a_restore_put_back_is_commented_on_the_agents_set_that_wrote_it(
    client, app, turn
):
    """Found in use: after a Restore all put an agent's state back, a comment on a line of it
    in a compare sat on the restore set — a person's action, with no review box, where the
    agent never reads its reviews. It sits on the agent's set that wrote the state."""
    undone = services.restore_change_set(turn["set"], by="ada")  # back to "one two three"
    services.restore_change_set(undone.set_id, by="ada")  # the turn's "TWO" put back
    client.force_login(User.objects.get(username="rita"))
    oldest = list(selectors.change_set_page(app, None).object_list)[-1].id
    page = client.get(f"/apps/{app.slug}/versions/compare/{oldest}...draft/").content.decode()
    [right_2] = [u for u in _links(page) if "side=after&line=2" in u]
    form = client.get(right_2, **HX).content.decode()
    assert turn["set"] in form and undone.set_id not in form
    assert f"/change-sets/{turn['set']}/comments/" in form
    assert selectors.comment_target(app, PAGE, "index", turn["sha"]) == (turn["set"], "after")


def _hidden(html: str, form_class: str) -> dict[str, str]:
    """The hidden fields of the first ``<form class="<form_class>" …>`` in ``html``."""
    start = html.index(f'<form class="{form_class}"')
    form = html[start : html.index("</form>", start)]
    return dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form))


def _names_its_set(html: str, app: App, set_id: str) -> bool:
    """Whether an inline thread in ``html`` says which set it sits on ("· on cs_…")."""
    return f' · on <a href="/apps/{app.slug}/versions/change-sets/{set_id}/#thread-' in html


def test_a_thread_says_which_set_it_sits_on_where_the_diff_is_of_no_set_or_another(
    client, app, turn
):
    """Found in use: a thread added, answered or resolved in place in a compare drew itself as
    if on its own set's page — without "on cs_…", which the page drew on a reload. Each form
    carries where it is shown, so the thread draws the same in place as on the page."""
    client.force_login(User.objects.get(username="rita"))
    oldest = list(selectors.change_set_page(app, None).object_list)[-1].id
    compare = f"/apps/{app.slug}/versions/compare/{oldest}...draft/"
    [right_2] = [
        u for u in _links(client.get(compare).content.decode()) if "side=after&line=2" in u
    ]
    fields = _hidden(client.get(right_2, **HX).content.decode(), "line-comment")
    assert fields["shown_in"] == ""
    url = f"/apps/{app.slug}/versions/change-sets/{turn['set']}/comments/"
    added = client.post(url, {**fields, "body": "In the compare"}, **HX).content.decode()
    assert _names_its_set(added, app, turn["set"])
    assert _names_its_set(client.get(compare).content.decode(), app, turn["set"])
    root = Comment.objects.get()
    replied = client.post(
        f"{url}{root.id}/reply/", {**_hidden(added, "reply-form"), "body": "More"}, **HX
    ).content.decode()
    assert "More" in replied and _names_its_set(replied, app, turn["set"])
    resolved = client.post(
        f"{url}{root.id}/resolve/", _hidden(replied, "resolve-form"), **HX
    ).content.decode()
    assert "Reopen" in resolved and _names_its_set(resolved, app, turn["set"])
    # On the set's own page the thread needs no such words, in place or on a reload.
    page = f"/apps/{app.slug}/versions/change-sets/{turn['set']}/"
    [after_2] = [u for u in _links(client.get(page).content.decode()) if "side=after&line=2" in u]
    fields = _hidden(client.get(after_2, **HX).content.decode(), "line-comment")
    assert fields["shown_in"] == turn["set"]
    own = client.post(url, {**fields, "body": "On the set"}, **HX).content.decode()
    assert "On the set" in own and not _names_its_set(own, app, turn["set"])


# --- addresses --------------------------------------------------------------------------


@pytest.fixture
def thread(app, turn) -> dict[str, Any]:
    root = services.add_comment(
        turn["set"], collection=PAGE, name="index", side="after", line=2, body="Lower case?",
        actor=turn["rita"],
    )  # fmt: skip
    person(app, "agent-owner", "owner")
    return {**turn, "comment": root.id, "token": make_token("agent-owner", app.slug)}


def test_a_write_that_addresses_a_thread_marks_it_addressed_in_its_point(app, thread):
    client = ApiClient(thread["token"])
    answer = client.put(
        f"/apps/{app.slug}/artifacts/{PAGE}/index",
        {"source": "one\ntwo\nthree\n", "addresses": [thread["comment"]]},
    )
    assert answer.status_code == 200, answer.content
    point = answer.json()["restorePointId"]
    root = Comment.objects.get(pk=thread["comment"])
    assert root.addressed_in == point and not root.resolved  # a person still resolves it
    data = client.get(f"/change-sets/{thread['set']}/reviews").json()
    assert data["threads"][0]["addressedIn"] == point
    assert AuditEvent.objects.filter(action="thread_addressed").count() == 1


def test_a_reply_id_addresses_its_thread(app, thread):
    reply = services.reply(thread["comment"], body="On it", actor=thread["rita"])
    receipt = services.write_artifact(app, PAGE, "index", "x\n", tool="t", addresses=[reply.id])
    assert Comment.objects.get(pk=thread["comment"]).addressed_in == receipt.restore_point_id


@pytest.mark.parametrize(
    "addresses",
    [["cm_zzzz_00000000"], ["not-an-id"], "cm_zzzz_00000000", [1], ["cm_a_00000000"] * 21],
)
def test_unknown_or_malformed_addresses_are_refused_in_words_and_nothing_is_written(
    app, thread, addresses
):
    client = ApiClient(thread["token"])
    before = client.get(f"/apps/{app.slug}/artifacts/{PAGE}/index").json()["sha256"]
    answer = client.put(
        f"/apps/{app.slug}/artifacts/{PAGE}/index",
        {"source": "changed\n", "addresses": addresses},
    )
    assert answer.status_code in (400, 422), answer.content
    assert "addresses" in answer.json()["detail"] or answer.json().get("field") == "addresses"
    assert client.get(f"/apps/{app.slug}/artifacts/{PAGE}/index").json()["sha256"] == before


def test_another_apps_thread_is_refused_like_an_unknown_one(app, thread):
    other = App.objects.create(slug="other", name="Other")
    services.write_artifact(other, PAGE, "index", "a\n", tool="t", run_id="o1")
    receipt = services.write_artifact(other, PAGE, "index", "b\n", tool="t", run_id="o2")
    rita = person(other, "rita", "reviewer")
    theirs = services.add_comment(
        receipt.change_set_id, collection=PAGE, name="index", side="after", line=1, body="?",
        actor=rita,
    )  # fmt: skip
    answer = ApiClient(thread["token"]).put(
        f"/apps/{app.slug}/artifacts/{PAGE}/index",
        {"source": "changed\n", "addresses": [theirs.id]},
    )
    assert answer.status_code == 400 and answer.json()["field"] == "addresses"
    assert answer.json()["detail"] == messages.ADDRESS_UNKNOWN.format(id=theirs.id, slug=app.slug)
    assert Comment.objects.get(pk=theirs.id).addressed_in == ""


def test_a_delete_addresses_threads_through_its_query(app, thread):
    client = ApiClient(thread["token"])
    answer = client.delete(f"/apps/{app.slug}/artifacts/{PAGE}/index?addresses={thread['comment']}")
    assert answer.status_code == 200, answer.content
    assert Comment.objects.get(pk=thread["comment"]).addressed_in == answer.json()["restorePointId"]


def _tool(slug: str, token: str, tool: str, **arguments: Any) -> tuple[bool, dict[str, Any]]:
    server = build_server(slug, token)
    result = server._tool_manager._tools[tool].fn(ctx=None, **arguments)
    return bool(result.is_error), dict(result.structured_content or {})


@pytest.mark.django_db(transaction=True)
def test_mcp_writes_address_threads_and_unknown_ids_are_refused(app, thread):
    error, data = _tool(
        app.slug, thread["token"], "write_artifact", collection=PAGE, name="index",
        source="one\nTwo\nthree\n", addresses=["cm_zzzz_00000000"],
    )  # fmt: skip
    assert error and "cm_zzzz_00000000" in data["message"]
    error, data = _tool(
        app.slug, thread["token"], "edit_artifact", collection=PAGE, name="index",
        old_text="TWO", new_text="two", addresses=[thread["comment"]],
    )  # fmt: skip
    assert not error, data
    assert Comment.objects.get(pk=thread["comment"]).addressed_in == data["restorePointId"]


# --- awaiting review, the draft ahead --------------------------------------------------


def test_sets_await_a_reviewer_until_they_review_them_and_again_after_later_writes(app, turn):
    rita = turn["rita"]
    awaited = selectors.awaiting_review("rita", [app])[app.pk]
    assert [c.id for c in awaited] == [turn["set"]] or turn["set"] in [c.id for c in awaited]
    services.submit_review(turn["set"], verdict="comment", body="Looking", actor=rita)
    assert turn["set"] not in [c.id for c in selectors.awaiting_review("rita", [app])[app.pk]]
    write(app, "one\nTWO\nthree\nfour\n", "1")  # the same run: the set grows
    assert turn["set"] in [c.id for c in selectors.awaiting_review("rita", [app])[app.pk]]


def test_nobody_awaits_their_own_agents_turn_and_an_approved_set_awaits_no_one(app, turn):
    assert turn["set"] not in [c.id for c in selectors.awaiting_review("ada", [app])[app.pk]]
    olga = person(app, "olga", "reviewer")
    services.submit_review(turn["set"], verdict="approve", actor=olga)
    assert turn["set"] not in [c.id for c in selectors.awaiting_review("rita", [app])[app.pk]]


def test_awaiting_review_reads_as_many_queries_for_eight_promoted_apps_as_for_one(app, turn):
    services.promote(app, by="olga")
    write(app, "one\nTWO\nthree\nfive\n", "2")  # a set production does not serve yet

    def count(apps: list[App]) -> int:
        with CaptureQueriesContext(connection) as queries:
            selectors.awaiting_review("rita", apps)
        return len(queries)

    one = count([App.objects.get(pk=app.pk)])
    others = []
    for i in range(7):
        other = App.objects.create(slug=f"other-{i}", name=f"Other {i}")
        services.write_artifact(other, PAGE, "index", "x\n", requested_by="ada", tool="t")
        services.promote(other, by="olga")
        others.append(App.objects.get(pk=other.pk))
    assert count([App.objects.get(pk=app.pk), *others]) == one


def test_the_apps_list_and_the_app_show_awaiting_your_review(client, app, turn):
    client.force_login(User.objects.get(username="rita"))
    home = client.get("/").content.decode()
    assert "Awaiting your review" in home
    panel = client.get(f"/apps/{app.slug}/versions/").content.decode()
    assert "Awaiting your review" in panel and turn["set"] in panel
    person(app, "vic", "viewer")
    client.force_login(User.objects.get(username="vic"))
    assert "Awaiting your review" not in client.get("/").content.decode()


def test_the_draft_ahead_of_production_counts_the_sets_production_does_not_serve(client, app, turn):
    assert selectors.draft_ahead(app) is None  # no production yet
    services.promote(app, by="olga")
    app.refresh_from_db()
    assert selectors.draft_ahead(app) == []
    first = write(app, "one\nTWO\nthree\n4\n", "a1")
    write(app, "one\nTWO\nthree\n4\n5\n", "a2")
    services.write_artifact(app, PAGE, "about", "hi\n", tool="t", run_id="a3")
    app.refresh_from_db()
    ahead = selectors.draft_ahead(app)
    assert len(ahead) == 3 and ahead[-1].id == first.change_set_id
    assert all(r.review.status == "Review required" for r in ahead)
    person(app, "olga", "promoter")
    client.force_login(User.objects.get(username="olga"))
    page = client.get(f"/apps/{app.slug}/versions/production/").content.decode()
    assert "The draft is 3 change sets ahead of production" in page
    assert first.change_set_id in page


# --- restore sets under their set, the compare picker, the demo --------------------------


def test_a_restore_set_says_what_it_restored_and_sits_under_its_set(admin_client, app, turn):
    receipt = services.restore_change_set(turn["set"], by="olga")
    write(app, "later\n", "9")  # a newer set, so the restore set is not simply next in time
    page = admin_client.get(f"/apps/{app.slug}/versions/").content.decode()
    rows = re.findall(r'<li class="row set([^"]*)" id="set-([^"]+)"', page)
    ids = [set_id for _, set_id in rows]
    assert ids.index(receipt.set_id) == ids.index(turn["set"]) + 1
    assert "nested" in {i: c for c, i in rows}[receipt.set_id]
    assert f"Restore all of {turn['set']} by olga" in page


def test_a_restore_of_one_point_says_which_point_not_restore_all(admin_client, app, turn):
    point = RestorePoint.objects.get(change_set_id=turn["set"]).id
    receipt = services.restore_point(point, by="olga")
    assert receipt.as_dict()["restoredPoint"] == point
    page = admin_client.get(f"/apps/{app.slug}/versions/").content.decode()
    assert f"Restore of {point} ({turn['set']}) by olga" in page
    assert f"Restore all of {turn['set']}" not in page


def test_compare_offers_recent_sets_deployments_release_production_and_draft(
    admin_client, app, turn
):
    services.promote(app, by="olga")
    services.mark_release(turn["set"], by="olga")
    page = admin_client.get(f"/apps/{app.slug}/versions/compare/draft...draft/").content.decode()
    picker = page.split('<select id="c-left"')[1].split("</select>")[0]
    assert 'value="draft"' in picker and 'value="production"' in picker
    assert "Release (" in picker and f'value="{turn["set"]}"' in picker
    assert re.search(r'value="dp_[0-9a-z]+_[0-9a-z]+"', picker)
    assert '<input id="c-left"' not in page  # nothing to type


def test_the_demo_turn_carries_a_message_and_a_review_with_a_thread(db):
    from django.core.management import call_command

    call_command("load_demo", stdout=__import__("io").StringIO())
    app = App.objects.get(slug="quote-approvals")
    [turn] = [c for c in app.change_sets.all() if c.run_id == "demo-agent-turn-1"]
    assert "Approve all" in turn.message
    [review] = turn.reviews.all()
    assert review.verdict == "request_changes" and review.author_name == "reviewer"
    [thread] = selectors.threads(turn)
    assert "approved automatically" in thread.comment.line_text and not thread.outdated


def test_a_line_form_quotes_only_states_of_this_apps_artifact(client, app, turn):
    other = App.objects.create(slug="other", name="Other")
    secret = services.write_artifact(
        other, PAGE, "index", "another app's secret\n", tool="t", run_id="s"
    )
    client.force_login(User.objects.get(username="rita"))
    url = (
        f"/apps/{app.slug}/versions/line-comment/?artifact={PAGE}/index&set={turn['set']}"
        f"&view=set&side=after&line=1&right="
    )
    theirs = client.get(url + secret.sha256, **HX).content.decode()
    assert "secret" not in theirs
    ours = client.get(url + turn["sha"], **HX).content.decode()
    assert ">one</code>" in ours
