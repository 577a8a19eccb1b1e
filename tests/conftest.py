"""Shared fixtures: an app to write to, and database-kind markers."""

from __future__ import annotations

import pytest
from django.db import connection

from versions.models import App


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from django.conf import settings

    on_postgres = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    skip_pg = pytest.mark.skip(reason="needs PostgreSQL: run with DATABASE_URL (make test does)")
    for item in items:
        if "postgres" in item.keywords and not on_postgres:
            item.add_marker(skip_pg)


@pytest.fixture
def app(db) -> App:
    return App.objects.create(slug="quotes", name="Quote approvals")


@pytest.fixture
def on_postgres() -> bool:
    return connection.vendor == "postgresql"
