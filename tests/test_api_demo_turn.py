"""The demo agent turn: a running server, the HTTP API, and a new change set in the panel."""

from __future__ import annotations

from io import StringIO

import pytest
from api_helpers import make_token, make_user
from django.core.management import CommandError, call_command

from versions.management.commands.demo_agent_turn import with_notice, with_notice_rule
from versions.management.commands.load_demo import DEMO_SLUG, load_demo
from versions.models import Artifact, ChangeSet


def run_turn(*args: str) -> str:
    out = StringIO()
    call_command("demo_agent_turn", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_demo_agent_turn_makes_one_change_set_of_page_and_stylesheet(live_server):
    load_demo()
    make_user("rvaid")
    token = make_token("rvaid", DEMO_SLUG)
    before = set(ChangeSet.objects.values_list("id", flat=True))

    output = run_turn("--url", live_server.url, "--token", token)

    (new_set,) = ChangeSet.objects.exclude(id__in=before)
    assert f"Change set {new_set.id}" in output
    assert f"{live_server.url}/apps/{DEMO_SLUG}/versions/" in output
    points = list(new_set.points.order_by("created_on").select_related("artifact"))
    assert [(p.artifact.name, p.tool, p.requested_by) for p in points] == [
        ("index", "demo-agent:write_page", "rvaid"),
        ("App", "demo-agent:write_stylesheet", "rvaid"),
    ]
    page = Artifact.objects.get(app__slug=DEMO_SLUG, name="index")
    assert 'class="agent-notice"' in page.source

    # A second turn is a second set, and still changes both artifacts.
    run_turn("--url", live_server.url, "--token", token)
    newest = ChangeSet.objects.filter(app__slug=DEMO_SLUG).order_by("-created_on").first()
    assert newest.id != new_set.id
    assert newest.points.count() == 2
    assert Artifact.objects.get(app__slug=DEMO_SLUG, name="index").source.count("agent-notice") == 1


@pytest.mark.django_db(transaction=True)
def test_demo_agent_turn_reports_a_refusal_in_words(live_server):
    load_demo()
    make_user("rvaid")
    with pytest.raises(CommandError, match="401"):
        run_turn("--url", live_server.url, "--token", "vt_wrong")


def test_notice_is_escaped_and_replaced_not_stacked():
    page = "<body>\n<main id='q'>\n</main></body>"
    once = with_notice(page, "<script>x</script>")
    assert "&lt;script&gt;" in once and "<script>" not in once
    assert with_notice(once, "second").count("agent-notice") == 1
    sheet = "body {}\n"
    first = with_notice_rule(sheet)
    second = with_notice_rule(first)
    assert first != second
    assert second.count("/* agent-notice */") == 1
