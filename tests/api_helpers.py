"""Helpers for the agent API tests: users, tokens and a JSON client with a bearer token."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from versions.services import (
    create_agent_token,
)

API = "/api/v1"


def make_user(username: str = "agent-owner", *, can_restore: bool = False, **extra: Any) -> Any:
    user = get_user_model().objects.create_user(username=username, password=None, **extra)
    if can_restore:
        user.user_permissions.add(
            Permission.objects.get(codename="restore_changeset", content_type__app_label="versions")
        )
    return user


def make_token(username: str, *slugs: str) -> str:
    token, _row = create_agent_token(username, list(slugs))
    return token


class ApiClient:
    """A Django test client that sends JSON and a bearer token."""

    def __init__(self, token: str | None) -> None:
        self.client = Client()
        self.token = token

    def _headers(self, headers: dict[str, str] | None) -> dict[str, str]:
        out = dict(headers or {})
        if self.token is not None:
            out.setdefault("Authorization", f"Bearer {self.token}")
        return out

    def get(self, path: str, headers: dict[str, str] | None = None, **query: Any) -> Any:
        return self.client.get(API + path, query or None, headers=self._headers(headers))

    def put(self, path: str, body: Any, headers: dict[str, str] | None = None) -> Any:
        data = body if isinstance(body, (str, bytes)) else json.dumps(body)
        return self.client.put(
            API + path, data, content_type="application/json", headers=self._headers(headers)
        )

    def post(self, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
        data = body if isinstance(body, (str, bytes)) else json.dumps(body or {})
        return self.client.post(
            API + path, data, content_type="application/json", headers=self._headers(headers)
        )

    def delete(self, path: str, headers: dict[str, str] | None = None, **query: Any) -> Any:
        suffix = ""
        if query:
            from urllib.parse import urlencode

            suffix = "?" + urlencode(query)
        return self.client.delete(API + path + suffix, headers=self._headers(headers))
