"""The panel's Content-Security-Policy: every panel page (the admin, the sign-in page and the
API docs too) allows scripts, styles and frames from this site only, never inline, and may be
framed by this site only; the live app keeps its own sandbox policy. The templates hold no
inline script or event handler for the policy to refuse (the browser tests fail on any
refusal)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from versions.models import PAGE
from versions.services import (
    write_artifact,
)

ROOT = Path(__file__).resolve().parent.parent
LIVE_CSP = "sandbox allow-scripts allow-forms"


def directives(response) -> dict[str, list[str]]:
    header = response.get("Content-Security-Policy", "")
    found = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            found[words[0]] = words[1:]
    return found


@pytest.fixture
def signed_in(client, django_user_model, app):
    root = django_user_model.objects.create_superuser("root", password="x" * 20)
    client.force_login(root)
    write_artifact(app, PAGE, "index", "<p>hi</p>\n", requested_by="a", tool="t")
    return client


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/apps/quotes/versions/",
        "/apps/quotes/versions/points/",
        "/workspaces/",
        "/admin/",
        "/admin/versions/app/",
        "/api/v1/docs",
        "/no-such-page/",
    ],
)
def test_every_panel_page_allows_no_inline_script_and_only_this_site_to_frame_it(signed_in, path):
    response = signed_in.get(path)
    policy = directives(response)
    assert policy.get("script-src") == ["'self'"], response.get("Content-Security-Policy")
    assert policy.get("frame-ancestors") == ["'self'"]
    assert policy.get("style-src") == ["'self'"]
    assert policy.get("object-src") == ["'none'"]


def test_the_sign_in_page_has_the_policy_too(client):
    assert directives(client.get("/accounts/login/")).get("script-src") == ["'self'"]


def test_the_live_app_keeps_its_sandbox_policy(signed_in):
    for path in ("/apps/quotes/", "/apps/quotes/no-such-page"):
        assert signed_in.get(path)["Content-Security-Policy"] == LIVE_CSP


INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>")
INLINE_HANDLER = re.compile(r"<[^>]+\son[a-z]+\s*=", re.IGNORECASE)
STYLE_ATTRIBUTE = re.compile(r"<[^>]+\sstyle\s*=", re.IGNORECASE)


@pytest.mark.parametrize(
    "template",
    sorted(
        p for folder in ("templates", "versions/templates") for p in (ROOT / folder).rglob("*.html")
    ),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_no_template_holds_inline_script_handlers_or_styles(template):
    text = template.read_text(encoding="utf-8")
    assert not INLINE_SCRIPT.search(text)
    assert not INLINE_HANDLER.search(text)
    assert not STYLE_ATTRIBUTE.search(text)
