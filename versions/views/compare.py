"""Compare any two states of an app (docs/architecture.md#reviewing): unified or split, a file list
with jump links, and a "Viewed" mark per file.

The layout (unified / split) and the Viewed marks are the signed-in person's, kept across
sign-ins (``services.set_reading_layout`` / ``services.mark_viewed``, read back through the
selectors).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from versions import diffing, services
from versions.errors import InvalidInput, NotFound
from versions.selectors import blob_sources, reading_state
from versions.selectors import compare as comparing
from versions.views._common import actor_of, app_of, int_param, is_fragment, panel_view, perms
from versions.views.diffs import GAP_CHUNK, HUNKS_PER_PAGE, blob_pair_diff, is_cached, pair_key
from versions.views.reviews import line_notes

UNIFIED = "unified"
SPLIT = "split"
LAYOUTS = (UNIFIED, SPLIT)
# Files whose diff is rendered with the page; the others load when scrolled into view.
INLINE_FILES = 12

ADDED = "Added: it did not exist in the left state."
REMOVED = "Removed: it does not exist in the right state."


def layout_of(request: HttpRequest, remembered: str) -> str:
    """``?layout=`` (then remembered for the person), else the ``remembered`` one."""
    asked = request.GET.get("layout")
    if asked in LAYOUTS:
        if asked != remembered:
            try:
                services.set_reading_layout(actor=actor_of(request), layout=asked)
            except InvalidInput:
                pass  # not a person: shown this once, kept nowhere
        return asked
    return remembered


def viewed_key(file: comparing.FileChange) -> str:
    """A Viewed mark holds for this file's two states: when either changes, it is unread."""
    return comparing.viewed_key(file)


@dataclass
class FileView:
    """One file of a comparison, as the page shows it."""

    file: comparing.FileChange
    status: str  # changed | added | removed | unknown | lazy
    message: str
    viewed: bool
    viewed_key: str
    result: diffing.DiffResult | None = None
    page: diffing.DiffPage | None = None
    url: str = ""  # this file's own address (its section, pages and expanders)
    notes: Any = None  # its line comments (selectors.LineNotes)

    @property
    def artifact(self) -> Any:
        return self.file.artifact

    @property
    def lines_added(self) -> int:
        return self.result.lines_added if self.result else 0

    @property
    def lines_removed(self) -> int:
        return self.result.lines_removed if self.result else 0


def _key(file: comparing.FileChange) -> tuple[str, str]:
    left, right = file.left, file.right
    return pair_key(
        left.blob_id, right.blob_id, then_exists=left.sha256 != "", now_exists=right.sha256 != ""
    )


def _result(
    file: comparing.FileChange, sources: dict[str, bytes] | None = None
) -> diffing.DiffResult:
    left, right = file.left, file.right
    return blob_pair_diff(
        left.blob_id,
        right.blob_id,
        then_exists=left.sha256 != "",
        now_exists=right.sha256 != "",
        sources=sources,
    )


def load_sources(files: list[comparing.FileChange]) -> dict[str, bytes]:
    """The sources of the given files' diffs that are not cached yet, from one blob query."""
    wanted: set[str] = set()
    for f in files:
        if f.available and not is_cached(_key(f)):
            wanted.update(b for b in (f.left.blob_id, f.right.blob_id) if b)
    return blob_sources(wanted)


def file_view(
    file: comparing.FileChange,
    viewed: set[str] | frozenset[str],
    *,
    url: str,
    inline: bool = True,
    page: int = 1,
    sources: dict[str, bytes] | None = None,
) -> FileView:
    key = viewed_key(file)
    seen = key in viewed
    if not file.available:
        return FileView(file, "unknown", file.reason or "", seen, key, url=url)
    if not inline:
        return FileView(file, "lazy", "", seen, key, url=url)
    result = _result(file, sources)
    status = file.change
    message = ADDED if status == comparing.ADDED else REMOVED if status == "removed" else ""
    page_obj = None
    if result.hunk_count:
        number = min(max(1, page), result.num_pages(HUNKS_PER_PAGE))
        page_obj = result.page(number, HUNKS_PER_PAGE)
    return FileView(file, status, message, seen, key, result, page_obj, url)


def _file_url(cmp: comparing.Comparison, file: comparing.FileChange) -> str:
    return reverse("versions:compare_file", args=[cmp.app.slug, cmp.spec, file.artifact.pk])


def _comparison(request: HttpRequest, slug: str, refs: str) -> comparing.Comparison:
    app = app_of(request, slug)
    left, right = comparing.split_refs(refs)
    return comparing.compare(app, left, right)


