"""Production settings refuse to start unsafe (docs/operations.md#production-settings): with
DJANGO_DEBUG=0 a missing, short or repetitive secret key, or an ALLOWED_HOSTS of any host or a whole
top-level domain, stops manage.py and gunicorn with a message; VERSIONS_HTTPS=1 turns on Secure
cookies, HSTS and the SSL redirect; the README's production settings pass ``check --deploy`` with no
warning."""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from versions_site.settings import (
    HOST_IS_A_WHOLE_DOMAIN,
    HOSTS_NOT_NAMED,
    NO_SECRET_KEY,
    WEAK_SECRET_KEY,
)

ROOT = Path(__file__).resolve().parent.parent
GUNICORN = Path(sys.executable).with_name("gunicorn")
KEY = secrets.token_urlsafe(50)


def clean_env(**values: str) -> dict[str, str]:
    """This process's environment without any setting of ours, plus ``values``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "VERSIONS_", "DATABASE_")) or k == "DJANGO_SETTINGS_MODULE"
    }
    env["DJANGO_SETTINGS_MODULE"] = "versions_site.settings"
    env.update(values)
    return env


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"DJANGO_ALLOWED_HOSTS": "versions.example.com"}, NO_SECRET_KEY),
        ({"DJANGO_ALLOWED_HOSTS": "versions.example.com", "DJANGO_SECRET_KEY": " "}, NO_SECRET_KEY),
        ({"DJANGO_SECRET_KEY": KEY, "DJANGO_ALLOWED_HOSTS": "*"}, HOSTS_NOT_NAMED),
        ({"DJANGO_SECRET_KEY": KEY, "DJANGO_ALLOWED_HOSTS": "a.example,*"}, HOSTS_NOT_NAMED),
        ({"DJANGO_SECRET_KEY": KEY}, HOSTS_NOT_NAMED),
    ],
)
def test_production_without_a_key_or_named_hosts_does_not_start(values, message):
    done = manage(clean_env(DJANGO_DEBUG="0", **values), "check")
    assert done.returncode != 0
    assert f"ImproperlyConfigured: {message}" in done.stderr


@pytest.mark.parametrize(
    ("key", "length", "distinct"),
    [("k" * 49, 49, 1), ("abcd" * 20, 80, 4), (secrets.token_urlsafe(30), 40, None)],
)
def test_production_on_a_short_or_repetitive_key_does_not_start(key, length, distinct):
    env = clean_env(DJANGO_DEBUG="0", DJANGO_SECRET_KEY=key, DJANGO_ALLOWED_HOSTS="v.example")
    done = manage(env, "check")
    assert done.returncode != 0
    distinct = len(set(key)) if distinct is None else distinct
    message = WEAK_SECRET_KEY.format(length=length, distinct=distinct)
    assert f"ImproperlyConfigured: {message}" in done.stderr


@pytest.mark.parametrize("host", [".com", "com", ".ORG", "v.example,.io"])
def test_production_allowing_a_whole_top_level_domain_does_not_start(host):
    env = clean_env(DJANGO_DEBUG="0", DJANGO_SECRET_KEY=KEY, DJANGO_ALLOWED_HOSTS=host)
    done = manage(env, "check")
    assert done.returncode != 0
    named = host.split(",")[-1]
    assert f"ImproperlyConfigured: {HOST_IS_A_WHOLE_DOMAIN.format(host=named)}" in done.stderr


@pytest.mark.parametrize("hosts", [".v.example", "localhost,127.0.0.1,[::1]", "testserver"])
def test_production_starts_with_a_strong_key_and_hosts_of_its_own(hosts):
    env = clean_env(DJANGO_DEBUG="0", DJANGO_SECRET_KEY=KEY, DJANGO_ALLOWED_HOSTS=hosts)
    done = manage(env, "check")
    assert done.returncode == 0, done.stderr


def test_gunicorn_does_not_start_on_the_development_key():
    env = clean_env(DJANGO_DEBUG="0", DJANGO_ALLOWED_HOSTS="versions.example.com")
    done = subprocess.run(
        [str(GUNICORN), "--check-config", "versions_site.wsgi"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert NO_SECRET_KEY in done.stdout + done.stderr


def test_development_still_starts_with_nothing_set():
    done = manage(clean_env(), "check")
    assert done.returncode == 0, done.stderr


SHOW = (
    "import json; from django.conf import settings as s; print(json.dumps({k: getattr(s, k) for k"
    " in ['SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', 'SECURE_SSL_REDIRECT',"
    " 'SECURE_HSTS_SECONDS', 'SECURE_HSTS_INCLUDE_SUBDOMAINS', 'SECURE_HSTS_PRELOAD',"
    " 'SECURE_PROXY_SSL_HEADER']}))"
)


def shown(**values: str) -> dict:
    done = manage(clean_env(**values), "shell", "-c", SHOW)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_versions_https_turns_on_secure_cookies_hsts_and_the_ssl_redirect():
    production = {
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": KEY,
        "DJANGO_ALLOWED_HOSTS": "v.example",
    }
    assert shown(**production) == {
        "SESSION_COOKIE_SECURE": False,
        "CSRF_COOKIE_SECURE": False,
        "SECURE_SSL_REDIRECT": False,
        "SECURE_HSTS_SECONDS": 0,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": False,
        "SECURE_HSTS_PRELOAD": False,
        "SECURE_PROXY_SSL_HEADER": None,
    }
    assert shown(**production, VERSIONS_HTTPS="1", VERSIONS_TRUST_X_FORWARDED_PROTO="1") == {
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_SSL_REDIRECT": True,
        "SECURE_HSTS_SECONDS": 31536000,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
        "SECURE_HSTS_PRELOAD": False,
        "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
    }


def readme_production_env() -> dict[str, str]:
    """The variables the README's production section exports, the secret key made up."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Production") :]
    section = section[: section.index("\n## ", 1)]
    values: dict[str, str] = {}
    for line in section.splitlines():
        line = line.strip()
        if not line.startswith("export "):
            continue
        if "DJANGO_SECRET_KEY=" in line:
            values["DJANGO_SECRET_KEY"] = KEY
            continue
        for word in shlex.split(line)[1:]:
            name, _, value = word.partition("=")
            values[name] = value
    return values


def test_the_readmes_production_settings_pass_check_deploy_with_no_warning():
    values = readme_production_env()
    assert values["DJANGO_DEBUG"] == "0" and values["VERSIONS_HTTPS"] == "1"
    assert re.fullmatch(r"[\w.,-]+", values["DJANGO_ALLOWED_HOSTS"])

    done = manage(clean_env(**values), "check", "--deploy", "--fail-level", "WARNING")

    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout
