"""list_sessions (newest first, filters, paging) and fork_session (boundaries, keys, copies)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

import turnkit
from turnkit.messages import Message, TextBlock, ThinkingBlock
from turnkit.sessions import App, ForkedFrom, InvalidInputError, SessionNotFoundError
from turnkit.sessions.db.schema import SCHEMA_VERSION
from turnkit.testing import ScriptedModel

CALL = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "call_1", "name": "lookup", "input": {"q": "a"}}],
}


def tool_app(db_url: str, replies: list) -> tuple[App, ScriptedModel]:
    """An agent with one tool, and a second agent to filter by."""
    app = App(db_url, fire_schedules=False)
    model = ScriptedModel(replies)

    @turnkit.tool
    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    @app.agent("helper", model=model, tools=[lookup])
    def helper() -> str:
        return "Help."

    @app.agent("other", model=ScriptedModel(["other"] * 10))
    def other() -> str:
        return "Other."

    return app, model


async def talked(app: App, texts: list[str]) -> str:
    """A helper session that ran one turn per text; its id."""
    session = await app.create_session("helper")
    for text in texts:
        await talked_more(app, session.id, text)
    return session.id


async def talked_more(app: App, session_id: str, text: str) -> None:
    """One more completed turn in the session."""
    turn = await app.wait((await app.send(session_id, text=text)).turn_id, timeout=10)
    assert turn.status == "completed", turn.error


# -- list_sessions ---------------------------------------------------------------


async def test_paging_through_120_sessions_gives_each_once_newest_first(any_db_url: str) -> None:
    app, _ = tool_app(any_db_url, [])
    async with app:
        created = [(await app.create_session("helper")).id for _ in range(120)]
        pages, before = [], None
        while True:
            page = await app.list_sessions(limit=50, before=before)
            if not page:
                break
            pages.append([s.id for s in page])
            before = page[-1].id
        seen = [session_id for page in pages for session_id in page]
        assert [len(page) for page in pages] == [50, 50, 20]
        assert seen == created[::-1]  # none missing, none twice, newest first
        stamps = [s.created_at for s in await app.list_sessions(limit=500)]
        assert stamps == sorted(stamps, reverse=True)
        assert [s.id for s in app.list_sessions_sync(limit=3)] == created[:-4:-1]


async def test_list_sessions_filters_by_agent_and_status(any_db_url: str) -> None:
    release = asyncio.Event()

    async def held(request: object) -> str:
        await release.wait()
        return "done"

    app = App(any_db_url, fire_schedules=False)
    ask = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "a1", "name": "ask", "input": {"question": "?"}}],
    }

    @app.agent("helper", model=ScriptedModel([ask, held]))
    def helper() -> str:
        turnkit.use_tool("ask")
        return "Help."

    @app.agent("other", model=ScriptedModel([]))
    def other() -> str:
        return "Other."

    async with app:
        idle = await app.create_session("helper")
        asking = await app.create_session("helper")
        await app.wait((await app.send(asking.id, text="ask me")).turn_id, timeout=10)
        running = await app.create_session("helper")
        await app.send(running.id, text="take your time")
        ended = await app.end_session((await app.create_session("helper")).id)
        elsewhere = await app.create_session("other")

        async def ids(**filters: object) -> list[str]:
            return [s.id for s in await app.list_sessions(**filters)]

        assert await ids(status="idle", agent="helper") == [idle.id]
        assert await ids(status="awaiting_input") == [asking.id]
        assert await ids(status="ended") == [ended.id]
        assert await ids(status="idle") == [elsewhere.id, idle.id]
        assert await ids(status="running") == [running.id]  # its turn queued or running
        assert (await app.list_sessions(status="running"))[0].status == "running"
        assert await ids(agent="other") == [elsewhere.id]
        assert len(await ids(agent="helper")) == 4
        release.set()


async def test_last_activity_is_created_at_until_an_event_then_the_latest_event(
    any_db_url: str,
) -> None:
    app, _ = tool_app(any_db_url, ["one", "two"])
    async with app:
        fresh = await app.create_session("helper")
        assert fresh.last_activity_at == fresh.created_at
        assert fresh.last_activity_at.utcoffset() == timedelta(0)
        source = await talked(app, ["a"])
        after_one = await app.get_session(source)
        events = await app.events(source)
        assert after_one.last_activity_at == events[-1].timestamp > after_one.created_at
        await talked_more(app, source, "b")
        after_two = await app.get_session(source)
        assert after_two.last_activity_at == (await app.events(source))[-1].timestamp
        assert after_two.last_activity_at > after_one.last_activity_at
        listed = {s.id: s.last_activity_at for s in await app.list_sessions()}
        assert listed == {source: after_two.last_activity_at, fresh.id: fresh.created_at}
        fork = await app.fork_session(source)  # copies messages, not events
        assert fork.last_activity_at == fork.created_at
        assert (await app.get_session(fresh.id)).last_activity_at == fresh.created_at


async def test_an_event_from_a_clock_behind_keeps_the_session_time_going_forward(
    any_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from turnkit.sessions.db import store
    from turnkit.sessions.model.events import ScheduleSkipped

    app, _ = tool_app(any_db_url, ["one"])
    async with app:
        source = await talked(app, ["a"])
        before = await app.get_session(source)
        # A transaction that read the clock, then waited for the session's row lock.
        monkeypatch.setattr(store, "now", lambda: before.created_at.timestamp() - 60)
        with app.runtime.store.write() as tx:
            tx.emit(source, ScheduleSkipped("nightly", "2026-01-01T00:00:00+00:00"))
        monkeypatch.undo()
        events = await app.events(source)
        assert events[-1].timestamp == events[-2].timestamp == before.last_activity_at
        assert (await app.get_session(source)).last_activity_at == before.last_activity_at


@pytest.mark.parametrize(
    ("filters", "field", "says"),
    [
        ({"status": "busy"}, "status", "idle, running, awaiting_input, ended"),
        ({"status": 3}, "status", "got 3"),
        ({"agent": "nobody"}, "agent", "known: helper, other"),
        ({"agent": ""}, "agent", "no agent named ''"),
        ({"limit": 0}, "limit", "from 1 to 500"),
        ({"limit": 501}, "limit", "got 501"),
        ({"limit": True}, "limit", "got True"),
        ({"before": ""}, "before", "non-empty string"),
        ({"before": "ses_missing"}, "before", "no session 'ses_missing'"),
    ],
)
async def test_a_bad_list_filter_is_refused_naming_it(
    db_url: str, filters: dict, field: str, says: str
) -> None:
    app, _ = tool_app(db_url, [])
    async with app:
        with pytest.raises(InvalidInputError, match=says) as caught:
            await app.list_sessions(**filters)
        assert caught.value.field == field and str(caught.value).startswith(f"{field}: ")


# -- fork_session ------------------------------------------------------------------


async def test_fork_at_each_kind_of_boundary(any_db_url: str) -> None:
    # history: 0 user, 1 assistant call, 2 user result, 3 assistant, 4 user, 5 assistant
    app, _ = tool_app(any_db_url, [CALL, "first answer", "second answer"])
    async with app:
        source = await talked(app, ["look it up", "thanks"])
        history = await app.history(source)
        assert [m.role for m in history] == ["user", "assistant"] * 3

        everything = await app.fork_session(source)
        assert everything.forked_from == ForkedFrom(source, 6) and everything.agent == "helper"
        assert await app.history(everything.id) == history
        empty = await app.fork_session(source, at=0)
        assert await app.history(empty.id) == [] and empty.forked_from.at == 0
        for at in (1, 3, 4, 5):  # before a reply, after a result, between turns, mid-exchange
            fork = await app.fork_session(source, at=at)
            assert await app.history(fork.id) == history[:at]
            assert fork.forked_from == ForkedFrom(source, at) and fork.status == "idle"

        with pytest.raises(InvalidInputError) as caught:
            await app.fork_session(source, at=2)
        assert caught.value.field == "at"
        assert "2 would separate a tool call (message 1) from its result (message 2)" in str(
            caught.value
        )
        assert await app.history(source) == history  # the source is unchanged


async def test_a_fork_of_a_compacted_session_keeps_the_summary_in_place(db_url: str) -> None:
    line = "x" * 40  # 10 tokens by the characters / 4 estimate
    summariser = ScriptedModel(["They asked two questions about x."])
    model = ScriptedModel([f"{line} a{i}" for i in range(3)] + ["from the fork"])
    app = App(db_url, fire_schedules=False)
    compaction = turnkit.Compaction(max_tokens=45, keep_last=2, model=summariser)
    app.agent("talker", model=model, compaction=compaction)(lambda: "Talk.")
    async with app:
        source = (await app.create_session("talker")).id
        for i in range(3):
            turn = await app.wait((await app.send(source, text=f"{line} q{i}")).turn_id, 10)
            assert turn.status == "completed", turn.error
        history = await app.history(source)
        assert [m.type for m in history].index("compaction") == 3  # q0 a0 q1 S a1 q2 a2

        whole = await app.fork_session(source)
        copied = await app.history(whole.id)
        assert copied == history and copied[3].metadata == history[3].metadata
        assert await app.history((await app.fork_session(source, at=3)).id) == history[:3]
        assert await app.history((await app.fork_session(source, at=4)).id) == history[:4]

        turn = await app.wait((await app.send(whole.id, text="and now?")).turn_id, 10)
        assert turn.output == "from the fork"
        # The fork's model call sees the copied summary and what follows it, not q0.
        sent = [m.text for m in model.requests[-1].messages]
        assert "They asked two questions about x." in sent[0] and "<summary>" in sent[0]
        assert sent[1:] == [f"{line} a1", f"{line} q2", f"{line} a2", "and now?"]
        assert len(summariser.requests) == 1  # the fork did not summarise again
        assert len(await app.history(source)) == 7


async def test_fork_refuses_to_split_thinking_from_its_reply(db_url: str) -> None:
    app, _ = tool_app(db_url, [])
    async with app:
        source = (await app.create_session("helper")).id
        stored = [
            Message.user("Why?"),
            Message("assistant", (ThinkingBlock("let me think", signature="s"),)),
            Message("assistant", (TextBlock("Because."),)),
        ]
        store_messages(app, source, stored)  # as a provider that sends thinking apart would
        with pytest.raises(InvalidInputError, match="separate thinking \\(message 1\\) from"):
            await app.fork_session(source, at=2)
        assert await app.history((await app.fork_session(source, at=1)).id) == stored[:1]


async def test_a_fork_runs_on_from_its_copy_and_leaves_the_source_alone(db_url: str) -> None:
    app, model = tool_app(db_url, [CALL, "first answer", "from the fork"])
    async with app:
        source = await talked(app, ["look it up"])
        source_events = await app.events(source)
        fork = await app.fork_session(source, key="branch-1")
        turn = await app.wait((await app.send(fork.id, text="and now?")).turn_id, timeout=10)
        assert turn.output == "from the fork"
        sent = [m.text for m in model.requests[-1].messages]
        assert sent == ["look it up", "", "", "first answer", "and now?"]
        assert len(await app.history(source)) == 4
        assert [m.text for m in await app.history(fork.id)][-2:] == ["and now?", "from the fork"]
        assert (await app.get_session(fork.id)).forked_from == ForkedFrom(source, 4)
        assert await app.events(source) == source_events  # nothing new there
        assert not [e for e in await app.events(fork.id) if e.turn_id != turn.id]


async def test_a_fork_key_gives_the_same_fork_again_and_no_other_session(db_url: str) -> None:
    app, _ = tool_app(db_url, ["one", "two"])
    async with app:
        source = await talked(app, ["a"])
        other = await talked(app, ["b"])
        fork, created = await app.open_fork(source, at=2, key="k")
        again, created_again = await app.open_fork(source, at=2, key="k")
        assert created and not created_again and again.id == fork.id
        assert (await app.fork_session(source, key="k")).id == fork.id  # at=None: any at
        taken = await app.create_session("helper", key="taken")
        for session_id, at, key in [(source, 1, "k"), (other, None, "k"), (source, 2, "taken")]:
            with pytest.raises(InvalidInputError, match="already names session") as caught:
                await app.fork_session(session_id, at=at, key=key)
            assert caught.value.field == "key"
        assert taken.forked_from is None
        assert len(await app.list_sessions(agent="helper")) == 4  # no fork was added


async def test_fork_refuses_bad_arguments_and_unknown_sessions(db_url: str) -> None:
    app, _ = tool_app(db_url, ["one"])
    async with app:
        source = await talked(app, ["a"])
        with pytest.raises(SessionNotFoundError):
            await app.fork_session("ses_missing")
        for at, says in [(3, "is 3, but session .* has 2 messages"), (-1, ">= 0"), (True, "True")]:
            with pytest.raises(InvalidInputError, match=says) as caught:
                await app.fork_session(source, at=at)
            assert caught.value.field == "at"
        with pytest.raises(InvalidInputError) as caught:
            await app.fork_session(source, key="")
        assert caught.value.field == "key"
        with pytest.raises(InvalidInputError) as caught:
            await app.fork_session("")
        assert caught.value.field == "session_id"
        assert len(await app.list_sessions()) == 1
        assert app.fork_session_sync(source, 2).forked_from == ForkedFrom(source, 2)


async def test_a_version_2_database_is_upgraded_in_place(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    app, _ = tool_app(url, ["one"])
    async with app:
        source = await talked(app, ["a"])
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # back to what version 2 wrote
        conn.exec_driver_sql("DROP INDEX ix_turnkit_sessions_created")
        conn.exec_driver_sql("ALTER TABLE turnkit_sessions DROP COLUMN forked_from")
        conn.exec_driver_sql("ALTER TABLE turnkit_messages DROP COLUMN before_position")
        # and what versions 7, 8 and 10 added, so each step runs again
        conn.exec_driver_sql("DROP INDEX ix_turnkit_live_done")
        conn.exec_driver_sql("DROP INDEX ix_turnkit_inputs_steering")
        conn.exec_driver_sql("ALTER TABLE turnkit_live DROP COLUMN done_at")
        conn.exec_driver_sql("ALTER TABLE turnkit_sessions DROP COLUMN last_activity_at")
        conn.exec_driver_sql("UPDATE turnkit_meta SET value = '2' WHERE key = 'schema_version'")
    engine.dispose()
    app, _ = tool_app(url, [])
    async with app:
        assert [m.text for m in await app.history(source)] == ["a", "one"]
        fork = await app.fork_session(source)
        assert [s.id for s in await app.list_sessions()] == [fork.id, source]
    with sa.create_engine(url).connect() as conn:
        version = conn.exec_driver_sql(
            "SELECT value FROM turnkit_meta WHERE key = 'schema_version'"
        ).scalar()
        indexes = conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'index'")
        names = set(indexes.scalars())
    assert version == str(SCHEMA_VERSION)  # and on through every later version
    assert {"ix_turnkit_live_done", "ix_turnkit_inputs_steering"} <= names


async def test_a_version_7_database_gets_last_activity_from_its_events(any_db_url: str) -> None:
    app, _ = tool_app(any_db_url, ["one"])
    async with app:
        talked_to = await talked(app, ["a"])
        last_event = (await app.events(talked_to))[-1].timestamp
        quiet = await app.create_session("helper")
    engine = sa.create_engine(any_db_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:  # back to what version 7 wrote
        conn.exec_driver_sql("ALTER TABLE turnkit_sessions DROP COLUMN last_activity_at")
        conn.exec_driver_sql("UPDATE turnkit_meta SET value = '7' WHERE key = 'schema_version'")
    engine.dispose()
    app, _ = tool_app(any_db_url, [])
    async with app:
        assert (await app.get_session(talked_to)).last_activity_at == last_event
        assert (await app.get_session(quiet.id)).last_activity_at == quiet.created_at


def store_messages(app: App, session_id: str, messages: list[Message]) -> None:
    """Messages stored in a session as a turn stores them (for shapes no scripted turn makes)."""
    import json

    from turnkit.sessions.db import schema as t

    with app.runtime.store.write() as tx:
        for index, message in enumerate(messages):
            tx.execute(
                t.messages.insert().values(
                    session_id=session_id,
                    position=tx.bump(session_id, "message_seq"),
                    turn_id="imported",
                    turn_index=index,
                    message=json.dumps(message.to_dict()),
                )
            )
