"""schemathesis against our own OpenAPI schema: no 500 for any generated input.

Runs in-process through the WSGI application (as Django's test client does, without closing
the test transaction's connection between requests), with a valid bearer token. Half of the
generated cases are steered onto real data (the app, valid collections, existing set and point
ids) so that writes, deletes and restores are exercised, not only 404s.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest
import schemathesis
from api_helpers import make_token
from django.contrib.auth import get_user_model
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode

from versions import services
from versions.models import COLLECTIONS, ChangeSet, RestorePoint

# Per operation and generation mode: reads are cheap to cover, writes have more to explore.
EXAMPLES = {"GET": 12, "HEAD": 6, "PUT": 60, "DELETE": 30, "POST": 30, "PATCH": 20}


@pytest.fixture
def wsgi_app():
    """The site's WSGI app, keeping the test's database connection open between requests."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def seeded(app):
    get_user_model().objects.create_superuser("rvaid", email="", password=None)
    token = make_token("rvaid", "quotes")
    for collection, name, source in [
        ("pltf_page", "index", "<h1>hi</h1>\n"),
        ("pltf_stylesheet", "App", "body{}\n"),
    ]:
        services.write_artifact(
            app, collection, name, source, requested_by="s", tool="t", run_id="seed"
        )
    seed = ChangeSet.objects.get(app=app, run_id="seed")
    services.mark_release(seed.id)  # so a restore to release has work, and answers a set id
    services.write_artifact(
        app, "pltf_page", "index", "<h1>changed</h1>\n", requested_by="a", tool="t", run_id="turn"
    )
    return token


def steer():
    """A function moving a generated case onto real data, keeping its generated body/query.

    Generated path parameters arrive URL-encoded; the steered name is encoded the same way.
    """

    def apply(args):
        case, collection, name, set_id, point_id = args
        params = case.path_parameters
        if "slug" in params:
            params["slug"] = "quotes"
        if "collection" in params:
            params["collection"] = collection
        if "name" in params:
            params["name"] = quote(name, safe="")
        if "set_id" in params:
            params["set_id"] = set_id
        if "point_id" in params:
            params["point_id"] = point_id
        return case

    return apply


@pytest.mark.django_db
@pytest.mark.slow
def test_no_generated_request_gets_a_server_error(wsgi_app, seeded):
    schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", wsgi_app)
    headers = {"Authorization": f"Bearer {seeded}"}
    sets = list(ChangeSet.objects.values_list("id", flat=True))
    points = list(RestorePoint.objects.values_list("id", flat=True))
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 9
    statuses: dict[int, int] = {}

    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            generated = operation.as_strategy(generation_mode=mode)
            steered = st.tuples(
                generated,
                st.sampled_from(COLLECTIONS),
                st.sampled_from(["index", "App", "new-page"]) | st.text(min_size=1, max_size=20),
                st.sampled_from(sets),
                st.sampled_from(points),
            ).map(steer())

            @given(case=generated | steered)
            @settings(
                max_examples=EXAMPLES[operation.method.upper()],
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def check(case):
                response = case.call(headers=headers)
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                case.validate_response(response, checks=[not_a_server_error])
                # A HEAD answer has no body (RFC 9110): its status is what it says.
                has_body = case.method.upper() != "HEAD"
                if 400 <= response.status_code < 500 and response.status_code != 404 and has_body:
                    body = response.json()
                    assert set(body) >= {"error", "message"}, body

            check()

    # The run reached past authentication into real work, not only refusals.
    assert statuses.get(200, 0) > 0, statuses
    assert statuses.get(404, 0) > 0, statuses
    assert sum(n for code, n in statuses.items() if code in (400, 409, 412, 413, 422)) > 0


@pytest.mark.django_db
@pytest.mark.slow
def test_the_stateful_phase_follows_links_with_change_set_ids_and_finds_no_server_error(
    wsgi_app, seeded
):
    """schemathesis' stateful phase: the document's links (docs/api.md#fuzzing) carry the
    change set and point ids a write, a delete, a list or a restore answers into the operations
    that take them, so sequences of real calls run (write → describe → restore → receipt)."""
    schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", wsgi_app)
    headers = {"Authorization": f"Bearer {seeded}"}
    calls: list[tuple[str, str, int]] = []

    points = list(RestorePoint.objects.values_list("id", flat=True))

    class Workflow(schema.as_state_machine()):  # type: ignore[misc]
        # Each scenario starts from the seeded data (hypothesis replays scenarios and wants
        # the same answers each time).
        def setup(self):
            self.savepoint = transaction.savepoint()

        def teardown(self):
            transaction.savepoint_rollback(self.savepoint)

        def before_call(self, case):
            params = case.path_parameters or {}
            if "slug" in params:
                params["slug"] = "quotes"
            # The scenario's first step (schemathesis starts from a POST) on a real point; the
            # ids of the steps after it come from the answers, through the document's links.
            if params.get("point_id") and params["point_id"] not in points:
                params["point_id"] = points[len(calls) % len(points)]

        def get_call_kwargs(self, case):
            return {"headers": headers}

        def after_call(self, response, case):
            calls.append((case.method.upper(), case.operation.path, response.status_code))

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            case.validate_response(response, checks=[not_a_server_error])

    Workflow.run(
        settings=settings(
            max_examples=60,
            stateful_step_count=8,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
    )
    linked = {
        (method, path)
        for method, path, status in calls
        if "{set_id}" in path and status in (200, 409)
    }
    # Ids flowed: some operation on a set answered for a real set, not a 404.
    assert len(linked) >= 3, sorted(set(calls))
