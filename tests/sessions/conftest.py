"""Fixtures for session tests: an App on a fresh SQLite file (or Postgres) per test."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'sessions.db'}"


def _postgres_admin_url() -> str | None:
    """A running local PostgreSQL (started here as root when it is installed but stopped)."""
    url = os.environ.get("TURNKIT_TEST_POSTGRES_URL")
    if url:
        return url
    if shutil.which("pg_lsclusters") is None or os.geteuid() != 0:
        return None
    listed = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True, check=False)
    clusters = [line.split()[:2] for line in listed.stdout.splitlines() if line.strip()]
    if not clusters:
        return None
    version, name = clusters[0]
    subprocess.run(["pg_ctlcluster", version, name, "start"], capture_output=True, check=False)
    subprocess.run(
        ["su", "postgres", "-c", "psql -qc \"ALTER USER postgres PASSWORD 'postgres'\""],
        capture_output=True,
        check=False,
    )
    return "postgresql://postgres:postgres@127.0.0.1:5432/postgres"


@pytest.fixture(scope="session")
def postgres_admin_url() -> str:
    url = _postgres_admin_url()
    if url is None:
        pytest.fail(
            "PostgreSQL is needed: install postgresql-15 (as .ci/run does) or set "
            "TURNKIT_TEST_POSTGRES_URL"
        )
    return url


@pytest.fixture
def postgres_url(postgres_admin_url: str) -> Iterator[str]:
    """A fresh database on the local PostgreSQL, dropped afterwards."""
    import sqlalchemy as sa

    name = f"turnkit_test_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(
        postgres_admin_url.replace("postgresql://", "postgresql+psycopg://"),
        isolation_level="AUTOCOMMIT",
    )
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    base = postgres_admin_url.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def any_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The test runs twice: on a SQLite file, then on a fresh Postgres database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    return request.getfixturevalue("postgres_url")
