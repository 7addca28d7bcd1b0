"""Database URLs and engines: SQLite (WAL, immediate write transactions) or Postgres."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

__all__ = ["DEFAULT_SQLITE_PATH", "Databases", "resolve_url"]

DEFAULT_SQLITE_PATH = Path(".turnkit") / "turnkit.db"


def resolve_url(database_url: str | None) -> str:
    """The database URL in force: the argument, ``$TURNKIT_DATABASE_URL``, or SQLite.

    The default is ``sqlite:///.turnkit/turnkit.db`` relative to the working
    directory; its folder is created here.
    """
    url = database_url or os.environ.get("TURNKIT_DATABASE_URL") or ""
    if not url:
        DEFAULT_SQLITE_PATH.parent.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{DEFAULT_SQLITE_PATH}"
    if not isinstance(url, str):
        raise TypeError(f"database_url must be a string, got {type(url).__name__}")
    scheme = url.split(":", 1)[0].lower()
    if scheme == "sqlite":
        path = url.removeprefix("sqlite:///")
        if path and path != url and not path.startswith(":memory:"):
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        if ":memory:" in url or url in ("sqlite://", "sqlite:///"):
            raise ValueError(
                "database_url: an in-memory SQLite database cannot be shared by the "
                "engine's connections; give a file path (sqlite:///path/to/file.db)"
            )
        return url
    if scheme in ("postgresql", "postgres") or scheme.startswith("postgresql+"):
        return url
    raise ValueError(
        f"database_url must be sqlite:///path or postgresql://user:password@host/db, "
        f"got scheme {scheme!r}"
    )


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def _sqlalchemy_url(url: str) -> str:
    """Postgres through psycopg 3 (what DBOS uses), whatever the URL's driver spelling."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


class Databases:
    """The SQLAlchemy engines turnkit uses on one database.

    ``write`` begins every transaction with the write lock taken (SQLite
    ``BEGIN IMMEDIATE``: a read-then-write transaction can never fail halfway
    on a lock upgrade); ``read`` runs plain snapshot reads; ``dbos`` is
    handed to DBOS for its system tables, with the same pragmas.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.sqlite = is_sqlite(url)
        target = _sqlalchemy_url(url)
        if self.sqlite:
            self.write = _sqlite_engine(target, "BEGIN IMMEDIATE")
            self.read = _sqlite_engine(target, "BEGIN")
            self.dbos = _sqlite_dbos_engine(target)
        else:
            self.write = sa.create_engine(target, pool_pre_ping=True, pool_size=10)
            self.read = self.write
            self.dbos = None

    def dispose(self) -> None:
        for engine in {self.write, self.read, self.dbos} - {None}:
            engine.dispose()  # type: ignore[union-attr]


def _pragmas(dbapi_conn: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _sqlite_engine(url: str, begin: str) -> sa.Engine:
    engine = sa.create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # SQLAlchemy's BEGIN below, not pysqlite's
        _pragmas(dbapi_conn)

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: sa.Connection) -> None:
        if begin == "BEGIN":
            conn.exec_driver_sql(begin)
        else:
            _begin_immediate(conn.connection.dbapi_connection)

    return engine


def _begin_immediate(dbapi_conn: Any) -> None:
    """``BEGIN IMMEDIATE``, retried every half millisecond while another writer holds the lock.

    SQLite's own busy handler sleeps in growing steps (up to 100 ms): under
    contention with DBOS's writes that, not the work, would set the latency.
    """
    cursor = dbapi_conn.cursor()
    deadline = time.monotonic() + 30
    try:
        cursor.execute("PRAGMA busy_timeout=0")
        while True:
            try:
                cursor.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as err:
                if "locked" not in str(err) and "busy" not in str(err):
                    raise
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.0005)
    finally:
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()


def _sqlite_dbos_engine(url: str) -> sa.Engine:
    """An engine for DBOS's system tables: DBOS's own settings, plus WAL and NORMAL sync."""
    engine = sa.create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = "IMMEDIATE"
        _pragmas(dbapi_conn)
        dbapi_conn.execute("PRAGMA foreign_keys=ON")

    return engine
