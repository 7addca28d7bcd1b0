"""Fixtures for channel tests: a fresh SQLite database per test (or Postgres)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessions.conftest import any_db_url, postgres_admin_url, postgres_url

__all__ = ["any_db_url", "postgres_admin_url", "postgres_url"]  # Postgres, as sessions tests get it


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'channels.db'}"
