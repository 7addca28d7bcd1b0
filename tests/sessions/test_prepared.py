"""Prepared statements on SQLite's cursor give what SQLAlchemy gives, errors included."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from turnkit.sessions.db import prepared as p
from turnkit.sessions.db.engines import Databases
from turnkit.sessions.db.prepared import Prepared

metadata = sa.MetaData()
items = sa.Table(
    "items",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(20), nullable=False, unique=True),
    sa.Column("price", sa.Float),
    sa.Column("done", sa.Boolean, nullable=False),
    sa.Column("kind", sa.String(10), default="plain"),  # a Python-side default
)
c = items.c
INSERT = items.insert()
BY_NAME = sa.select(items).where(c.name == sa.bindparam("name"))
BUMP = (
    items.update()
    .where(c.name == sa.bindparam("n"))
    .values(price=c.price + 1)
    .returning(c.price, c.done)
)
CHEAP = sa.select(c.name).where(c.price < sa.bindparam("top")).order_by(c.name).limit(2)
EITHER = sa.select(c.name).where(sa.or_(c.name == "a", c.name == "b")).order_by(c.name)
IN_LIST = sa.select(c.name).where(c.name.in_(["a", "c"])).order_by(c.name)


@pytest.fixture
def db(tmp_path: Path) -> Databases:
    databases = Databases(f"sqlite:///{tmp_path / 'p.db'}")
    metadata.create_all(databases.write)
    with databases.write.begin() as conn:
        for name, price, done in [("a", 1.0, True), ("b", 2.5, False), ("c", 9.0, False)]:
            row = {"name": name, "price": price, "done": done, "kind": "plain"}
            conn.execute(INSERT, row)
    return databases


def both(db: Databases, statement: object, params: dict[str, object]) -> tuple[list, list]:
    """The rows through Prepared and through SQLAlchemy, each in a transaction rolled back."""
    out = []
    for run in (lambda conn: Prepared(statement).run(conn, params), None):
        with db.write.connect() as conn, conn.begin() as tx:
            result = run(conn) if run else conn.execute(statement, params)  # type: ignore[arg-type]
            out.append([tuple(row) for row in result])
            tx.rollback()
    return out[0], out[1]


@pytest.mark.parametrize(
    ("statement", "params"),
    [
        (BY_NAME, {"name": "b"}),
        (BUMP, {"n": "a"}),
        (CHEAP, {"top": 5}),  # a float bound from an int, a literal LIMIT
        (EITHER, {}),
        (IN_LIST, {}),  # an expanding IN: left to SQLAlchemy
    ],
)
def test_rows_are_those_sqlalchemy_returns(
    db: Databases, statement: object, params: dict[str, object]
) -> None:
    fast, slow = both(db, statement, params)
    assert fast == slow and fast


def test_rows_read_by_name_and_booleans_come_back_as_booleans(db: Databases) -> None:
    with db.write.begin() as conn:
        row = Prepared(BY_NAME).run(conn, {"name": "a"}).one()
        bumped = Prepared(BUMP).run(conn, {"n": "a"}).first()
    assert (row.name, row.price, row.done) == ("a", 1.0, True)
    assert row.done is True and bumped.done is True and bumped.price == 2.0


def test_an_insert_gives_its_row_id_and_a_missing_default_is_left_to_sqlalchemy(
    db: Databases,
) -> None:
    insert = Prepared(INSERT)
    with db.write.begin() as conn:
        full = insert.run(conn, {"name": "d", "price": 1.5, "done": False, "kind": "x"})
        defaulted = insert.run(conn, {"name": "e", "price": 1.5, "done": False})
        kinds = conn.execute(sa.select(c.name, c.kind).where(c.name.in_(["d", "e"]))).all()
    assert full.inserted_primary_key == (4,) and full.rowcount == 1
    assert defaulted.inserted_primary_key == (5,)
    assert sorted(kinds) == [("d", "x"), ("e", "plain")]  # the default was filled in
    plans = insert._plans
    assert plans[("name", "price", "done")] is p._FALLBACK
    assert plans[("name", "price", "done", "kind")] is not p._FALLBACK


def test_sqlite_errors_are_sqlalchemys(db: Databases) -> None:
    row = {"name": "a", "price": 1, "done": True, "kind": "k"}
    with (
        pytest.raises(sa.exc.IntegrityError, match=r"UNIQUE constraint failed: items\.name"),
        db.write.begin() as conn,
    ):
        Prepared(INSERT).run(conn, row)


def test_a_missing_parameter_is_refused_as_sqlalchemy_refuses_it(db: Databases) -> None:
    with (
        pytest.raises(sa.exc.StatementError, match="bind parameter 'name'"),
        db.write.begin() as conn,
    ):
        Prepared(BY_NAME).run(conn, {})


def test_result_methods(db: Databases) -> None:
    with db.write.begin() as conn:
        cheap = Prepared(CHEAP).run(conn, {"top": 100})
        none = Prepared(BY_NAME).run(conn, {"name": "zz"})
        assert cheap.all() == [("a",), ("b",)] and cheap.scalars().all() == ["a", "b"]
        assert cheap.scalar() == "a" and cheap.first() == ("a",)
        assert none.first() is None and none.scalar() is None and none.one_or_none() is None
        with pytest.raises(sa.exc.NoResultFound):
            none.one()
        with pytest.raises(sa.exc.MultipleResultsFound):
            cheap.one_or_none()


def test_on_postgres_sqlalchemy_runs_it(postgres_url: str) -> None:
    databases = Databases(postgres_url)
    with databases.write.connect() as conn, conn.begin() as tx:
        value = Prepared(sa.select(sa.literal(3).label("n"))).run(conn).scalar_one()
        assert isinstance(Prepared(sa.select(sa.literal(1))).run(conn), sa.CursorResult)
        tx.rollback()
    assert value == 3
