"""Benchmark set-up: Django on the database DATABASE_URL names (a fresh SQLite file when unset).

On PostgreSQL a fresh database ``versions_bench_<pid>`` is created next to the one named (and
dropped at exit), so a benchmark never touches real data or another running benchmark.
"""

from __future__ import annotations

import atexit
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[2]


def setup_django(*, with_reversion: bool = False) -> str:
    """Configure Django on a fresh benchmark database, migrate it; returns the vendor name.
    ``with_reversion`` installs django-reversion too (a benchmark-only dependency, the peer
    the capture and restore benchmarks measure against; never installed in the product)."""
    sys.path.insert(0, str(ROOT))
    url = os.environ.get("DATABASE_URL")
    if not url:
        folder = tempfile.mkdtemp(prefix="versions-bench-")
        atexit.register(shutil.rmtree, folder, True)  # the bench database goes with the run
        os.environ["DATABASE_URL"] = f"sqlite:///{folder}/bench.sqlite3"
    elif url.startswith(("postgres://", "postgresql://")):
        import psycopg

        parts = urlsplit(url)
        # One database per run, so two benchmarks running at once never share one.
        name = f"versions_bench_{os.getpid()}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {name}")
        atexit.register(_drop_database, url, name)
        os.environ["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/{name}"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "versions_site.settings")
    os.environ["DJANGO_DEBUG"] = "0"
    # Production settings refuse to start on the development key or any host
    # (docs/operations.md#production-settings).
    os.environ.setdefault("DJANGO_SECRET_KEY", "benchmark-only-" + "k" * 50)
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
    if with_reversion:
        from django.conf import settings

        settings.INSTALLED_APPS = [*settings.INSTALLED_APPS, "reversion"]
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from django.db import connection

    return connection.vendor


def _drop_database(url: str, name: str) -> None:
    import psycopg
    from django.db import connections

    connections.close_all()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def median_ms(func: Callable[[int], object], n: int, warmup: int = 5) -> float:
    """Median wall time of ``func(i)`` over ``n`` runs, in milliseconds."""
    for i in range(warmup):
        func(-1 - i)
    times = []
    for i in range(n):
        start = time.perf_counter()
        func(i)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def stylesheet_28kb() -> str:
    """The capture benchmarks' source: a 28 KB stylesheet of 700-odd rules."""
    lines = [f".rule-{i} {{ padding: {i % 17}px; color: #{i:06x}; }}\n" for i in range(700)]
    base = "".join(lines)
    while len(base.encode()) < 28 * 1024:
        base += "/* padding */\n"
    return base[: 28 * 1024]


def edited(base: str, i: int) -> str:
    """``base`` with one line changed, differently for each ``i``, like an agent's edit."""
    return base.replace(".rule-5 {", f".rule-5-{i} {{", 1)


def plain_save_row(text: str) -> Callable[[str], None]:
    """The baseline: a plain model row holding ``text`` (its table is created here). The
    returned function stores new text in it with ``Model.save()``."""
    row = _text_row("bench_plain_row", text)

    def save(new_text: str) -> None:
        row.text = new_text
        row.save()

    return save


def reversion_save_row(text: str) -> Callable[[str], None]:
    """The peer: the same row, registered with django-reversion (``setup_django(
    with_reversion=True)``); the returned function saves new text inside
    ``reversion.create_revision()``, which stores a version of the row with it."""
    import reversion

    row = _text_row("bench_reversion_row", text)
    reversion.register(type(row))

    def save(new_text: str) -> None:
        with reversion.create_revision():
            row.text = new_text
            row.save()

    return save


def _text_row(table: str, text: str) -> Any:
    """A row of a new one-column model (table ``table``, created here) holding ``text``."""
    from django.db import connection, models

    row_model: Any = type(
        f"Bench_{table}",
        (models.Model,),
        {
            "__module__": __name__,
            "text": models.TextField(),
            "Meta": type("Meta", (), {"app_label": "versions", "db_table": table}),
        },
    )
    with connection.schema_editor() as editor:
        editor.create_model(row_model)
    return row_model.objects.create(text=text)
