"""gunicorn settings for Versions (README, "Production"): ``gunicorn -c gunicorn.conf.py``.

Requests gunicorn cannot read are answered by gunicorn itself, before Django: those answers are
RFC 9457 problem details like every other API error (versions_site/gunicorn_errors.py)."""

from versions_site import gunicorn_errors

wsgi_app = "versions_site.wsgi"
bind = "127.0.0.1:8000"
workers = 4
# The longest request line and header gunicorn accepts (its maximums); longer ones get a 414 or
# 431 in problem+json.
limit_request_line = 8190
limit_request_field_size = 8190
limit_request_fields = 100

gunicorn_errors.install()


def post_worker_init(worker: object) -> None:
    """Import pyarrow as each worker starts (about 0.25 s), so that a worker's first big diff
    does not wait for it (versions/linecodes.py)."""
    from versions import linecodes

    linecodes.available()
