"""``manage.py serve [address] [--workers N]``: the development server and the worker beside it
(docs/operations.md#worker), started by one command and stopped together: Ctrl-C or SIGTERM
stops both, and either one ending stops the other."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = (
        "Serve the panel (runserver) and run N workers (db_worker) beside it; Ctrl-C or SIGTERM "
        "stops them all, and one ending stops the others."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("address", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--workers", type=int, default=1, help="Worker processes (1).")
        parser.add_argument(
            "--interval",
            default="0.2",
            help="Seconds an idle worker waits before it looks for work again (0.2).",
        )

    def handle(self, *args: Any, address: str, workers: int, interval: str, **options: Any) -> None:
        manage = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py")]
        # The server beside them runs the system checks (loading every URL: seconds); the
        # workers need not run them again before they take their first task.
        worker = [
            *manage,
            "db_worker",
            "--interval",
            interval,
            "--no-startup-delay",
            "--skip-checks",
        ]
        procs = [subprocess.Popen([*manage, "runserver", address])]
        procs += [subprocess.Popen(worker) for _ in range(max(workers, 1))]
        self.stdout.write(f"Serving on http://{address}/ with {len(procs) - 1} worker(s).")
        stop = threading.Event()

        def on_signal(signum: int, frame: object) -> None:
            stop.set()

        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        while not stop.is_set() and all(p.poll() is None for p in procs):
            stop.wait(0.2)
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
