"""Fixtures for channel tests: a fresh SQLite database per test."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'channels.db'}"
