"""A real PostgreSQL primary and hot standby for the read-replica tests and benchmark
(docs/operations.md#read-replicas), made with ``initdb`` and ``pg_basebackup -R`` under a
temporary directory and removed afterwards, and gunicorn servers in front of them.

The machine's own PostgreSQL is not used: it may refuse replication connections, and ``pg_ctl``
refuses to run as root, so as root the clusters run as the ``postgres`` user. Without the
PostgreSQL server binaries the tests skip, saying so.
"""

from __future__ import annotations

import glob
import http.cookiejar
import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
GUNICORN = Path(sys.executable).parent / "gunicorn"
DATABASE = "versions"
# The ports the docs name (a standby on 5433), when free.
PRIMARY_PORT, STANDBY_PORT = 5434, 5433


def pg_bin() -> Path | None:
    """The directory of initdb, pg_ctl and pg_basebackup, or None when they are absent."""
    tools = ("initdb", "pg_ctl", "pg_basebackup")
    found = shutil.which("initdb")
    if found and all((Path(found).resolve().parent / tool).exists() for tool in tools):
        return Path(found).resolve().parent
    for candidate in sorted(
        glob.glob("/usr/lib/postgresql/*/bin") + glob.glob("/usr/pgsql-*/bin"),
        key=lambda p: [int(n) for n in re.findall(r"\d+", p)] or [0],
        reverse=True,
    ):
        if all((Path(candidate) / tool).exists() for tool in tools):
            return Path(candidate)
    return None


def why_no_replication() -> str | None:
    """Why the replica tests cannot run here, or None when they can."""
    if pg_bin() is None:
        return (
            "the PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup) are not installed: "
            "the read-replica tests make their own primary and standby with them"
        )
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root with no postgres user to run the test clusters as"
    return None


