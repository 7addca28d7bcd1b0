"""The HTTP API over an App: ``create_app(app)`` and what ``turnkit serve`` runs (SPEC 8)."""

from __future__ import annotations

from turnkit.server.app import check_bind, create_app, is_loopback, resolve_api_key

__all__ = ["check_bind", "create_app", "is_loopback", "resolve_api_key"]
