"""The database: default location, URLs, schema versions, Postgres, other processes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from sessions.crash_app import build
from sessions.test_sessions_crash import Child
from turnkit.sessions import App
from turnkit.sessions.db.schema import SCHEMA_VERSION
from turnkit.testing import ScriptedModel


def echo_app(url: str | None, **options: object) -> App:
    app = App(url, **options)

    @app.agent("echo", model=ScriptedModel([lambda r: f"echo:{r.last_text}"] * 50))
    def echo() -> str:
        return "Echo."

    return app


async def run_two_turns(app: App) -> list[str]:
    async with app:
        session = await app.create_session("echo", key="k")
        receipts = await asyncio.gather(
            app.send(session.id, text="a"), app.send(session.id, text="b")
        )
        for receipt in receipts:
            assert (await app.wait(receipt.turn_id, timeout=30)).status == "completed"
        events = await app.events(session.id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        return [m.text for m in await app.history(session.id)]


async def test_default_database_is_sqlite_under_dot_turnkit(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TURNKIT_DATABASE_URL", raising=False)
    texts = await run_two_turns(echo_app(None))
    assert (tmp_path / ".turnkit" / "turnkit.db").is_file()
    assert sorted(texts) == ["a", "b", "echo:a", "echo:b"]


async def test_database_url_comes_from_the_environment(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "nested" / "env.db"
    monkeypatch.setenv("TURNKIT_DATABASE_URL", f"sqlite:///{target}")
    await run_two_turns(echo_app(None))
    assert target.is_file()


def test_unusable_database_urls_are_refused(tmp_path: Path) -> None:
    for url, message in [
        ("mysql://x/y", "scheme 'mysql'"),
        ("sqlite:///:memory:", "in-memory"),
    ]:
        app = echo_app(url)
        with pytest.raises(ValueError, match=message):
            app.__enter__()


async def test_postgres_runs_the_same_sessions(postgres_url: str) -> None:
    texts = await run_two_turns(echo_app(postgres_url))
    assert texts[1::2] == [f"echo:{t}" for t in texts[0::2]]
    again = echo_app(postgres_url)
    async with again:
        session = await again.create_session("echo", key="k")
        assert len(await again.history(session.id)) == 4  # durable across restarts


async def test_a_database_from_a_newer_turnkit_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'v.db'}"
    await run_two_turns(echo_app(url))
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"UPDATE turnkit_meta SET value = '{SCHEMA_VERSION + 1}' WHERE key = 'schema_version'"
        )
    engine.dispose()
    with pytest.raises(RuntimeError, match="newer than this turnkit"):
        async with echo_app(url):
            pass


async def test_follow_sees_events_written_by_another_process(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    marker = db.with_suffix(".marker")
    app = build(str(db), marker, False, ScriptedModel([]), block=False, workers=False)
    async with app:
        child = Child(db, "sends")
        turn_ids = json.loads(child.line())
        try:
            session_id = (await app.wait(turn_ids[0], timeout=30)).session_id
            done: list[str] = []
            async for event in app.follow(session_id):
                if event.type == "turn.completed":
                    done.append(event.turn_id)
                if len(done) == len(turn_ids):
                    break
            assert done == turn_ids
        finally:
            child.kill()


async def test_two_apps_starting_at_once_on_a_fresh_postgres_database(postgres_url: str) -> None:
    import sqlalchemy as sa

    from turnkit.sessions.db.engines import Databases as Engines
    from turnkit.sessions.db.schema import migrate

    engines = [Engines(postgres_url) for _ in range(4)]
    try:
        versions = await asyncio.gather(*(asyncio.to_thread(migrate, e.write) for e in engines))
        assert versions == [SCHEMA_VERSION] * 4
        with engines[0].write.connect() as conn:
            rows = conn.execute(sa.text("SELECT count(*) FROM turnkit_meta")).scalar()
        assert rows == 1
    finally:
        for e in engines:
            e.dispose()


async def test_concurrent_sends_with_one_key_store_one_input_on_postgres(postgres_url: str) -> None:
    app = echo_app(postgres_url)
    async with app:
        session = await app.create_session("echo")
        receipts = await asyncio.gather(
            *(app.send(session.id, text="once", idempotency_key="same") for _ in range(8))
        )
        assert len({r.input_id for r in receipts}) == 1
        assert sum(not r.duplicate for r in receipts) == 1
        received = [e for e in await app.events(session.id) if e.type == "input.received"]
        assert len(received) == 1


async def test_the_seq_a_process_has_seen_is_what_it_committed_and_never_goes_back(
    tmp_path: Path,
) -> None:
    # Live deltas stand after it (runtime/live_publish.py): a seq rolled back, or
    # an older one committed late by another thread, must not move it.
    from turnkit.sessions.model.events import ScheduleSkipped

    app = echo_app(f"sqlite:///{tmp_path / 'seqs.db'}")
    async with app:
        session = await app.create_session("echo")
        receipt = await app.send(session.id, text="a")
        await app.wait(receipt.turn_id, timeout=30)
        store = app.runtime.store
        last = (await app.events(session.id))[-1].seq
        assert store.seen_seqs.get(session.id) == last
        with pytest.raises(RuntimeError), store.write() as tx:
            tx.emit(session.id, ScheduleSkipped("nightly", "busy"))
            raise RuntimeError("rolled back")
        assert store.seen_seqs.get(session.id) == last
        store.seen_seqs.committed({session.id: last - 1})
        assert store.seen_seqs.get(session.id) == last
        assert store.seen_seqs.get("no-such-session") is None


def test_the_seen_seqs_forget_the_least_recently_written_session_first() -> None:
    from turnkit.sessions.db.seen_seqs import SeenSeqs

    seqs = SeenSeqs(limit=2)
    seqs.committed({"a": 3, "b": 5})
    seqs.committed({"a": 4})
    seqs.committed({"c": 1})
    assert (seqs.get("a"), seqs.get("b"), seqs.get("c")) == (4, None, 1)
