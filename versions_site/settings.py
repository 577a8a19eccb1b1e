"""Django settings for the Versions site.

Everything a deployment changes comes from the environment: ``DATABASE_URL`` (PostgreSQL in
production, an embedded SQLite file otherwise), ``DJANGO_SECRET_KEY``, ``DJANGO_DEBUG``,
``DJANGO_ALLOWED_HOSTS`` and the ``VERSIONS_*`` limits.
"""

import json
import os
import sys
from datetime import timedelta
from pathlib import Path

import dj_database_url
import django
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
_DEVELOPMENT_KEY = "dev-only-insecure-key-change-me-in-production"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "").strip() or _DEVELOPMENT_KEY
ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "*" if DEBUG else "").split(",")
    if h.strip()
]
# Production (DJANGO_DEBUG=0) refuses to start unsafe (docs/operations.md#production-settings): on
# the public development key anyone could sign session cookies, and with any Host accepted the site
# would build its links (and password-reset mails) from whatever Host a request claims.
NO_SECRET_KEY = (
    "DJANGO_DEBUG=0 needs a secret key of its own: set DJANGO_SECRET_KEY to a long random "
    "value (python -c 'import secrets; print(secrets.token_urlsafe(50))'). The server did not "
    "start, because the development key is public."
)
HOSTS_NOT_NAMED = (
    "DJANGO_DEBUG=0 needs the host names the site answers to: set DJANGO_ALLOWED_HOSTS to them, "
    "comma-separated (e.g. versions.example.com), never “*”. The server did not start."
)
WEAK_SECRET_KEY = (
    "DJANGO_DEBUG=0 needs a strong secret key: DJANGO_SECRET_KEY has {length} characters, "
    "{distinct} of them different, and needs at least 50 characters and 5 different ones "
    "(python -c 'import secrets; print(secrets.token_urlsafe(50))'). The server did not start."
)
HOST_IS_A_WHOLE_DOMAIN = (
    "DJANGO_ALLOWED_HOSTS names “{host}”, a whole top-level domain: a request for any site "
    "under it would be taken for this one. Name the site's own host instead (e.g. "
    "versions.example.com). The server did not start."
)
if not DEBUG and SECRET_KEY == _DEVELOPMENT_KEY:
    raise ImproperlyConfigured(NO_SECRET_KEY)
if not DEBUG and (not ALLOWED_HOSTS or "*" in ALLOWED_HOSTS):
    raise ImproperlyConfigured(HOSTS_NOT_NAMED)
# A short or repetitive key can be guessed offline from one signed cookie.
if not DEBUG and (len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5):
    raise ImproperlyConfigured(
        WEAK_SECRET_KEY.format(length=len(SECRET_KEY), distinct=len(set(SECRET_KEY)))
    )


def _whole_top_level_domain(host: str) -> bool:
    """``.com`` (every site under com) or ``com``; ``localhost`` and ``testserver`` (Django's
    test client) are names of this machine, not domains."""
    label = host.removeprefix(".")
    if "." in label or ":" in label:  # a dotted name, an IPv4 or an [IPv6] address
        return False
    return host.startswith(".") or label.lower() not in ("localhost", "testserver")


for _host in ALLOWED_HOSTS if not DEBUG else ():
    if _whole_top_level_domain(_host):
        raise ImproperlyConfigured(HOST_IS_A_WHOLE_DOMAIN.format(host=_host))
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "ninja",  # only for the API docs page's Swagger UI, served from our static files
    "axes",  # sign-in throttling (docs/operations.md#sign-in-throttling)
    # The worker's queue (docs/operations.md#worker): Django's tasks API, from Django itself on
    # 6.x and from the django-tasks backport on 5.2, with its queue in the database.
    *(() if django.VERSION >= (6, 0) else ("django_tasks",)),
    "django_tasks_db",
    "versions",
]

MIDDLEWARE = [
    # Outermost, so every answer under /apps/<slug>/ is sandboxed: Django's 404s and redirects
    # too (docs/architecture.md#live-app-safety).
    "versions.live.sandbox_middleware",
    # A NUL in the address answers 404 / 400 in words before anything reads it (PostgreSQL
    # refuses NUL in text: it would be a 500).
    "versions.nul_guard.nul_guard",
    "django.middleware.security.SecurityMiddleware",
    # The panel's Content-Security-Policy (below); the live app's answers get their own
    # sandbox policy from the middleware above, which runs after this one on the way out.
    "django.middleware.csp.ContentSecurityPolicyMiddleware"
    if django.VERSION >= (6, 0)
    else "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # A route asked with a method it does not take answers the API's JSON error, not HTML.
    "versions.api.json_method_not_allowed",
    # A database error under /api/v1/ answers the API's JSON (503), not Django's HTML 500.
    "versions.api_guard.DatabaseUnavailableAsJson",
    # Last: turns a sign-in refused for too many failures into the lock-out page in words.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "versions_site.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "versions_site.wsgi.application"

# SQLite is the embedded default, set up so that parallel writers queue instead of failing:
# WAL lets readers run beside a writer, IMMEDIATE takes the write lock at BEGIN (no upgrade
# deadlocks), and the busy timeout makes a second writer wait for the first. secure_delete=FAST
# zeroes deleted content in pages a transaction writes anyway, but does not write a pruned
# blob's freed pages just to zero them (builds that default to full secure_delete did: seven
# more pages per capture once retention prunes on every write).
_SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 30,
    "init_command": (
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA secure_delete=FAST;"
    ),
}
_default_sqlite = f"sqlite:///{BASE_DIR / 'db.sqlite3'}"
# A worker (manage.py db_worker) has no requests to end a connection at: it keeps its own
# (health-checked) instead of opening one for every task it looks for.
_DEFAULT_CONN_MAX_AGE = "600" if sys.argv[1:2] == ["db_worker"] else "0"
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", _default_sqlite),
        # Seconds a server keeps its database connection between requests (0: one per
        # request). On PostgreSQL a persistent connection also keeps the capture path's
        # prepared statements.
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", _DEFAULT_CONN_MAX_AGE)),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and (
    os.environ.get("VERSIONS_PREPARE_STATEMENTS", "1") != "0"
):
    # The capture path's statements (server-side binding) are prepared at their second run on
    # a connection; Django's own queries bind on the client and are never prepared. Off (0)
    # behind a pooler that cannot keep prepared statements.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("prepare_threshold", 2)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"].setdefault("OPTIONS", {}).update(_SQLITE_OPTIONS)
    DATABASES["default"]["TEST"] = {"NAME": os.environ.get("VERSIONS_TEST_SQLITE_NAME")}

# Read replicas (docs/operations.md#read-replicas): DATABASE_REPLICA_URLS, comma-separated, adds
# one alias per PostgreSQL hot standby (replica_1, replica_2, …); the router sends lag-tolerant
# reads there and everything else to the primary (versions/replicas.py).
REPLICAS_NEED_POSTGRESQL = (
    "DATABASE_REPLICA_URLS names read replicas, which are PostgreSQL hot standbys of "
    "DATABASE_URL's database: DATABASE_URL must be PostgreSQL too (it is {engine}). The server "
    "did not start."
)
_REPLICA_URLS = [
    url.strip() for url in os.environ.get("DATABASE_REPLICA_URLS", "").split(",") if url.strip()
]
for _number, _url in enumerate(_REPLICA_URLS, start=1):
    _replica = dj_database_url.parse(
        _url,
        conn_max_age=DATABASES["default"]["CONN_MAX_AGE"],
        conn_health_checks=True,
    )
    if (
        _replica["ENGINE"] != "django.db.backends.postgresql"
        or DATABASES["default"]["ENGINE"] != _replica["ENGINE"]
    ):
        raise ImproperlyConfigured(
            REPLICAS_NEED_POSTGRESQL.format(engine=DATABASES["default"]["ENGINE"].rsplit(".")[-1])
        )
    _options = _replica.setdefault("OPTIONS", {})
    # A standby that does not answer is skipped after this many seconds, not waited for.
    _options.setdefault(
        "connect_timeout", int(os.environ.get("VERSIONS_REPLICA_CONNECT_TIMEOUT", "2"))
    )
    if "prepare_threshold" in DATABASES["default"].get("OPTIONS", {}):
        _options.setdefault(
            "prepare_threshold", DATABASES["default"]["OPTIONS"]["prepare_threshold"]
        )
    _replica["TEST"] = {"MIRROR": "default"}  # tests read the test database through it
    DATABASES[f"replica_{_number}"] = _replica
if _REPLICA_URLS:
    DATABASE_ROUTERS = ["versions.replicas.ReplicaRouter"]
    MIDDLEWARE.append("versions.replicas.ReplicaReads")
