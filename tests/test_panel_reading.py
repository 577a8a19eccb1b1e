"""The panel's reviewing pieces through Django's test client (docs/architecture.md#reviewing): 404s
in words even with DEBUG on, local times, search and filters, compare."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from versions import services
from versions.models import App

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_in(app: App) -> Client:
    user = User.objects.create_superuser("rvaid", "rvaid@example.com", "pw-123456")
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("debug", [True, False])
@pytest.mark.parametrize(
    "path, words",
    [
        ("/apps/quotes/versions/change-sets/cs_nope/", "There is no change set “cs_nope”"),
        ("/apps/quotes/versions/points/rp_nope/", "There is no restore point “rp_nope”"),
        ("/apps/nope/versions/", "There is no app “nope”"),
        ("/apps/quotes/versions/restore-sets/cs_nope/", "There is no restore set “cs_nope”"),
    ],
)
def test_panel_404s_are_in_words_even_with_debug_on(client_in, settings, debug, path, words):
    settings.DEBUG = debug
    response = client_in.get(path)
    assert response.status_code == 404
    html = response.content.decode()
    assert words in html
    assert "Back to the apps" in html
    assert "URLconf" not in html and "technical" not in html.lower()


def test_a_404_inside_an_app_leads_back_to_that_app_and_never_to_one_unseen(client_in):
    missing = client_in.get("/apps/quotes/versions/change-sets/cs_nope/").content.decode()
    assert '<a href="/apps/quotes/versions/">Back to' in missing
    unknown = client_in.get("/apps/nope/versions/").content.decode()
    assert 'href="/apps/nope/versions/"' not in unknown and "Back to the apps" in unknown
    # A reviewer of one app only: an address inside another app says nothing about it.
    App.objects.create(slug="hidden", name="Hidden")
    User.objects.create_user("rev", password=None)
    services.add_member("quotes", role="reviewer", username="rev", by="setup")
    client_in.force_login(User.objects.get(username="rev"))
    hidden = client_in.get("/apps/hidden/versions/change-sets/cs_nope/")
    html = hidden.content.decode()
    assert hidden.status_code == 404 and "Back to the apps" in html
    assert 'href="/apps/hidden/versions/"' not in html and "Hidden" not in html


def test_an_htmx_404_says_what_was_not_found_in_its_header(client_in, settings):
    settings.DEBUG = True
    response = client_in.get("/apps/quotes/versions/change-sets/cs_nope/", HTTP_HX_REQUEST="true")
    assert response.status_code == 404
    assert "cs_nope" in response["X-Versions-Error"]


def test_times_carry_utc_for_the_viewers_local_time(client_in, app):
    services.write_artifact(
        app, "pltf_page", "index", "<h1>Hi</h1>\n", requested_by="a", tool="t", run_id="r"
    )
    html = client_in.get("/apps/quotes/versions/").content.decode()
    assert 'data-utc="' in html and 'class="abs" data-local' in html


# --------------------------------------------------------------------------------------------
# Find: the search box and the Change sets filters
# --------------------------------------------------------------------------------------------


def _turn(app: App, run: str, who: str, writes: list[tuple[str, str, str]]) -> str:
    """One agent turn: ``writes`` of (collection, name, tool); returns its set id."""
    for collection, name, tool in writes:
        services.write_artifact(
            app, collection, name, f"/* {run} {name} */\n", requested_by=who, tool=tool, run_id=run
        )
    from versions.models import ChangeSet

    return ChangeSet.objects.get(app=app, run_id=run).id


@pytest.fixture
def turns(app: App) -> dict[str, str]:
    ids = {
        "pricing": _turn(app, "t1", "ana", [("pltf_page", "pricing", "agent:write_page")]),
        "styles": _turn(
            app,
            "t2",
            "bob",
            [
                ("pltf_stylesheet", "App", "agent:write_stylesheet"),
                ("pltf_stylesheet", "Theme", "agent:write_stylesheet"),
                ("pltf_frontend_module", "quotes", "agent:write_module"),
                ("pltf_page", "index", "agent:write_page"),
                ("pltf_page", "about", "agent:write_page"),
            ],
        ),
        "checkout": _turn(app, "t3", "ana", [("pltf_page", "checkout", "other:edit")]),
    }
    services.name_change_set(ids["checkout"], "Checkout copy, approved", by="ana")
    restored = services.restore_change_set(ids["pricing"], by="ana")
    ids["restore"] = restored.set_id
    return ids


def _found(app: App, **query: str) -> list[str]:
    from versions import selectors

    page = selectors.search_change_sets(app, selectors.SetQuery.from_query(query))
    return [cs.id for cs in page.object_list]


def test_one_search_box_finds_ids_names_artifacts_who_and_tools(app, turns):
    assert _found(app, q=turns["styles"][-6:]) == [turns["styles"]]  # part of an id
    assert _found(app, q="checkout COPY") == [turns["checkout"]]  # a name, any case
    assert _found(app, q="theme") == [turns["styles"]]  # an artifact's name
    assert _found(app, q="bob") == [turns["styles"]]  # who asked
    assert _found(app, q="other:") == [turns["checkout"]]  # a tool
    assert _found(app, q="nothing-like-this") == []


def test_filters_kind_who_tool_artifact_named_and_release(app, turns):
    everything = _found(app)
    assert turns["restore"] in everything
    assert turns["restore"] not in _found(app, kind="change")  # restore sets hidden
    assert _found(app, kind="restore") == [turns["restore"]]
    assert set(_found(app, who="ana", kind="change")) == {turns["pricing"], turns["checkout"]}
    assert _found(app, tool="agent:write_module") == [turns["styles"]]
    assert _found(app, artifact="pric", kind="change") == [turns["pricing"]]
    assert _found(app, named="1") == [turns["checkout"]]
    assert _found(app, release="1") == []
    services.mark_release(turns["styles"], by="ana")
    app.refresh_from_db()
    assert _found(app, release="1") == [turns["styles"]]


def test_a_collapsed_row_names_its_first_artifacts_then_how_many_more(client_in, app, turns):
    html = client_in.get("/apps/quotes/versions/").content.decode()
    assert '<span class="art">App</span>, <span class="art">Theme</span>, ' in html
    assert '<span class="more-arts">+2 more</span>' in html
    found = client_in.get("/apps/quotes/versions/?q=theme").content.decode()
    assert turns["styles"] in found and turns["checkout"] not in found
    assert 'id="search-summary"' in found


def test_search_reads_no_source(app, turns):
    """Search conditions are set columns and EXISTS over points: no blob is read."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        _found(app, q="theme", kind="change", tool="agent:write_stylesheet", artifact="App")
    sql = " ".join(q["sql"] for q in ctx.captured_queries)
    assert "versions_blob" not in sql
    assert len(ctx.captured_queries) <= 4


