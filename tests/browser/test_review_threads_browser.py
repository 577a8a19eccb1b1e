"""Line comments and the review's trace, as people click (docs/architecture.md#reviews): a
reviewer clicks a line number of the agent's turn, comments, replies and resolves in place; the
agent's reply, posted over the API, appears in the thread; an owner sees what protection still
needs, is refused, and promotes anyway with a reason; Markdown stays inert; the new and changed
pages have no serious accessibility problem at 1280 and 390 px, and on a phone the filters fold
away. Screenshots of each page go to $VERSIONS_REVIEW_SHOTS when it is set."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

SHOTS = os.environ.get("VERSIONS_REVIEW_SHOTS")
# The line of the demo's page that the agent's turn made (its "after" side).
LINE_TEXT = "Every quote is approved automatically after 24 hours."
LINE = 13
PROTECTED = {"required_approvals": 1, "block_on_changes_requested": True, "dismiss_stale": True}


def _shot(page, name: str, part: str | None = None) -> None:
    """The page (or the element ``part`` selects) as a PNG in $VERSIONS_REVIEW_SHOTS."""
    if SHOTS:
        width = page.viewport_size["width"] if page.viewport_size else 0
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        path = str(Path(SHOTS) / f"{name}-{width}.png")
        if part:
            page.locator(part).first.screenshot(path=path)
        else:
            page.screenshot(path=path, full_page=True)


def _line_number(page, text: str):
    """The "after" line number link of the diff row that reads ``text``."""
    row = page.locator("#set-list-items tr", has_text=text).first
    return row.locator("td.ln").nth(1).locator("a.ln-link")


def _agent_reply(live_server, comment_id: str, body: str) -> dict:
    """An agent answers the thread over the API, as any agent would (plain HTTP)."""
    from versions import services
    from versions.management.commands.load_demo import DEMO_SLUG, DEMO_USER

    token, _ = services.create_agent_token(DEMO_USER, [DEMO_SLUG])
    request = urllib.request.Request(
        f"{live_server.url}/api/v1/comments/{comment_id}/replies",
        data=json.dumps({"body": body}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - the live server
        assert answer.status == 201
        return json.loads(answer.read())


def test_a_line_comment_with_a_reply_resolve_and_the_agents_answer(page, live_server, demo):
    from versions.models import Comment

    slug, turn = demo.slug, demo.turn
    demo.as_reviewer(page)
    page.goto(f"{live_server.url}/apps/{slug}/versions/change-sets/{turn}/")
    expect(page.locator("#line-comment-hint")).to_contain_text("click its number")

    # Click the number of the line the agent added: the form opens under it.
    number = _line_number(page, LINE_TEXT)
    number.click()
    form = page.locator("tr.comment-form-row form.line-comment")
    expect(form).to_contain_text(LINE_TEXT)
    expect(form.get_by_label("Comment (Markdown)")).to_be_focused()
    form.get_by_label("Comment (Markdown)").fill("We **never** auto-approve quotes.")
    form.get_by_role("button", name="Add comment").click()

    thread = page.locator("tr.thread-row .thread.inline").first
    expect(thread.locator(".md strong")).to_have_text("never")
    expect(page.locator("tr.comment-form-row")).to_have_count(0)
    root = Comment.objects.get(thread__isnull=True, body__startswith="We **never**")
    assert root.side == "after" and LINE_TEXT in root.line_text and root.line == LINE
    # The thread sits right under the line it is anchored to.
    under = page.locator("#set-list-items tr", has_text=LINE_TEXT).first
    expect(under.locator("xpath=following-sibling::tr[1]")).to_have_class("thread-row")

    # Reply, then resolve, in place.
    thread = page.locator(f"#line-thread-{root.id}")
    thread.get_by_label("Reply").fill("Also: the button needs a confirmation.")
    thread.get_by_role("button", name="Reply").click()
    expect(page.locator(f"#line-thread-{root.id} .comment.reply")).to_contain_text(
        "needs a confirmation"
    )
    page.locator(f"#line-thread-{root.id}").get_by_role("button", name="Resolve").click()
    resolved = page.locator(f"#line-thread-{root.id}")
    expect(resolved).to_have_class("thread is-resolved inline")
    expect(resolved.locator("summary")).to_contain_text("Resolved by reviewer")
    assert Comment.objects.get(pk=root.id).resolved

    # Reopen it: the agent is about to answer.
    resolved.locator("summary").click()
    resolved.get_by_role("button", name="Reopen").click()
    expect(
        page.locator(f"#line-thread-{root.id}").get_by_role("button", name="Resolve")
    ).to_be_visible()

    # The agent answers over the API; the person sees it in the thread, marked as the agent's.
    answer = _agent_reply(live_server, root.id, "Removed the sentence; see the next write.")
    assert answer["byAgent"] is True
    page.reload()
    agent = page.locator(f"#line-thread-{root.id} .comment.reply", has_text="Removed the sentence")
    expect(agent).to_be_visible()
    expect(agent.locator(".badge")).to_have_text("agent")
    expect(page.locator(f"#thread-{root.id}")).to_contain_text("Removed the sentence")


def test_a_line_comment_works_without_javascript(browser, live_server, demo, problems):
    from versions.models import Comment

    context = browser.new_context(
        java_script_enabled=False, viewport={"width": 1280, "height": 900}
    )
    page = context.new_page()
    try:
        demo.as_reviewer(page)
        page.goto(f"{live_server.url}/apps/{demo.slug}/versions/change-sets/{demo.turn}/")
        _line_number(page, LINE_TEXT).click()
        expect(page.get_by_role("heading", name="Comment on a line")).to_be_visible()
        page.get_by_label("Comment (Markdown)").fill("Plain HTML works too.")
        page.get_by_role("button", name="Add comment").click()
        root = Comment.objects.get(body="Plain HTML works too.")
        assert page.url.endswith(f"#thread-{root.id}")
        expect(page.locator(f"#line-thread-{root.id}")).to_contain_text("Plain HTML works too.")
    finally:
        context.close()


def test_an_owner_sees_what_protection_needs_is_refused_and_promotes_anyway(
    page, live_server, demo
):
    from versions import services
    from versions.models import App, Deployment

    slug, turn = demo.slug, demo.turn
    services.change_app(slug, protection=PROTECTED)
    demo.as_owner(page)
    page.goto(f"{live_server.url}/apps/{slug}/versions/production/")
    expect(
        page.get_by_role("heading", name="The draft is 1 change set ahead of production")
    ).to_be_visible()
    row = page.locator(f"#ahead-{turn}")
    expect(row).to_contain_text("Approve all button")  # the turn's message
    expect(row).to_contain_text("rvaid")
    expect(row.locator(".badge")).to_have_text("Review required")
    expect(page.locator("#protection-needs")).to_contain_text(f"{turn} needs 1 more approval")

    page.get_by_role("button", name="Promote to production").click()
    dialog = page.locator("#dialog-slot")
    expect(dialog.get_by_role("button", name="Confirm promotion")).to_have_count(0)
    dialog.get_by_label("Reason to promote anyway").fill("Hotfix agreed on a call")
    dialog.get_by_role("button", name="Promote anyway").click()
    expect(dialog).to_be_empty()
    app = App.objects.get(slug=slug)
    assert "Hotfix agreed on a call" in Deployment.objects.get(pk=app.production_id).note
    expect(
        page.get_by_role("heading", name="The draft is 0 change sets ahead of production")
    ).to_be_visible()


def test_markdown_with_iframes_javascript_links_and_handlers_renders_inert(page, live_server, demo):
    from django.contrib.auth.models import User

    from versions import services

    reviewer = services.actor_for_user(User.objects.get(username="reviewer"))
    body = (
        '[click me](javascript:window.hacked=1) <a href="javascript:window.hacked=2">me too</a>\n\n'
        '<iframe src="javascript:window.top.hacked=3"></iframe>\n\n'
        '<div onclick="window.hacked=4" onmouseover="window.hacked=5">hover</div>\n\n'
        '<svg onload="window.hacked=6"></svg> <script>window.hacked=7</script>'
    )
    services.submit_review(demo.turn, verdict="comment", body=body, actor=reviewer)
    demo.as_reviewer(page)
    page.goto(f"{live_server.url}/apps/{demo.slug}/versions/change-sets/{demo.turn}/")
    md = page.locator("#set-reviews article .md").last
    expect(md).to_contain_text("click me")
    expect(md.locator("iframe, script, svg, [onclick], [onmouseover], [onload]")).to_have_count(0)
    expect(md.locator("a[href^='javascript']")).to_have_count(0)
    for link in md.locator("a").all():
        link.click()
    md.hover()
    assert page.evaluate("window.hacked") is None


def test_new_pages_have_no_serious_accessibility_problems(sized_page, live_server, demo, axe):
    from django.contrib.auth.models import User

    from versions import services

    page, slug, turn = sized_page, demo.slug, demo.turn
    reviewer = services.actor_for_user(User.objects.get(username="reviewer"))
    root = services.add_comment(
        turn, collection="pltf_page", name="index", side="after", line=LINE,
        body="Where does **24 hours** come from?", actor=reviewer,
    )  # fmt: skip
    services.reply(root.id, body="From the old *spec*.", actor=reviewer)
    services.change_app(slug, protection=PROTECTED)
    demo.as_reviewer(page)

    expect(page.get_by_role("heading", name="Awaiting your review")).to_be_visible()
    axe(page, "the apps list with sets awaiting a review")
    _shot(page, "apps")

    page.goto(f"{live_server.url}/apps/{slug}/versions/change-sets/{turn}/")
    expect(page.locator(f"#line-thread-{root.id}")).to_be_visible()
    _line_number(page, "Approve all</button>").click()
    expect(page.locator("tr.comment-form-row textarea")).to_be_visible()
    axe(page, "a set's page with an inline thread and an open line comment form")
    _shot(page, "set-page")
    _shot(page, "set-diff", "section.diff")
    _shot(page, "set-reviews", "#set-reviews")

    page.goto(
        f"{live_server.url}/apps/{slug}/versions/line-comment/?artifact=pltf_page/index"
        f"&set={turn}&view=set&side=after&line={LINE}&right={root.blob_sha256}"
    )
    axe(page, "the line comment page (without JavaScript)")
    _shot(page, "line-comment")

    page.goto(f"{live_server.url}/apps/{slug}/versions/production/")
    expect(page.locator("#protection-needs")).to_be_visible()
    expect(page.locator(f"#ahead-{turn}")).to_be_visible()
    axe(page, "the Production tab with the draft ahead and what protection needs")
    _shot(page, "production")

    page.goto(f"{live_server.url}/apps/{slug}/versions/compare/production...{turn}/")
    expect(page.locator("#c-left")).to_be_visible()
    expect(page.locator(f"#line-thread-{root.id}")).to_be_visible()
    axe(page, "a compare with its picker and an inline thread")
    _shot(page, "compare")

    services.restore_change_set(turn, by="demo")
    page.goto(f"{live_server.url}/apps/{slug}/versions/")
    expect(page.locator("#awaiting-title")).to_be_visible()
    expect(page.locator(".restore-words").first).to_contain_text(f"Restore all of {turn} by demo")
    fold = page.locator("details[data-fold]")
    if page.viewport_size["width"] < 700:
        expect(fold).not_to_have_attribute("open", "")
        expect(page.get_by_label("Who asked")).to_be_hidden()
        expect(page.locator("#f-q")).to_be_visible()
        _shot(page, "change-sets")
        fold.locator("summary").click()
        expect(page.get_by_label("Who asked")).to_be_visible()
    else:
        expect(page.get_by_label("Who asked")).to_be_visible()
        expect(fold.locator("summary")).to_be_hidden()
    axe(page, "the change sets with awaiting, a restore set under its set and the filters")
    _shot(page, "change-sets-filters")
