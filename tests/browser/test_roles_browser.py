"""The demo's reviewer (docs/architecture.md#access), as a person signs in and clicks: one app
listed, no restore buttons, a forged restore refused, the other app a 404 in words; the owner's
Members tab."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser


def test_the_demo_reviewer_sees_one_app_and_cannot_restore(page, live_server, demo):
    demo.as_reviewer(page)
    assert page.get_by_role("link", name="Quote approvals (demo)").count() == 1
    assert page.get_by_text("Staff directory").count() == 0
    page.get_by_role("link", name="Quote approvals (demo)").click()
    row = page.locator(f"#set-{demo.turn}")
    row.get_by_role("link", name=demo.turn, exact=True).click()
    page.get_by_role("button", name="Save name").wait_for()
    assert page.get_by_role("button", name="Restore all").count() == 0
    assert page.get_by_role("link", name="Members").count() == 0

    # A forged POST with the page's own CSRF token: refused in words, nothing restored.
    token = page.locator("input[name=csrfmiddlewaretoken]").first.input_value()
    forged = page.request.post(
        f"{live_server.url}/apps/{demo.slug}/versions/change-sets/{demo.turn}/restore/",
        form={"csrfmiddlewaretoken": token},
        headers={"Referer": page.url},
    )
    assert forged.status == 403 and "restorer" in forged.text()

    other = page.goto(f"{live_server.url}/apps/{demo.second}/versions/")
    assert other is not None and other.status == 404
    assert page.get_by_text(f"There is no app “{demo.second}”").is_visible()


def test_the_demo_owner_gives_the_reviewer_a_role_on_the_second_app(page, live_server, demo):
    from versions.models import AppMembership

    demo.as_owner(page)
    page.goto(f"{live_server.url}/apps/{demo.second}/versions/")
    page.get_by_role("link", name="Members").click()
    page.get_by_label("Username or group name").fill("reviewer")
    page.get_by_label("Role", exact=True).select_option("viewer")
    page.get_by_role("button", name="Add member").click()
    page.get_by_text("User “reviewer” is now a viewer of this app.").wait_for()
    assert AppMembership.objects.filter(
        app__slug=demo.second, user__username="reviewer", role="viewer"
    ).exists()
    # Removing goes through a dialog, like the panel's other actions.
    page.get_by_role("button", name="Remove reviewer", exact=True).click()
    dialog = page.locator("dialog#member-dialog")
    dialog.get_by_role("button", name="Remove member").click()
    page.get_by_text("User “reviewer” was removed from this app.").wait_for()
    assert not AppMembership.objects.filter(
        app__slug=demo.second, user__username="reviewer"
    ).exists()