# --------------------------------------------------------------------------------------------
# Compare any two states
# --------------------------------------------------------------------------------------------


def _write(app: App, name: str, source: str, run: str) -> None:
    services.write_artifact(
        app, "pltf_page", name, source, requested_by="ana", tool="t", run_id=run
    )


@pytest.fixture
def history(app: App) -> dict[str, str]:
    """Three turns: v1 of a and b; a → v2 and c created; b deleted."""
    from versions.models import ChangeSet, RestorePoint

    _write(app, "a", "a1\n", "r1")
    _write(app, "b", "b1\n", "r1")
    _write(app, "a", "a2\n", "r2")
    _write(app, "c", "c1\n", "r2")
    services.delete_artifact(app, "pltf_page", "b", requested_by="ana", tool="t", run_id="r3")
    sets = {cs.run_id: cs.id for cs in ChangeSet.objects.filter(app=app)}
    a2 = RestorePoint.objects.get(change_set_id=sets["r2"], artifact__name="a")
    return {**sets, "a2_point": a2.id}


def _files(app: App, left: str, right: str) -> dict[str, str]:
    from versions.selectors import compare as comparing

    return {f.artifact.name: f.change for f in comparing.compare(app, left, right).files}


def test_the_state_each_ref_names(app, history):
    assert _files(app, history["r1"], "draft") == {"a": "changed", "b": "removed", "c": "added"}
    assert _files(app, history["r1"], history["r2"]) == {"a": "changed", "c": "added"}
    assert _files(app, history["r2"], history["r3"]) == {"b": "removed"}
    # Just before the point that wrote a2: a was a1 and c did not exist yet.
    assert _files(app, history["a2_point"], history["r1"]) == {}
    assert _files(app, history["a2_point"], history["r2"]) == {"a": "changed", "c": "added"}
    assert _files(app, "draft", "draft") == {}


@pytest.mark.parametrize(
    "refs, words",
    [
        ("production...draft", "“production” names production, and app “quotes” has no production"),
        ("dp_abc...draft", "There is no state “dp_abc” in app “quotes”"),
        ("draft...cs_nope", "There is no state “cs_nope” in app “quotes”"),
        ("draft", "two refs joined by three dots"),
    ],
)
def test_unknown_refs_are_a_404_in_words(client_in, settings, refs, words):
    settings.DEBUG = True
    response = client_in.get(f"/apps/quotes/versions/compare/{refs}/")
    assert response.status_code == 404
    assert words in response.content.decode()


def test_compare_page_lists_files_with_jump_links_and_diffs(client_in, history):
    html = client_in.get(f"/apps/quotes/versions/compare/{history['r1']}...draft/").content
    text = html.decode()
    assert "3 files differ" in text
    for name in ("a", "b", "c"):
        assert f'<span class="aname">{name}</span>' in text
    assert text.count('href="#file-') == 3 and text.count("data-file aria-label=") == 3
    assert "a2" in text and "a1" in text


def test_split_or_unified_is_remembered(client_in, history):
    url = f"/apps/quotes/versions/compare/{history['r1']}...draft/"
    assert 'class="diff-table split"' not in client_in.get(url).content.decode()
    assert 'class="diff-table split"' in client_in.get(url + "?layout=split").content.decode()
    assert 'class="diff-table split"' in client_in.get(url).content.decode()  # remembered
    client_in.get(url + "?layout=unified")
    assert 'class="diff-table split"' not in client_in.get(url).content.decode()


