"""Several servers sharing one PostgreSQL database (docs/architecture.md#environments,
docs/architecture.md#live-app): a promotion or a rollback is served by every server at its next
request, route tables included, while agent writes to the draft through one server change nothing
the others serve."""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from test_several_servers import request, servers  # noqa: F401 - the two-gunicorn fixture

from versions.models import API_ROUTE, PAGE, App
from versions.services import (
    promote,
    rollback_production,
    write_artifact,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True), pytest.mark.slow]


def spec(v):
    return json.dumps({"method": "GET", "path": "/quotes/{id}", "body": {"id": "{id}", "v": v}})


def test_a_promotion_and_a_rollback_reach_the_other_server_at_its_next_request(servers):  # noqa: F811
    one, other = servers
    app = App.objects.create(slug="quotes", name="Quotes")
    write_artifact(app, API_ROUTE, "quote", spec("v1"), requested_by="a", tool="t")
    write_artifact(app, PAGE, "index", "<h1>v1</h1>", requested_by="a", tool="t")
    first = promote(app, by="rvaid").deployment_id
    get_user_model().objects.create_user("owner", is_superuser=True)
    out = io.StringIO()
    call_command("create_agent_token", "owner", "--app", "quotes", stdout=out)
    token = out.getvalue().strip().splitlines()[-1]

    def served(base):
        status, body, headers = request(f"{base}/apps/quotes/api/quotes/7")
        assert headers.get("Content-Security-Policy") == "sandbox allow-scripts allow-forms"
        return status, (json.loads(body) if status == 200 else None)

    def page(base):
        return request(f"{base}/apps/quotes/")[1]

    # Both servers load production's route table now.
    assert served(one) == (200, {"id": "7", "v": "v1"})
    assert served(other) == (200, {"id": "7", "v": "v1"})

    # The agent writes the draft through one server: no server serves it.
    status, body, _ = request(
        f"{one}/api/v1/apps/quotes/artifacts/pltf_api_route/quote",
        method="PUT",
        body={"source": spec("v2"), "run_id": "turn"},
        token=token,
    )
    assert status in (200, 201), body
    request(
        f"{one}/api/v1/apps/quotes/artifacts/pltf_page/index",
        method="PUT",
        body={"source": "<h1>v2</h1>", "run_id": "turn"},
        token=token,
    )
    assert served(other) == (200, {"id": "7", "v": "v1"})
    assert served(one) == (200, {"id": "7", "v": "v1"})
    assert page(other) == b"<h1>v1</h1>"

    # Promoted (from a third process): both servers serve it at their next request.
    promote(app, by="rvaid")
    assert served(other) == (200, {"id": "7", "v": "v2"})
    assert served(one) == (200, {"id": "7", "v": "v2"})
    assert page(other) == b"<h1>v2</h1>"

    # Rolled back: both serve the first deployment again.
    rollback_production(app, by="rvaid", to=first)
    assert served(one) == (200, {"id": "7", "v": "v1"})
    assert served(other) == (200, {"id": "7", "v": "v1"})
    assert page(one) == b"<h1>v1</h1>"
