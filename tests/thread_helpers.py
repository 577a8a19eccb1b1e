"""Running a test's writers in threads that start at once, each on its own connection."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import connection


def run_in_threads(n: int, target: Callable[[int], Any]) -> list:
    """``target(i)`` in ``n`` threads released together; each one's result, or its exception."""
    results: list = [None] * n
    barrier = threading.Barrier(n)

    def worker(i: int) -> None:
        try:
            connection.ensure_connection()  # connected before the start: they all contend
            barrier.wait()
            results[i] = target(i)
        except Exception as exc:  # noqa: BLE001 - collected and asserted on
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def failures(results: list) -> list[BaseException]:
    return [r for r in results if isinstance(r, BaseException)]