def _free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as PostgreSQL binds
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(preferred: int | None = None) -> int:
    if preferred is not None and _free(preferred):
        return preferred
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Clusters:
    """A primary and its streaming hot standby, each with its own data directory and port."""

    root: Path
    bin: Path
    primary_port: int
    standby_port: int
    as_postgres: bool

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(a) for a in args]
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.root)
        if check and done.returncode != 0:
            logs = "".join(
                f"\n--- {log.name}:\n" + log.read_text(errors="replace")[-2000:]
                for log in sorted(self.root.glob("*.log"))
                if not log.name.startswith("gunicorn")
            )
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}{logs}")
        return done

    def url(self, port: int) -> str:
        return f"postgres://postgres@127.0.0.1:{port}/{DATABASE}"

    @property
    def primary_url(self) -> str:
        return self.url(self.primary_port)

    @property
    def standby_url(self) -> str:
        return self.url(self.standby_port)

    def _options(self, port: int) -> str:
        return f"-p {port} -k {self.root} -c listen_addresses=127.0.0.1"

    def start(self, name: str) -> None:
        port = self.primary_port if name == "primary" else self.standby_port
        self.run(
            self.bin / "pg_ctl", "-D", self.root / name, "-l", self.root / f"{name}.log",
            "-o", self._options(port), "-w", "-t", "60", "start",
        )  # fmt: skip

    def running(self, name: str) -> bool:
        return (
            self.run(self.bin / "pg_ctl", "-D", self.root / name, "status", check=False).returncode
            == 0
        )

    def stop(self, name: str, mode: str = "fast", check: bool = True) -> None:
        self.run(self.bin / "pg_ctl", "-D", self.root / name, "-m", mode, "-w", "stop", check=check)

    def connect(self, port: int, dbname: str = DATABASE) -> psycopg.Connection[Any]:
        return psycopg.connect(
            host="127.0.0.1", port=port, user="postgres", dbname=dbname, autocommit=True
        )

    def standby_sql(self, sql: str) -> Any:
        with self.connect(self.standby_port) as conn:
            return conn.execute(sql).fetchone()

    def pause_replay(self) -> None:
        self.standby_sql("SELECT pg_wal_replay_pause()")

    def resume_replay(self) -> None:
        self.standby_sql("SELECT pg_wal_replay_resume()")

    def wait_caught_up(self, timeout: float = 30) -> None:
        """Until the standby has replayed everything the primary wrote so far."""
        with self.connect(self.primary_port) as conn:
            target = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]  # type: ignore[index]
        deadline = time.monotonic() + timeout
        while True:
            behind = self.standby_sql(
                f"SELECT pg_wal_lsn_diff('{target}'::pg_lsn, pg_last_wal_replay_lsn())"
            )[0]
            if behind is not None and behind <= 0:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the standby is still {behind} bytes behind")
            time.sleep(0.05)

    def transactions(self, port: int) -> int:
        """Transactions the database has answered on that server (pg_stat_database)."""
        with self.connect(port, "postgres") as conn:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            row = conn.execute(
                "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s",
                [DATABASE],
            ).fetchone()
        return int(row[0]) if row else 0

    def remove(self) -> None:
        for name in ("standby", "primary"):
            if (self.root / name).exists():
                self.stop(name, "immediate", check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def make_clusters(max_connections: int = 60) -> Clusters:
    """initdb a primary, start it, create the database, pg_basebackup -R a standby, start it."""
    binaries = pg_bin()
    assert binaries is not None, why_no_replication()
    as_postgres = os.geteuid() == 0
    root = Path(tempfile.mkdtemp(prefix="versions-replicas-"))
    if as_postgres:
        user = pwd.getpwnam("postgres")
        os.chown(root, user.pw_uid, user.pw_gid)
    primary_port = free_port(PRIMARY_PORT)
    standby_port = free_port(STANDBY_PORT if primary_port != STANDBY_PORT else None)
    clusters = Clusters(root, binaries, primary_port, standby_port, as_postgres)
    try:
        clusters.run(
            binaries / "initdb", "-D", root / "primary", "-A", "trust", "-U", "postgres",
            "-E", "UTF8", "--no-sync",
        )  # fmt: skip
        with open(root / "primary" / "postgresql.conf", "a") as conf:
            conf.write(
                "\n# versions read-replica tests\n"
                f"max_connections = {max_connections}\n"
                "wal_level = replica\nmax_wal_senders = 4\nhot_standby = on\n"
                "fsync = off\nfull_page_writes = off\nshared_buffers = 32MB\n"
                "hot_standby_feedback = on\n"
            )
        clusters.start("primary")
        with clusters.connect(primary_port, "postgres") as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")
        clusters.run(
            binaries / "pg_basebackup", "-h", "127.0.0.1", "-p", str(primary_port),
            "-U", "postgres", "-D", root / "standby", "-R", "-X", "stream",
            "--checkpoint=fast", "--no-sync",
        )  # fmt: skip
        clusters.start("standby")
    except BaseException:
        clusters.remove()
        raise
    return clusters


def manage(database_url: str, *args: str, stdin: str | None = None) -> str:
    """``manage.py`` against the test primary; its output."""
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_DEBUG": "1"}
    env.pop("DATABASE_REPLICA_URLS", None)
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


@dataclass
class Server:
    """A gunicorn server of the site, reading from the standby."""

    base: str
    process: subprocess.Popen[bytes]
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_server(
    clusters: Clusters, *, workers: int = 1, replicas: bool = True, **settings: str
) -> Server:
    port = free_port()
    log = clusters.root / f"gunicorn-{port}.log"
    env = {
        **os.environ,
        "DATABASE_URL": clusters.primary_url,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "replica-test-" + "k" * 50,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        **settings,
    }
    if replicas:
        env["DATABASE_REPLICA_URLS"] = clusters.standby_url
    else:
        env.pop("DATABASE_REPLICA_URLS", None)
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                str(GUNICORN), "versions_site.wsgi", "--bind", f"127.0.0.1:{port}",
                "--workers", str(workers), "--log-level", "warning",
            ],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    server = Server(f"http://127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{server.base}/accounts/login/", timeout=5).read()
            return server
        except (OSError, urllib.error.URLError):
            if process.poll() is not None or time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(server.log_text()) from None
            time.sleep(0.2)


@dataclass
class Browser:
    """A client with its own cookies (a person's browser, or a visitor's)."""

    base: str
    jar: http.cookiejar.CookieJar = field(default_factory=http.cookiejar.CookieJar)

    def __post_init__(self) -> None:
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def request(
        self,
        path: str,
        *,
        method: str = "GET",
        form: dict[str, str] | None = None,
        body: Any = None,
        token: str | None = None,
    ) -> tuple[int, str]:
        headers = {}
        data = None
        if form is not None:
            data = urllib.parse.urlencode(form).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            headers["Referer"] = self.base + path
            csrf = self.cookie("csrftoken")
            if csrf:
                headers["X-CSRFToken"] = csrf
        elif body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if token:
            headers["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with self.opener.open(req, timeout=30) as response:
                return response.status, response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode("utf-8", "replace")

    def cookie(self, name: str) -> str | None:
        return next((c.value for c in self.jar if c.name == name), None)

    def sign_in(self, username: str, password: str) -> None:
        status, page = self.request("/accounts/login/")
        assert status == 200, page
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert token, page
        status, page = self.request(
            "/accounts/login/",
            method="POST",
            form={
                "csrfmiddlewaretoken": token.group(1),
                "username": username,
                "password": password,
            },
        )
        assert status == 200 and "sessionid" in {c.name for c in self.jar}, page