@require_GET
@panel_view
def compare(request: HttpRequest, slug: str, refs: str) -> HttpResponse:
    """The two states' differences, file by file."""
    cmp = _comparison(request, slug, refs)
    prefs = reading_state(request.user, (viewed_key(f) for f in cmp.files))
    viewed = prefs.viewed
    sources = load_sources(cmp.files[:INLINE_FILES])
    files = [
        file_view(f, viewed, url=_file_url(cmp, f), inline=i < INLINE_FILES, sources=sources)
        for i, f in enumerate(cmp.files)
    ]
    layout = layout_of(request, prefs.layout)
    _notes(request, cmp, files, layout)
    ctx = {
        "app": cmp.app,
        "cmp": cmp,
        "files": files,
        "layout": layout,
        "choices": comparing.compare_choices(cmp.app, cmp.left.ref, cmp.right.ref),
        "viewed_url": reverse("versions:compare_viewed", args=[cmp.app.slug, cmp.spec]),
        "tab": "compare",
        "viewed_count": sum(1 for f in files if f.viewed),
        **perms(request, cmp.app),
    }
    return render(request, "versions/compare.html", ctx)


def _notes(
    request: HttpRequest, cmp: comparing.Comparison, files: list[FileView], layout: str
) -> None:
    """Line comments on the files shown: a clicked line number comments on the set that
    wrote that state (docs/architecture.md#reviews)."""
    line_notes(
        request,
        cmp.app,
        files,
        left=lambda f: f.file.left.sha256 or None,
        right=lambda f: f.file.right.sha256 or None,
        layout=layout,
    )


@require_GET
@panel_view
def compare_pick(request: HttpRequest, slug: str) -> HttpResponse:
    """The refs form: ``?left=…&right=…`` → the comparison's own address."""
    app = app_of(request, slug)
    left = (request.GET.get("left") or "").strip() or comparing.DRAFT
    right = (request.GET.get("right") or "").strip() or comparing.DRAFT
    refs = f"{left}{comparing.SEPARATOR}{right}"
    return redirect(reverse("versions:compare", args=[app.slug, refs]))


def _file(cmp: comparing.Comparison, artifact_id: int) -> comparing.FileChange:
    for f in cmp.files:
        if f.artifact.pk == artifact_id:
            return f
    raise NotFound(f"Artifact {artifact_id} does not differ between {cmp.spec}.")


@require_GET
@panel_view
def compare_file(request: HttpRequest, slug: str, refs: str, artifact_id: int) -> HttpResponse:
    """One file of a comparison: its whole section (lazy files), a further page of hunks
    (``?page=``) or unchanged lines behind an expander (``?old=&new=&count=``)."""
    cmp = _comparison(request, slug, refs)
    file = _file(cmp, artifact_id)
    url = _file_url(cmp, file)
    prefs = reading_state(request.user, [viewed_key(file)])
    layout, viewed = layout_of(request, prefs.layout), prefs.viewed
    viewed_url = reverse("versions:compare_viewed", args=[cmp.app.slug, cmp.spec])
    ctx: dict[str, Any] = {"app": cmp.app, "cmp": cmp, "layout": layout, "viewed_url": viewed_url}
    if "count" in request.GET:
        take = min(int_param(request.GET.get("count")), GAP_CHUNK)
        old, new = int_param(request.GET.get("old")), int_param(request.GET.get("new"))
        try:
            rows = _result(file).context_lines(old, new, take)
        except diffing.StaleContext:
            rows = []
        rest_count = int_param(request.GET.get("count")) - take
        rest = diffing.Gap(old + take, new + take, rest_count) if rest_count > 0 else None
        shown = file_view(file, viewed, url=url)
        _notes(request, cmp, [shown], layout)
        ctx.update(rows=rows, rest=rest, fv=shown, **perms(request, cmp.app))
        return render(request, "versions/partials/_compare_context.html", ctx)
    page = int_param(request.GET.get("page"), 0)
    fv = file_view(file, viewed, url=url, page=max(page, 1))
    _notes(request, cmp, [fv], layout)
    ctx["fv"] = fv
    ctx.update(perms(request, cmp.app))
    if page and is_fragment(request):
        return render(request, "versions/partials/_compare_page.html", ctx)
    return render(request, "versions/partials/_compare_file.html", ctx)


@require_POST
@panel_view
def compare_viewed(request: HttpRequest, slug: str, refs: str) -> HttpResponse:
    """Mark a file of the comparison as viewed (``viewed=1``) or not: 204, nothing to swap."""
    cmp = _comparison(request, slug, refs)
    file = _file(cmp, int_param(request.POST.get("artifact")))
    services.mark_viewed(
        actor=actor_of(request),
        app=cmp.app,
        key=viewed_key(file),
        viewed=request.POST.get("viewed") == "1",
    )
    return HttpResponse(status=204)
