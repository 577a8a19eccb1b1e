"""``manage.py`` run as its own process against a given database, as an operator runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def manage(
    database_url: str, *args: str, check: bool = True, timeout: int = 600
) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_DEBUG": "1"}
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=check,
        timeout=timeout,
    )