def test_viewed_marks_are_remembered_until_the_file_changes(client_in, app, history):
    from versions.models import Artifact

    a = Artifact.objects.get(app=app, name="a")
    url = f"/apps/quotes/versions/compare/{history['r1']}...draft/"
    assert client_in.post(url + "viewed/", {"artifact": a.pk, "viewed": "1"}).status_code == 204
    text = client_in.get(url).content.decode()
    assert f'data-viewed="{a.pk}" checked' in text and "1</span> of 3 viewed" in text
    _write(app, "a", "a3\n", "r4")  # a changed again: unread
    assert f'data-viewed="{a.pk}" checked' not in client_in.get(url).content.decode()
    _write(app, "a", "a2\n", "r5")  # back to what was viewed
    assert f'data-viewed="{a.pk}" checked' in client_in.get(url).content.decode()
    client_in.post(url + "viewed/", {"artifact": a.pk})
    assert f'data-viewed="{a.pk}" checked' not in client_in.get(url).content.decode()


def test_every_set_and_point_links_to_compare(client_in, history):
    set_html = client_in.get(f"/apps/quotes/versions/change-sets/{history['r2']}/").content
    assert f"/compare/{history['r2']}...draft/".encode() in set_html
    point_html = client_in.get(f"/apps/quotes/versions/points/{history['a2_point']}/").content
    assert f"/compare/{history['a2_point']}...draft/".encode() in point_html


def test_split_rows_pair_removed_with_added_lines():
    from versions.diffing import compute_diff
    from versions.templatetags.versions_panel import split_pairs

    result = compute_diff("x\nold one\nold two\ny\n", "x\nnew one\ny\n")
    pairs = split_pairs(result.page(1).hunks[0].lines)
    kinds = [(a.kind if a else None, b.kind if b else None) for a, b in pairs]
    assert kinds == [
        ("context", "context"),
        ("removed", "added"),
        ("removed", None),
        ("context", "context"),
    ]


def test_production_and_deployments_compare_with_the_draft(app, client_in):
    from versions import services
    from versions.models import Deployment

    _write(app, "a", "a1\n", "r1")
    services.promote(app, by="rvaid")
    first = Deployment.objects.get().id
    _write(app, "a", "a2\n", "r2")
    _write(app, "b", "b1\n", "r3")
    assert _files(app, "production", "draft") == {"a": "changed", "b": "added"}
    assert _files(app, first, "draft") == _files(app, "production", "draft")
    page = client_in.get(f"/apps/quotes/versions/compare/production...{first}/")
    assert page.status_code == 200


@pytest.mark.parametrize("arrow", [False, True], ids=["python-lines", "arrow-lines"])
@pytest.mark.parametrize("layout", ["unified", "split"])
def test_a_big_compare_shows_a_page_of_hunks_more_on_demand_and_escapes_every_line(
    client_in, app, layout, arrow, monkeypatch
):
    # With ``arrow`` the sources' lines are coded in Arrow (versions/linecodes.py), as for
    # sources of 128 KB and more: the page, its next page and its expander are the same.
    from versions import linecodes

    monkeypatch.setattr(linecodes, "MIN_BYTES", 0 if arrow else 2**62)
    coded: list[object] = []
    code_lines = linecodes.code_lines

    def spy(old: bytes, new: bytes) -> object:
        result = code_lines(old, new)
        coded.append(result)
        return result

    monkeypatch.setattr(linecodes, "code_lines", spy)
    old = "".join(f"line {i}\n" for i in range(2000))
    new = "".join((f"<b>changed {i}</b>\n" if i % 40 == 0 else f"line {i}\n") for i in range(2000))
    _write(app, "big", old, "r1")
    _write(app, "big", new, "r2")
    from versions.models import Artifact, ChangeSet

    first = ChangeSet.objects.get(app=app, run_id="r1").id
    big = Artifact.objects.get(app=app, name="big")
    url = f"/apps/quotes/versions/compare/{first}...draft/"
    html = client_in.get(f"{url}?layout={layout}").content.decode()
    assert html.count('<tbody class="hunk">') == 20 and "1 of 3 pages of changes shown" in html
    assert "&lt;b&gt;changed 40&lt;/b&gt;" in html and "<b>changed" not in html
    # The expander of the first gap, and the next page, at the file's own address.
    file_url = f"{url}files/{big.pk}/"
    assert f'hx-get="{file_url}?old=' in html and f'hx-get="{file_url}?page=2"' in html
    more = client_in.get(f"{file_url}?page=2", HTTP_HX_REQUEST="true").content.decode()
    assert more.count('<tbody class="hunk">') == 20 and "2 of 3 pages" in more
    assert "changed 800&lt;" in more and "changed 760&lt;" not in more
    lines = client_in.get(f"{file_url}?old=4&new=4&count=3", HTTP_HX_REQUEST="true")
    text = lines.content.decode()
    assert text.count("<tr") == 3 and "line 3" in text and "line 5" in text
    assert any(coded) == arrow
