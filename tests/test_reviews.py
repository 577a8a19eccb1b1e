"""versions.services.reviews (docs/architecture.md#reviews): people with ``reviewer`` or higher
approve, request changes and comment on lines; approvals go stale when later writes join the
set; nobody approves their own set; agent tokens never review but reply; every action is in
the audit trail; bodies render as inert Markdown."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import User

from versions import messages, selectors, services
from versions.errors import Forbidden, InvalidInput, NotFound
from versions.markdown import render_markdown
from versions.models import PAGE, App, AuditEvent, Comment, Review
from versions.services import create_agent_token


def person(app: App, name: str, role: str | None = "reviewer") -> services.Actor:
    user = User.objects.create_user(name, password=None)
    if role:
        services.add_member(app, role=role, username=name, by="setup")
    return services.actor_for_user(User.objects.get(pk=user.pk))


def turn(app: App, source: str, *, run: str = "r1", by: str = "ada") -> str:
    receipt = services.write_artifact(
        app, PAGE, "index", source, requested_by=by, tool="t", run_id=run
    )
    assert receipt.change_set_id
    return receipt.change_set_id


@pytest.fixture
def set_id(app: App) -> str:
    turn(app, "one\ntwo\nthree\n", run="setup")
    return turn(app, "one\nTWO\nthree\n")


def state(set_id: str, required: int = 1, dismiss: bool = True) -> selectors.SetReview:
    protection = selectors.protection_of(App.objects.get(change_sets__id=set_id))
    protection.required_approvals, protection.dismiss_stale = required, dismiss
    return selectors.review_states([set_id], protection)[set_id]


def test_an_approval_keeps_the_sets_point_ids_and_is_audited(app, set_id):
    rita = person(app, "rita")
    review = services.submit_review(set_id, verdict="approve", actor=rita)
    assert review.id.startswith("rv_") and len(review.id.split("_")[2]) == 8
    assert review.points == list(
        app.restore_points.filter(change_set_id=set_id).values_list("id", flat=True)
    )
    assert state(set_id).status == selectors.APPROVED
    event = AuditEvent.objects.get(action="review_submitted")
    assert (event.actor_name, event.targets, event.details) == (
        "rita",
        [set_id, review.id],
        {"verdict": "approve"},
    )


def test_an_approval_is_stale_once_a_later_write_joins_the_set(app, set_id):
    services.submit_review(set_id, verdict="approve", actor=person(app, "rita"))
    assert turn(app, "one\nTWO\nTHREE\n") == set_id  # the same run: the same set
    assert state(set_id).stale == ["rita"] and state(set_id).approvals == []
    assert state(set_id).status == selectors.REVIEW_REQUIRED
    assert state(set_id, dismiss=False).approvals == ["rita"]
    [(_, stale)] = selectors.reviews(app.change_sets.get(pk=set_id))
    assert stale is True


def test_nobody_approves_their_own_set(app, set_id):
    ada = person(app, "ada")  # the set's points name ada as requested_by
    services.submit_review(set_id, verdict="approve", actor=ada)
    assert state(set_id).approvals == [] and state(set_id).own == ["ada"]
    assert state(set_id).lacks() == [
        f"{set_id} needs 1 more approval from someone other than its authors"
    ]


def test_a_change_request_stays_open_until_its_author_approves(app, set_id):
    rita = person(app, "rita")
    services.submit_review(set_id, verdict="request_changes", body="Say *why*.", actor=rita)
    services.submit_review(set_id, verdict="approve", actor=person(app, "tom"))
    assert state(set_id).status == selectors.CHANGES_REQUESTED
    assert state(set_id).lacks() == [f"{set_id} has changes requested by rita"]
    services.submit_review(set_id, verdict="approve", actor=rita)
    assert state(set_id, required=2).status == selectors.APPROVED


def test_agent_tokens_never_review_and_are_told_so(app, set_id):
    User.objects.create_user("bot", password=None)
    services.add_member(app, role="owner", username="bot", by="setup")
    _, row = create_agent_token("bot", [app.slug])
    token = services.actor_for_token(row)
    with pytest.raises(Forbidden) as refused:
        services.submit_review(set_id, verdict="approve", actor=token)
    assert refused.value.message == messages.TOKEN_CANNOT_REVIEW
    assert Review.objects.count() == 0


def test_a_viewer_may_not_review(app, set_id):
    with pytest.raises(Forbidden) as refused:
        services.submit_review(set_id, verdict="approve", actor=person(app, "vic", "viewer"))
    assert "may not review change sets" in refused.value.message
    assert refused.value.message.endswith(messages.NEEDS_ROLE.format(role="reviewer"))


def test_a_set_of_an_app_the_person_cannot_see_is_not_found(app, set_id):
    other = App.objects.create(slug="other", name="Other")
    stranger = person(other, "sam", "owner")
    with pytest.raises(NotFound) as missing:
        services.submit_review(set_id, verdict="approve", actor=stranger)
    assert missing.value.message == f"There is no change set “{set_id}”."


def test_a_body_over_the_limit_is_refused_in_words(app, set_id):
    with pytest.raises(InvalidInput) as refused:
        services.submit_review(
            set_id, verdict="comment", body="x" * 10_001, actor=person(app, "rita")
        )
    assert refused.value.message == messages.BODY_TOO_LONG.format(limit=10_000, count=10_001)
    assert Review.objects.count() == 0


def test_request_changes_needs_a_body_and_a_verdict_must_be_known(app, set_id):
    rita = person(app, "rita")
    with pytest.raises(InvalidInput) as empty:
        services.submit_review(set_id, verdict="request_changes", actor=rita)
    assert empty.value.message == messages.REVIEW_BODY_NEEDED
    with pytest.raises(InvalidInput) as unknown:
        services.submit_review(set_id, verdict="lgtm", actor=rita)
    assert unknown.value.message == messages.UNKNOWN_VERDICT.format(verdict="lgtm")


def test_a_line_comment_is_anchored_and_goes_outdated_when_its_line_changes(app, set_id):
    rita = person(app, "rita")
    comment = services.add_comment(
        set_id, collection=PAGE, name="index", side="after", line=2, body="Why caps?", actor=rita
    )
    assert comment.id.startswith("cm_")
    assert (comment.side, comment.line, comment.line_text) == ("after", 2, "TWO")
    change_set = app.change_sets.get(pk=set_id)
    [thread] = selectors.threads(change_set)
    assert thread.outdated is False
    turn(app, "one\nTWO\nthree\nfour\n", run="later")  # line 2 unchanged
    assert selectors.threads(change_set)[0].outdated is False
    turn(app, "one\nTwo\nthree\n", run="later2")
    assert selectors.threads(change_set)[0].outdated is True


def test_a_line_outside_the_side_is_refused(app, set_id):
    with pytest.raises(InvalidInput) as refused:
        services.add_comment(
            set_id, collection=PAGE, name="index", side="after", line=9, body="?",
            actor=person(app, "rita"),
        )  # fmt: skip
    assert refused.value.message == messages.BAD_LINE.format(count=3, line=9)


def test_an_agent_replies_marked_as_the_agents_and_people_resolve_and_reopen(app, set_id):
    rita = person(app, "rita")
    root = services.add_comment(
        set_id, collection=PAGE, name="index", side="after", line=2, body="Why?", actor=rita
    )
    User.objects.create_user("bot", password=None)
    services.add_member(app, role="owner", username="bot", by="setup")
    _, row = create_agent_token("bot", [app.slug])
    agent = services.actor_for_token(row)
    answer = services.reply(root.id, body="The brief said so.", actor=agent)
    assert answer.thread_id == root.id and answer.by_agent
    assert answer.author_name.startswith("token:") and answer.author_name.endswith(" of bot")
    with pytest.raises(Forbidden):
        services.resolve_thread(root.id, actor=agent)
    services.resolve_thread(answer.id, actor=rita)
    assert Comment.objects.get(pk=root.id).resolved
    services.resolve_thread(root.id, resolved=False, actor=rita)
    assert not Comment.objects.get(pk=root.id).resolved
    actions = list(
        AuditEvent.objects.filter(app=app, action__regex=r"^(comment|thread)_")
        .order_by("seq")
        .values_list("action", flat=True)
    )
    assert actions == [
        "comment_added",
        "comment_replied",
        "thread_resolved",
        "thread_reopened",
    ]
    payload = selectors.reviews_payload(app.change_sets.get(pk=set_id))
    assert payload["threads"][0]["anchor"] == {
        "collection": PAGE, "name": "index", "side": "after",
        "sha256": root.blob_sha256, "line": 2, "text": "TWO",
    }  # fmt: skip
    assert [c["byAgent"] for c in payload["threads"][0]["comments"]] == [False, True]


def test_a_reply_to_a_comment_of_an_app_out_of_reach_is_not_found(app, set_id):
    root = services.add_comment(
        set_id, collection=PAGE, name="index", side="before", line=1, body="ok",
        actor=person(app, "rita"),
    )  # fmt: skip
    other = App.objects.create(slug="other", name="Other")
    with pytest.raises(NotFound):
        services.reply(root.id, body="hi", actor=person(other, "sam", "owner"))


def test_only_owners_set_protection_and_it_is_audited(app):
    with pytest.raises(Forbidden):
        services.change_app(
            app,
            actor=person(app, "pia", "promoter"),
            protection={
                "required_approvals": 1,
                "block_on_changes_requested": True,
                "dismiss_stale": True,
            },
        )
    olga = person(app, "olga", "owner")
    with pytest.raises(InvalidInput) as refused:
        services.change_app(
            app,
            actor=olga,
            protection={
                "required_approvals": 6,
                "block_on_changes_requested": True,
                "dismiss_stale": True,
            },
        )
    assert refused.value.message == messages.PROTECTION_BAD_APPROVALS
    services.change_app(
        app,
        actor=olga,
        protection={
            "required_approvals": 2,
            "block_on_changes_requested": False,
            "dismiss_stale": True,
        },
    )
    assert selectors.protection_of(app).required_approvals == 2
    event = AuditEvent.objects.get(action="protection_changed")
    assert event.details["after"]["required_approvals"] == 2


@pytest.mark.parametrize(
    "body",
    [
        "<script>alert(1)</script>",
        '<iframe src="https://example.com"></iframe>',
        "[click](javascript:alert(1))",
        '<a href="javascript:alert(1)">x</a>',
        '<img src="x" onerror="alert(1)">',
        "[x](JaVaScRiPt:alert(1))",
    ],
)
def test_markdown_with_scripts_iframes_javascript_links_and_handlers_renders_inert(body):
    elements = _elements(render_markdown(body))
    assert {tag for tag, _ in elements} <= {"p", "a"}
    for _, attrs in elements:
        assert not [name for name in attrs if name.startswith("on")]
        assert not (attrs.get("href") or "").lower().startswith("javascript")


def _elements(html: str) -> list[tuple[str, dict[str, str | None]]]:
    """Every element the browser would build from ``html``, with its attributes."""
    found: list[tuple[str, dict[str, str | None]]] = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.append((tag, dict(attrs)))

    Parser().feed(html)
    return found


def test_markdown_keeps_its_formatting_and_safe_links():
    html = render_markdown("**Bold** and [docs](https://example.com)\n\n- one")
    assert "<strong>Bold</strong>" in html
    assert '<a href="https://example.com" rel="nofollow noopener noreferrer">docs</a>' in html
    assert "<li>one</li>" in html


def test_the_set_page_shows_the_review_box_and_sanitised_reviews_and_submits(app, set_id, client):
    rita = person(app, "rita")
    services.submit_review(
        set_id,
        verdict="request_changes",
        body='Fix it <script>alert(1)</script> [x](javascript:alert(1)) <img src=x onerror="y()">',
        actor=rita,
    )
    client.force_login(rita.user)
    url = f"/apps/{app.slug}/versions/change-sets/{set_id}/"
    page = client.get(url).content.decode()
    assert "Submit review" in page and "Request changes" in page
    assert "Changes requested" in page
    assert "<script>alert(1)" not in page and "&lt;script&gt;" in page
    assert 'href="javascript' not in page and "<img" not in page
    answer = client.post(url + "reviews/", {"verdict": "approve", "body": "**Good** now"})
    assert answer.status_code == 302
    page = client.get(url).content.decode()
    assert "<strong>Good</strong>" in page and "Review required" not in page
    too_long = client.post(url + "reviews/", {"verdict": "comment", "body": "x" * 10_001})
    assert too_long.status_code == 422
    assert messages.BODY_TOO_LONG.format(limit=10_000, count=10_001) in too_long.content.decode()


def test_a_set_row_carries_its_review_status(app, set_id, client):
    viewer = person(app, "vic", "viewer")
    client.force_login(viewer.user)
    page = client.get(f"/apps/{app.slug}/versions/").content.decode()
    assert "Review required" in page
    services.submit_review(set_id, verdict="approve", actor=person(app, "rita"))
    page = client.get(f"/apps/{app.slug}/versions/").content.decode()
    assert ">Approved<" in page
    assert (
        "Submit review"
        not in client.get(f"/apps/{app.slug}/versions/change-sets/{set_id}/").content.decode()
    )


def _badge(html: str, set_id: str) -> str:
    """The review badge of the set's head (``#review-badge-<id>``) as drawn in ``html``,
    without its out-of-band mark."""
    start = html.index(f'<span id="review-badge-{set_id}"')
    end = html.index("</span></span>", start) + len("</span></span>")
    return html[start:end].replace(' hx-swap-oob="true"', "")


def test_a_verdict_submitted_in_the_review_box_updates_the_sets_head_on_the_page(
    app, set_id, client
):
    """The Review box swaps the reviews section in place (htmx); the status badge in the set's
    head above it comes along out of band, drawn as a reload of the page draws it."""
    rita = person(app, "rita")
    client.force_login(rita.user)
    url = f"/apps/{app.slug}/versions/change-sets/{set_id}/"
    assert ">Review required<" in _badge(client.get(url).content.decode(), set_id)
    answer = client.post(
        url + "reviews/", {"verdict": "approve", "body": "Good"}, HTTP_HX_REQUEST="true"
    )
    html = answer.content.decode()
    assert answer.status_code == 200 and 'id="set-reviews"' in html
    assert f'<span id="review-badge-{set_id}" hx-swap-oob="true">' in html
    assert ">Approved<" in _badge(html, set_id)
    assert _badge(html, set_id) == _badge(client.get(url).content.decode(), set_id)
    # A refused verdict changes nothing above the box.
    refused = client.post(url + "reviews/", {"verdict": "maybe"}, HTTP_HX_REQUEST="true")
    assert refused.status_code == 422
    assert f'id="review-badge-{set_id}"' not in refused.content.decode()
