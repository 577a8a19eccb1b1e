"""Production (docs/architecture.md#environments): instant rollback, promotion and serving, against
Restore all and the draft.

Run: ``.venv/bin/python tests/perf/bench_production.py`` (DATABASE_URL selects PostgreSQL; the
benchmark then works in a fresh database of its own, dropped at exit).

In one run, on one database, rounds interleaving ours and the baseline so load drift hits both:
- ``rollback_vs_restore``: ``rollback_production`` of a 1,000-artifact app whose last promotion
  changed all 1,000 artifacts, over ``restore_change_set`` (Restore all) of a 1,000-artifact set
  — the two ways to take back a bad 1,000-artifact turn;
- ``rollback_growth``: that rollback at 1,000 artifacts over the same at 10 artifacts. The
  rollback's receipt lists what changed by reading the move it reverses from the history when
  it is shown; that read (``rollback_receipt_ms``, proportional to what changed) is printed
  beside it, not inside it;
- ``serve_vs_draft``: serving the page ``index`` and the 28 KB stylesheet ``App`` from
  production over serving them from the draft of an app without production (the live views
  called directly, so nothing but serving is timed);
- ``promote_vs_restore``: promoting a 1,000-artifact draft that differs from production in all
  1,000 artifacts over Restore all of 1,000;
- ``rollout_serve_vs_production`` (safe promotion, docs/architecture.md#safe-promotion; goal
  ≤ 1.1): serving the page ``index`` and the 28 KB stylesheet to a visitor pinned (by the
  ``versions_dp`` cookie) to the candidate of a running 50 % rollout, over serving them from
  plain production of an app just like it — both watched, as after any promotion;
- ``check_vs_promote`` (goal ≤ 3.0): promoting one changed artifact of a 1,000-artifact app
  with 10 HTTP checks (run in-process against the state's preview) over the same promotion of
  a twin app without checks.

Retention is raised for the run (``VERSIONS_POINTS_PER_APP``), so what is timed is the operation
itself, never a retention pass. On SQLite every timed operation starts from a checkpointed, restarted WAL
(untimed), as in ``bench_restore.py``. Prints its figures last as one line of JSON. Ratios are
ours / theirs: lower is better.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import setup_django, stylesheet_28kb  # noqa: E402

BIG = 1000
SMALL = 10
ROUNDS = 30
SERVE_ROUNDS = 300
ROLLBACKS_PER_ROUND = 4


def timed(func: Callable[[], object]) -> float:
    start = time.perf_counter()
    func()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    vendor = setup_django()
    from django.conf import settings
    from django.db import connection, transaction
    from django.test import RequestFactory

    from versions import live, services
    from versions.models import PAGE, STYLESHEET, App

    settings.VERSIONS_POINTS_PER_APP = 10**7

    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE bench_scratch (id INTEGER PRIMARY KEY, n INTEGER)")
        cursor.execute("INSERT INTO bench_scratch (id, n) VALUES (1, 0)")

    def settle() -> None:
        """Untimed, before every timed operation alike: collect garbage the last one left;
        on SQLite checkpoint the WAL and restart it with one scratch write, so an operation
        pays for the checkpoints its own writes trigger, and neither for pages another left
        behind nor for restarting the WAL after them (~7 ms here: as much as a rollback)."""
        gc.collect()
        if vendor == "sqlite":
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA wal_checkpoint(RESTART)")
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("UPDATE bench_scratch SET n = n + 1 WHERE id = 1")

    def make_app(slug: str, n: int, *, turn: bool = True) -> tuple[App, str | None]:
        """An app of ``n`` artifacts (the page index, the 28 KB stylesheet App, and small
        stylesheets), promoted, then an agent turn that changed every artifact; returns the
        app and the turn's set."""
        app = App.objects.create(slug=slug, name=slug)
        css = stylesheet_28kb()
        sources = {(PAGE, "index"): "<!doctype html><link rel=stylesheet href=assets/App.css>"}
        sources[(STYLESHEET, "App")] = css
        for i in range(n - 2):
            sources[(STYLESHEET, f"sheet-{i}")] = f".{slug}-{i} {{ padding: {i % 17}px; }}\n" * 20
        for (collection, name), text in sources.items():
            services.write_artifact(
                app, collection, name, text, requested_by="bench", tool="bench", run_id="setup"
            )
        if not turn:
            return app, None
        services.promote(app, by="bench")
        set_id = None
        for (collection, name), text in sources.items():
            receipt = services.write_artifact(
                app,
                collection,
                name,
                "/* turn */\n" + text,
                requested_by="bench",
                tool="bench",
                run_id="turn",
            )
            set_id = receipt.change_set_id
        return app, set_id

    def round_of(app: App, state: dict) -> tuple[list[float], float, list[float], float]:
        """Restore all twice (away from the turn and back: the draft is the turn again), then
        promote the draft (every artifact differs from production) and roll production back."""
        restores = []
        for _ in range(2):
            receipt = None

            def restore() -> None:
                nonlocal receipt
                receipt = services.restore_change_set(state["undo"], by="bench")

            settle()
            restores.append(timed(restore))
            assert receipt is not None and receipt.kind == "restore", receipt
            state["undo"] = receipt.set_id
        promoted = None

        def promote() -> None:
            nonlocal promoted
            promoted = services.promote(app, by="bench")

        settle()
        promote_ms = timed(promote)
        assert promoted is not None and promoted.kind == "promotion"
        assert len(promoted.changed) == state["n"], len(promoted.changed)
        rolled = None

        def rollback() -> None:
            nonlocal rolled
            rolled = services.rollback_production(app, by="bench")

        rollbacks = []
        receipt_ms = 0.0
        for again in range(ROLLBACKS_PER_ROUND):
            if again:  # untimed: forward again to the promoted deployment
                services.rollback_production(app, by="bench", to=promoted.deployment_id)
            settle()
            rollbacks.append(timed(rollback))
            assert rolled is not None and rolled.kind == "rollback"
            assert rolled.deployment_id == promoted.previous_deployment
            # Reading the receipt's list of changes (from the history) is timed on its own.
            receipt_ms = timed(rolled.as_dict)
            assert len(rolled.changed) == state["n"]
        return restores, promote_ms, rollbacks, receipt_ms

    big, big_turn = make_app("bench-1000", BIG)
    small, small_turn = make_app("bench-10", SMALL)
    draft_only, _ = make_app("bench-draft", BIG, turn=False)
    big_state = {"undo": big_turn, "n": BIG}
    small_state = {"undo": small_turn, "n": SMALL}

    for _ in range(2):  # warm-up
        round_of(big, big_state)
        round_of(small, small_state)
    restore_t, promote_t, rollback_t, receipt_t, small_rollback_t = [], [], [], [], []
    for _ in range(ROUNDS):
        restores, promote_ms, rollbacks, receipt_ms = round_of(big, big_state)
        restore_t += restores
        promote_t.append(promote_ms)
        rollback_t += rollbacks
        receipt_t.append(receipt_ms)
        small_rollback_t += round_of(small, small_state)[2]

    # --- serving ---------------------------------------------------------------------------
    factory = RequestFactory()
    # The big app's production (rolled back) serves the pre-turn bytes; its draft is the turn.
    assert services.resolve_state(big, "production").deployment_id is not None

    def serve(slug: str) -> None:
        page = live.index(factory.get(f"/apps/{slug}/"), slug=slug)
        sheet = live.asset(
            factory.get(f"/apps/{slug}/assets/App.css"), slug=slug, name="App", ext="css"
        )
        assert page.status_code == 200 and sheet.status_code == 200
        assert len(sheet.content) == 28 * 1024

    for _ in range(20):
        serve(big.slug)
        serve(draft_only.slug)
    prod_t, draft_t = [], []
    for _ in range(SERVE_ROUNDS):
        prod_t.append(timed(lambda: serve(big.slug)))
        draft_t.append(timed(lambda: serve(draft_only.slug)))

    # --- safe promotion: serving a rollout, promoting with checks ----------------------------
    from django.contrib.auth.models import User
    from django.core import signing

    rolling, _ = make_app("bench-rollout", SMALL)
    plain, _ = make_app("bench-plain", SMALL)
    services.promote(plain, by="bench")  # production is the turn, watched
    candidate = services.promote(rolling, by="bench", rollout=50).deployment_id
    pin = signing.get_cookie_signer(salt="versions.live.rollout").sign(candidate)

    def serve_as_visitor(slug: str) -> None:
        cookie = {"HTTP_COOKIE": f"versions_dp={pin}"}
        page = live.index(factory.get(f"/apps/{slug}/", **cookie), slug=slug)
        sheet = live.asset(
            factory.get(f"/apps/{slug}/assets/App.css", **cookie), slug=slug, name="App", ext="css"
        )
        assert page.status_code == 200 and sheet.status_code == 200
        assert len(sheet.content) == 28 * 1024 + len("/* turn */\n")
        assert "versions_dp" not in page.cookies  # pinned: no new draw

    for _ in range(20):
        serve_as_visitor(rolling.slug)
        serve_as_visitor(plain.slug)
    rollout_t, plain_t = [], []
    for _ in range(SERVE_ROUNDS):
        rollout_t.append(timed(lambda: serve_as_visitor(rolling.slug)))
        plain_t.append(timed(lambda: serve_as_visitor(plain.slug)))

    owner = services.actor_for_user(User.objects.create_superuser("bench-owner", password=None))
    checked, _ = make_app("bench-checks", BIG)
    unchecked, _ = make_app("bench-nochecks", BIG)
    paths = ["/", "/p/index", "/assets/App.css"] + [f"/assets/sheet-{i}.css" for i in range(7)]
    for i, path in enumerate(paths):
        services.promotion.add_check(checked, actor=owner, name=f"check {i}", path=path)
    check_t, nocheck_t = [], []
    for round_no in range(ROUNDS + 2):
        for app, times in ((checked, check_t), (unchecked, nocheck_t)):
            services.write_artifact(
                app, PAGE, "index", f"<!doctype html><p>round {round_no}</p>",
                requested_by="bench", tool="bench", run_id=f"r{round_no}",
            )  # fmt: skip
            receipt = None

            def promote_it(app: App = app) -> None:
                nonlocal receipt
                receipt = services.promote(app, by="bench")

            settle()
            ms = timed(promote_it)
            assert receipt is not None and receipt.kind == "promotion", receipt
            assert len(receipt.checks or []) == (13 if app is checked else 3)
            if round_no >= 2:  # the first two warm up
                times.append(ms)

    restore_ms = statistics.median(restore_t)
    promote_ms = statistics.median(promote_t)
    rollback_ms = statistics.median(rollback_t)
    receipt_ms = statistics.median(receipt_t)
    small_rollback_ms = statistics.median(small_rollback_t)
    prod_ms = statistics.median(prod_t)
    draft_ms = statistics.median(draft_t)
    rollout_ms = statistics.median(rollout_t)
    plain_ms = statistics.median(plain_t)
    check_ms = statistics.median(check_t)
    nocheck_ms = statistics.median(nocheck_t)
    print(
        f"database: {vendor}; {ROUNDS} rounds ({ROLLBACKS_PER_ROUND} rollbacks each), "
        f"{SERVE_ROUNDS} serving rounds, medians"
    )
    print(
        f"Restore all of {BIG}: {restore_ms:.2f} ms; promote {BIG} changed: {promote_ms:.2f} ms; "
        f"rollback of {BIG}: {rollback_ms:.3f} ms (+ {receipt_ms:.3f} ms to read its {BIG} "
        f"changes for the receipt); rollback of {SMALL}: {small_rollback_ms:.3f} ms; "
        f"serve page + 28 KB from production: {prod_ms:.3f} ms, from the draft: {draft_ms:.3f} ms"
    )
    print(
        f"serve page + 28 KB to a visitor pinned to a rollout's candidate: {rollout_ms:.3f} ms, "
        f"from plain production: {plain_ms:.3f} ms; promote 1 of {BIG} with 10 HTTP checks: "
        f"{check_ms:.2f} ms, without: {nocheck_ms:.2f} ms"
    )
    print(
        json.dumps(
            {
                "bench": "production",
                "db": vendor,
                "n": BIG,
                "rollback_ms": round(rollback_ms, 3),
                "rollback_10_ms": round(small_rollback_ms, 3),
                "rollback_receipt_ms": round(receipt_ms, 3),
                "restore_ms": round(restore_ms, 2),
                "promote_ms": round(promote_ms, 2),
                "serve_production_ms": round(prod_ms, 3),
                "serve_draft_ms": round(draft_ms, 3),
                "rollback_vs_restore": round(rollback_ms / restore_ms, 3),
                "rollback_growth": round(rollback_ms / small_rollback_ms, 3),
                "serve_vs_draft": round(prod_ms / draft_ms, 3),
                "promote_vs_restore": round(promote_ms / restore_ms, 3),
                "serve_rollout_ms": round(rollout_ms, 3),
                "serve_plain_ms": round(plain_ms, 3),
                "promote_checked_ms": round(check_ms, 2),
                "promote_unchecked_ms": round(nocheck_ms, 2),
                "rollout_serve_vs_production": round(rollout_ms / plain_ms, 3),
                "check_vs_promote": round(check_ms / nocheck_ms, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
