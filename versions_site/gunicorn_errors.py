"""gunicorn's own error answers as RFC 9457 problem details (docs/api.md#errors: no HTML error
reaches an API client). gunicorn answers a request it cannot parse — a request line over its limit
(414), headers too large (431), a malformed request (400) — before Django sees it, with a small HTML
page; ``gunicorn.conf.py`` installs :func:`write_problem` in its place."""

from __future__ import annotations

import json
from typing import Any

WORDS = {
    400: "The request could not be read as HTTP; nothing was done.",
    403: "This request is not accepted from here; nothing was done.",
    414: (
        "The request line (the URL with its query string) is longer than this server accepts; "
        "nothing was done. Send long values in a request body."
    ),
    417: "The Expect header of this request cannot be met; nothing was done.",
    431: "The request's headers are larger than this server accepts; nothing was done.",
    500: "The server could not answer this request; nothing was done. Try again.",
    501: "The request uses a transfer coding this server does not support; nothing was done.",
}
CODES = {400: "bad_request", 414: "uri_too_long", 431: "headers_too_large"}


def problem(status: int, reason: str, detail: str) -> bytes:
    """The whole HTTP answer for one of gunicorn's own errors, as problem+json."""
    message = WORDS.get(status, WORDS[400])
    body = json.dumps(
        {
            "type": "about:blank",
            "title": reason,
            "status": status,
            "detail": message,
            "error": CODES.get(status, "bad_request"),
            "message": message,
            "reason": detail[:200],
        },
        ensure_ascii=True,
    ).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        "Connection: close\r\n"
        "Content-Type: application/problem+json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode("latin-1")
    return head + body


def write_problem(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    """Drop-in for ``gunicorn.util.write_error``."""
    from gunicorn import util

    util.write_nonblock(sock, problem(status_int, reason, mesg))


def install() -> None:
    """Make gunicorn's workers answer their own errors as problem+json."""
    from gunicorn import util

    util.write_error = write_problem
