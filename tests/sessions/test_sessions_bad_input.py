"""Bad input stores nothing and says what was wrong."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest

from turnkit.sessions import (
    App,
    InvalidInputError,
    SessionEndedError,
    SessionNotFoundError,
    UnknownAgentError,
)
from turnkit.testing import ScriptedModel


def snapshot(db: Path) -> dict[str, list[tuple]]:
    """Every row of every table (turnkit's and DBOS's), for before/after comparison."""
    conn = sqlite3.connect(db)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {n: sorted(map(repr, conn.execute(f'SELECT * FROM "{n}"'))) for n in names}
    finally:
        conn.close()


cycle: list = []
cycle.append(cycle)

BAD_SENDS = [
    ({}, InvalidInputError, "text: an input needs text or a payload"),
    ({"text": ""}, InvalidInputError, "needs text or a payload"),
    ({"text": 42}, InvalidInputError, "text: must be a string"),
    ({"text": "\ud800"}, InvalidInputError, "text: is not valid Unicode"),
    ({"payload": {1, 2}}, InvalidInputError, "payload: not plain data"),
    ({"payload": b"raw"}, InvalidInputError, "payload: not plain data"),
    ({"payload": {"x": math.nan}}, InvalidInputError, r"payload\.x: not plain data"),
    ({"payload": {"items": [1, object()]}}, InvalidInputError, r"payload\.items\[1\]"),
    ({"payload": {1: "a"}}, InvalidInputError, "payload"),
    ({"payload": cycle}, InvalidInputError, "payload"),
    ({"payload": "x" * (256 * 1024)}, InvalidInputError, "over the limit of 262144 bytes"),
    ({"text": "hi", "source": "robot"}, InvalidInputError, "source: must be one of"),
    ({"text": "hi", "idempotency_key": 7}, InvalidInputError, "idempotency_key"),
    ({"text": "hi", "idempotency_key": ""}, InvalidInputError, "idempotency_key"),
    ({"text": "hi", "channel": {"provider": "irc"}}, InvalidInputError, "channel.provider"),
    ({"text": "hi", "channel": {"nope": 1}}, InvalidInputError, "channel"),
    ({"text": "hi", "answers": 3}, InvalidInputError, "answers"),
    # what Postgres cannot store is refused on SQLite too
    ({"text": "a\x00"}, InvalidInputError, r"text: holds U\+0000 \(NUL\) at character 1"),
    ({"text": "hi", "idempotency_key": "\x00"}, InvalidInputError, "idempotency_key: holds U"),
    ({"text": "hi", "answers": "q" * 65}, InvalidInputError, "answers: is 65 characters long"),
]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "bad.db"


def make_app(db: Path) -> App:
    app = App(f"sqlite:///{db}")

    @app.agent("echo", model=ScriptedModel(["ok"] * 5))
    def echo() -> str:
        return ""

    return app


@pytest.mark.parametrize(("options", "error", "message"), BAD_SENDS)
async def test_a_bad_send_raises_and_stores_nothing(
    db: Path, options: dict, error: type[Exception], message: str
) -> None:
    app = make_app(db)
    async with app:
        session = await app.create_session("echo")
        before = snapshot(db)
        with pytest.raises(error, match=message):
            await app.send(session.id, **options)
        assert snapshot(db) == before


async def test_a_payload_just_under_the_limit_is_accepted(db: Path) -> None:
    app = make_app(db)
    async with app:
        session = await app.create_session("echo")
        receipt = await app.send(session.id, payload="x" * (256 * 1024 - 2))
        turn = await app.wait(receipt.turn_id, timeout=10)
        assert turn.input.payload == "x" * (256 * 1024 - 2) and turn.input.text is None


async def test_sends_to_unknown_or_ended_sessions_store_nothing(db: Path) -> None:
    app = make_app(db)
    async with app:
        session = await app.create_session("echo")
        await app.end_session(session.id)
        before = snapshot(db)
        with pytest.raises(SessionNotFoundError, match="ses_nope"):
            await app.send("ses_nope", text="hi")
        with pytest.raises(SessionEndedError, match="has ended"):
            await app.send(session.id, text="hi")
        assert snapshot(db) == before


async def test_bad_sessions_store_nothing(db: Path) -> None:
    app = make_app(db)
    async with app:
        before = snapshot(db)
        with pytest.raises(UnknownAgentError, match="unknown agent 'ghost'"):
            await app.create_session("ghost")
        with pytest.raises(InvalidInputError, match="data: must be a JSON object"):
            await app.create_session("echo", data=[1])
        with pytest.raises(InvalidInputError, match=r"data\.when: not plain data"):
            await app.create_session("echo", data={"when": object()})
        with pytest.raises(InvalidInputError, match="key"):
            await app.create_session("echo", key=5)  # type: ignore[arg-type]
        assert snapshot(db) == before


def test_agent_definitions_are_checked_when_defined(db: Path) -> None:
    app = make_app(db)
    with pytest.raises(ValueError, match="already defined"):
        app.agent("echo", model=ScriptedModel([]))(lambda: "")
    with pytest.raises(ValueError, match="max_turns"):
        app.agent("x", max_turns=0)
    with pytest.raises(ValueError, match="non-empty string"):
        app.agent("")


async def test_a_render_returning_a_non_string_fails_the_turn_only(db: Path) -> None:
    app = App(f"sqlite:///{db}")

    @app.agent("odd", model=ScriptedModel(["never"]))
    def odd() -> object:
        return 42

    async with app:
        session = await app.create_session("odd")
        turn = await app.wait((await app.send(session.id, text="x")).turn_id, timeout=10)
        assert turn.status == "failed" and turn.reason == "render_error"
        assert "must return the system text" in turn.error


async def test_use_tool_with_an_unknown_name_fails_the_turn_with_the_known_names(db: Path) -> None:
    app = App(f"sqlite:///{db}")

    @app.agent("picky", model=ScriptedModel(["never"]))
    def picky() -> str:
        import turnkit

        turnkit.use_tool("teleport")
        return ""

    async with app:
        session = await app.create_session("picky")
        turn = await app.wait((await app.send(session.id, text="x")).turn_id, timeout=10)
        assert turn.reason == "render_error" and "'teleport'" in turn.error and "ask" in turn.error
