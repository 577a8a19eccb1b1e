"""A local webhook receiver for the tests: an HTTP server on 127.0.0.1 in a thread that keeps
what it received and answers as told (a status, a redirect, or no answer for a while)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


@dataclass
class Receiver:
    """``answers``: what to answer, in order, then ``default`` (an int status, ``"hang"`` to
    say nothing for ``hang_seconds``, or ``"redirect"`` for a 302 to ``/elsewhere``)."""

    answers: list[int | str] = field(default_factory=list)
    default: int | str = 200
    hang_seconds: float = 5.0
    received: list[Received] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def wait_for(self, count: int, timeout: float = 90.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return list(self.received)


def start_receiver(**options) -> Receiver:
    receiver = Receiver(**options)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            with lock:
                receiver.received.append(
                    Received(self.path, dict(self.headers.items()), body, time.time())
                )
                answer = receiver.answers.pop(0) if receiver.answers else receiver.default
            if answer == "hang":
                time.sleep(receiver.hang_seconds)
                answer = 200
            if answer == "redirect":
                self.send_response(302)
                self.send_header("Location", "/elsewhere")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            payload = f"answer {answer}: ".encode() + b"x" * 3000
            try:
                self.send_response(int(answer))
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                pass  # the sender gave up waiting

    receiver.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.server.daemon_threads = True
    threading.Thread(target=receiver.server.serve_forever, daemon=True).start()
    return receiver
