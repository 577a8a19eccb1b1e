"""The agent API (docs/api.md#routes): ``endpoints`` (the routes of the API), ``schemas`` (request
and response shapes), ``errors`` (the one error → status table)."""

from versions.api.endpoints import api, api_home, json_method_not_allowed, no_such_endpoint

__all__ = ["api", "api_home", "json_method_not_allowed", "no_such_endpoint"]
