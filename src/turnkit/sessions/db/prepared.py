"""Hot statements run on SQLite's own cursor: compiled once, no SQLAlchemy per call.

Every turn runs a few dozen small statements (bump a counter, append an
event, move a turn), and on SQLite, where one writer goes at a time,
SQLAlchemy's work per execution (about 30 us: parameters, result set-up,
events) was most of a write transaction's time. A :class:`Prepared` wraps
such a statement, built once at import time. Run through a transaction
(``Tx.execute``) on SQLite, it is compiled once per set of parameter names
into its SQL text, parameter order and type conversions, and executed on the DBAPI cursor of
the transaction's connection; the rows come back as named tuples (read as
SQLAlchemy rows are: by attribute or position) behind a result with the
methods turnkit uses. SQLite's errors become SQLAlchemy's (an
``IntegrityError`` is still ``sa.exc.IntegrityError``).

What this does not cover runs through SQLAlchemy as before, decided once per
compiled form: other databases (Postgres has its own round trips to
amortise), expanding ``IN`` parameters and columns with Python-side defaults to fill
in. Types that convert values (a float on the way in, a boolean on the way
out) are converted here as SQLAlchemy would.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import sqlalchemy as sa

__all__ = ["Prepared", "PreparedResult"]

_FALLBACK = object()  # a compiled form this module leaves to SQLAlchemy
Converter = Callable[[Any], Any]  # a type's conversion of one value


class Prepared:
    """A statement built once, run on SQLite's cursor when its compiled form allows."""

    __slots__ = ("_plans", "statement")

    def __init__(self, statement: Any) -> None:
        self.statement = statement
        self._plans: dict[tuple[str, ...], Any] = {}

    def run(self, conn: sa.Connection, params: Mapping[str, Any] | None = None) -> Any:
        """Execute on ``conn`` (in its transaction) with ``params``."""
        params = {} if params is None else params
        if conn.dialect.name != "sqlite":
            return conn.execute(self.statement, params)
        names = tuple(params)
        plan = self._plans.get(names)
        if plan is None:
            plan = self._plans[names] = _plan(self.statement, conn.dialect, names)
        if plan is _FALLBACK:
            return conn.execute(self.statement, params)
        return plan.run(conn, params)


class _Plan:
    """One compiled form: SQL text, where each parameter comes from, the row shape."""

    __slots__ = ("bind_processors", "binds", "row_processors", "row_type", "sql")

    def __init__(
        self,
        sql: str,
        binds: list[tuple[str, Any]],
        bind_processors: list[Converter | None],
        row_processors: list[Converter | None],
    ) -> None:
        self.sql = sql
        self.binds = binds  # (name, the value when params lack it) in the SQL's order
        # (position, conversion) of the parameters whose type converts them (a float)
        self.bind_processors = [(i, p) for i, p in enumerate(bind_processors) if p is not None]
        # one per result column (a boolean's), or None when no column converts
        self.row_processors = row_processors if any(row_processors) else None
        self.row_type: Any = None  # made from the first result's description

    def run(self, conn: sa.Connection, params: Mapping[str, Any]) -> PreparedResult:
        values = [params.get(name, default) for name, default in self.binds]
        for i, process in self.bind_processors:
            values[i] = process(values[i])
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(self.sql, values)
            rows = cursor.fetchall() if cursor.description is not None else None
        except conn.dialect.loaded_dbapi.Error as err:
            raise sa.exc.DBAPIError.instance(
                self.sql, values, err, conn.dialect.loaded_dbapi.Error, dialect=conn.dialect
            ) from err
        finally:
            cursor.close()
        if rows is None:
            return PreparedResult((), cursor.rowcount, cursor.lastrowid)
        if self.row_type is None:
            names = [column[0] for column in cursor.description]
            self.row_type = collections.namedtuple("Row", names, rename=True)  # type: ignore[misc]
        make, processors = self.row_type._make, self.row_processors
        if processors:
            rows = [
                [value if p is None else p(value) for p, value in zip(processors, row, strict=True)]
                for row in rows
            ]
        return PreparedResult([make(row) for row in rows], cursor.rowcount, cursor.lastrowid)


def _plan(statement: Any, dialect: Any, names: tuple[str, ...]) -> _Plan | object:
    compiled = statement.compile(dialect=dialect, column_keys=list(names))
    if compiled.insert_prefetch or compiled.update_prefetch or compiled.positiontup is None:
        return _FALLBACK
    binds: list[tuple[str, Any]] = []
    bind_processors: list[Converter | None] = []
    for name in compiled.positiontup:
        bind = compiled.binds[name]
        if bind.expanding or (name not in names and (bind.required or bind.callable)):
            return _FALLBACK  # SQLAlchemy expands it, calls it, or says what is missing
        binds.append((name, bind.value))
        bind_processors.append(bind.type.dialect_impl(dialect).bind_processor(dialect))
    columns = getattr(compiled, "_result_columns", None) or ()
    row_processors = [c.type.dialect_impl(dialect).result_processor(dialect, None) for c in columns]
    return _Plan(compiled.string, binds, bind_processors, row_processors)


class PreparedResult:
    """The rows of one :class:`Prepared` execution (fetched), read as SQLAlchemy's results."""

    __slots__ = ("_rows", "lastrowid", "rowcount")

    def __init__(self, rows: Sequence[Any], rowcount: int, lastrowid: int | None) -> None:
        self._rows = rows
        self.rowcount = rowcount
        self.lastrowid = lastrowid

    @property
    def inserted_primary_key(self) -> tuple[int | None]:
        return (self.lastrowid,)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)

    def all(self) -> list[Any]:
        return list(self._rows)

    fetchall = all

    def first(self) -> Any:
        return self._rows[0] if self._rows else None

    def one_or_none(self) -> Any:
        if len(self._rows) > 1:
            raise sa.exc.MultipleResultsFound(
                "Multiple rows were found when one or none was required"
            )
        return self.first()

    def one(self) -> Any:
        if len(self._rows) != 1:
            if self._rows:
                raise sa.exc.MultipleResultsFound(
                    "Multiple rows were found when exactly one was required"
                )
            raise sa.exc.NoResultFound("No row was found when one was required")
        return self._rows[0]

    def scalar(self) -> Any:
        return self._rows[0][0] if self._rows else None

    def scalar_one(self) -> Any:
        return self.one()[0]

    def scalar_one_or_none(self) -> Any:
        row = self.one_or_none()
        return None if row is None else row[0]

    def scalars(self) -> _Scalars:
        return _Scalars([row[0] for row in self._rows])


class _Scalars(list[Any]):
    """The first column of each row (``result.scalars()``)."""

    def all(self) -> list[Any]:
        return list(self)

    def first(self) -> Any:
        return self[0] if self else None