# After a write, the writer's reads stay on the primary this many seconds; a replica behind by
# more than VERSIONS_REPLICA_MAX_LAG_SECONDS is skipped; each server process asks each replica
# how far behind it is at most every VERSIONS_REPLICA_CHECK_SECONDS.
VERSIONS_REPLICA_PIN_SECONDS = float(os.environ.get("VERSIONS_REPLICA_PIN_SECONDS", "5"))
VERSIONS_REPLICA_MAX_LAG_SECONDS = float(os.environ.get("VERSIONS_REPLICA_MAX_LAG_SECONDS", "10"))
VERSIONS_REPLICA_CHECK_SECONDS = float(os.environ.get("VERSIONS_REPLICA_CHECK_SECONDS", "1"))

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Axes first: it refuses a sign-in while the account or address is locked, before any password
# is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Sign-in throttling (docs/operations.md): AXES_FAILURE_LIMIT failures for one account from one
# address pause that pair, VERSIONS_SIGNIN_ADDRESS_FAILURE_LIMIT failures from one address
# (whatever the accounts) pause the address, each for AXES_COOLOFF_TIME from the last failed
# try; tries during a pause are refused without being counted, so they do not extend it. An
# account's failures from other addresses never count against a right password from this one.
# The attempts live in the database, so the count holds across gunicorn workers and servers.
AXES_HANDLER = "versions.signin_throttle.PairAndAddressHandler"
AXES_FAILURE_LIMIT = int(os.environ.get("VERSIONS_SIGNIN_FAILURE_LIMIT", "5"))
VERSIONS_SIGNIN_ADDRESS_FAILURE_LIMIT = int(
    os.environ.get("VERSIONS_SIGNIN_ADDRESS_FAILURE_LIMIT", "20")
)
AXES_COOLOFF_TIME = timedelta(minutes=int(os.environ.get("VERSIONS_SIGNIN_LOCK_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address"]  # the handler's order
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
# A success does not wipe the count: an attacker with an account of their own could otherwise
# reset their address's failures between guesses.
AXES_RESET_ON_SUCCESS = False
AXES_ENABLE_ACCESS_FAILURE_LOG = True  # every failure, readable in the admin
AXES_LOCKOUT_CALLABLE = "versions.views.signin.signin_locked"
AXES_CLIENT_IP_CALLABLE = "versions.views.signin.client_address"
AXES_VERBOSE = False
# Behind N reverse proxies that each append to X-Forwarded-For, failures are counted by the
# address the outermost proxy saw; 0 (direct) counts by the connecting address and ignores
# X-Forwarded-For, which any client can write.
VERSIONS_PROXY_COUNT = int(os.environ.get("VERSIONS_PROXY_COUNT", "0"))

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

# Behind HTTPS (VERSIONS_HTTPS=1): cookies only over HTTPS, HSTS, and plain HTTP redirected.
# Behind a proxy that ends TLS, VERSIONS_TRUST_X_FORWARDED_PROTO=1 lets the proxy's
# X-Forwarded-Proto say a request came over HTTPS (only when the proxy sets it on every request).
VERSIONS_HTTPS = os.environ.get("VERSIONS_HTTPS", "0") == "1"
if VERSIONS_HTTPS:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = True
    SECURE_HSTS_SECONDS = int(os.environ.get("VERSIONS_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = os.environ.get("VERSIONS_HSTS_INCLUDE_SUBDOMAINS", "1") == "1"
    # Asking browsers to hard-code HTTPS for the domain is hard to undo: an explicit choice.
    SECURE_HSTS_PRELOAD = os.environ.get("VERSIONS_HSTS_PRELOAD", "0") == "1"
if os.environ.get("VERSIONS_TRUST_X_FORWARDED_PROTO", "0") == "1":
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# The panel's Content-Security-Policy: scripts, styles and frames from this site only, never
# inline (an injected <script> or onclick= does not run), and only this site may frame the
# panel. Django 6 has CSP of its own (SECURE_CSP); on Django 5.2 django-csp sends the same
# policy. Favicons and the icons of the API docs are data: images.
PANEL_CSP = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'", "data:"],
    "frame-ancestors": ["'self'"],
    "form-action": ["'self'"],
    "base-uri": ["'self'"],
    "object-src": ["'none'"],
}
if django.VERSION >= (6, 0):
    SECURE_CSP = PANEL_CSP
else:
    CONTENT_SECURITY_POLICY = {"DIRECTIVES": PANEL_CSP}

# A refused CSRF check explains itself in the panel's words instead of Django's debug page.
CSRF_FAILURE_VIEW = "versions.views._common.csrf_failure"

# Background work (webhooks, email; docs/operations.md#worker) is a task on Django's tasks API,
# queued in the database by default and run by ``manage.py db_worker``. Another backend (Redis,
# RabbitMQ) is a dotted path in VERSIONS_TASKS_BACKEND; the tasks are the same.
TASKS = {
    "default": {
        "BACKEND": os.environ.get("VERSIONS_TASKS_BACKEND", "django_tasks_db.DatabaseBackend"),
    }
}

# Email (notifications to members who opt in, and to a failing webhook's owners): the console in
# development; DJANGO_EMAIL_BACKEND and the usual EMAIL_* variables in production.
EMAIL_BACKEND = os.environ.get(
    "DJANGO_EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend"
)
EMAIL_HOST = os.environ.get("DJANGO_EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("DJANGO_EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("DJANGO_EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("DJANGO_EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = os.environ.get("DJANGO_EMAIL_USE_TLS", "0") == "1"
EMAIL_FILE_PATH = os.environ.get("DJANGO_EMAIL_FILE_PATH", "")
DEFAULT_FROM_EMAIL = os.environ.get("DJANGO_DEFAULT_FROM_EMAIL", "versions@localhost")

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Serve straight from the finders too, so a fresh checkout works without collectstatic.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"production": {"()": "django.utils.log.RequireDebugFalse"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler"},
        # Django prints request errors (a 500's traceback) to the console only with DEBUG on;
        # a production server logs them to stderr too (gunicorn's error log), or a 500 leaves
        # no trace.
        "errors": {"class": "logging.StreamHandler", "filters": ["production"], "level": "ERROR"},
    },
    "loggers": {
        "versions": {"handlers": ["console"], "level": "INFO"},
        "django.request": {"handlers": ["errors"], "level": "ERROR"},
    },
}


def _int_env(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


# Versions limits (docs/operations.md#settings). Read at call time through versions.conf, so tests
# can override them with override_settings.
VERSIONS_MAX_STORED_BYTES = _int_env("VERSIONS_MAX_STORED_BYTES", 1_572_864)
VERSIONS_MAX_WRITE_BYTES = _int_env("VERSIONS_MAX_WRITE_BYTES", 10 * 1024 * 1024)
VERSIONS_POINTS_PER_APP = _int_env("VERSIONS_POINTS_PER_APP", 200)
VERSIONS_TURN_GAP_SECONDS = _int_env("VERSIONS_TURN_GAP_SECONDS", 600)
VERSIONS_RESTORE_SETS_PER_APP = _int_env("VERSIONS_RESTORE_SETS_PER_APP", 50)
VERSIONS_PREVIEW_LINK_HOURS = _int_env("VERSIONS_PREVIEW_LINK_HOURS", 24)
# The live app's answers readable from any origin (Access-Control-Allow-Origin: *, never with
# credentials): its sandboxed pages need it to fetch their own API routes. 0 on a private
# network whose live apps must not be readable by pages of other sites a visitor opens.
VERSIONS_LIVE_CORS = os.environ.get("VERSIONS_LIVE_CORS", "1") != "0"
# The agent API takes sources up to VERSIONS_MAX_WRITE_BYTES inside JSON, where escaping can
# make a body up to six times longer (\u0001); bigger bodies answer 413 (JSON), never a 400 page.
DATA_UPLOAD_MAX_MEMORY_SIZE = VERSIONS_MAX_WRITE_BYTES * 6 + 1_048_576
# Webhooks (docs/operations.md#webhooks): loopback, link-local and private addresses are refused
# unless VERSIONS_WEBHOOK_ALLOW_PRIVATE=1 (a receiver on this machine, in development and tests).
VERSIONS_WEBHOOK_ALLOW_PRIVATE = os.environ.get("VERSIONS_WEBHOOK_ALLOW_PRIVATE", "0") == "1"
# https:// only in production (DJANGO_DEBUG=0): a body and its signature never travel in the clear.
VERSIONS_WEBHOOK_REQUIRE_HTTPS = not DEBUG
VERSIONS_WEBHOOK_TIMEOUT_SECONDS = float(os.environ.get("VERSIONS_WEBHOOK_TIMEOUT_SECONDS", "10"))
VERSIONS_WEBHOOK_RETRY_SECONDS = float(os.environ.get("VERSIONS_WEBHOOK_RETRY_SECONDS", "10"))
VERSIONS_WEBHOOK_RETRY_HOURS = float(os.environ.get("VERSIONS_WEBHOOK_RETRY_HOURS", "24"))
# Workspaces for changes-log rollback: a JSON object {"name": "/path/to/folder"}.
VERSIONS_WORKSPACES: dict[str, str] = json.loads(os.environ.get("VERSIONS_WORKSPACES", "{}"))
