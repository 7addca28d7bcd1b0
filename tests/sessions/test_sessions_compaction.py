"""Compaction in sessions: a recorded step, its message stored in place, bounded requests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import turnkit
from sessions.compaction_crash_app import BilledModel
from sessions.test_sessions_crash import Child
from turnkit import Compaction, Message, default_convert_to_llm
from turnkit.agent.compaction import DEFAULT_INSTRUCTIONS, conversation_view
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

LINE = "x" * 40  # 10 tokens by the characters / 4 estimate
CRASH_APP = Path(__file__).with_name("compaction_crash_app.py")


def talker(
    db_url: str, replies: list[Any], compaction: Compaction, **model_options: Any
) -> tuple[App, ScriptedModel]:
    app = App(db_url, fire_schedules=False)
    model = ScriptedModel(replies, **model_options)

    @turnkit.tool
    def lookup(q: str) -> str:
        """Look something up."""
        return f"{LINE} found {q}"

    @app.agent("talker", model=model, tools=[lookup], compaction=compaction)
    def render() -> str:
        return "Talk."

    return app, model


async def run_turns(app: App, session_id: str, count: int, start: int = 0) -> list[Any]:
    turns = []
    for i in range(start, start + count):
        receipt = await app.send(session_id, text=f"{LINE} q{i}")
        turns.append(await app.wait(receipt.turn_id, timeout=10))
    return turns


async def test_a_turn_compacts_with_the_summariser_and_stores_the_summary_in_place(
    any_db_url: str,
) -> None:
    summariser = ScriptedModel(["They asked two questions about x."])
    compaction = Compaction(max_tokens=45, keep_last=2, model=summariser)
    app, model = talker(any_db_url, [f"{LINE} a{i}" for i in range(3)], compaction)
    async with app:
        session = await app.create_session("talker")
        turns = await run_turns(app, session.id, 3)
        assert [t.status for t in turns] == ["completed"] * 3
        history = await app.history(session.id)
        events = await app.events(session.id)

    # The summariser got the older messages as a transcript, with the default instructions.
    (request,) = summariser.requests
    assert request.system == DEFAULT_INSTRUCTIONS
    transcript = request.messages[0].text
    assert f"User: {LINE} q0" in transcript and f"Assistant: {LINE} a0" in transcript
    assert f"User: {LINE} q1" in transcript and "q2" not in transcript and "a1" not in transcript
    # The summary stands before the two messages it kept; every message is still there.
    texts = [m.text for m in history]
    assert texts == [
        f"{LINE} q0",
        f"{LINE} a0",
        f"{LINE} q1",
        "They asked two questions about x.",
        f"{LINE} a1",
        f"{LINE} q2",
        f"{LINE} a2",
    ]
    summary = history[3]
    assert summary.type == "compaction" and summary.role == "user"
    assert summary.metadata["replaced"] == 3
    assert summary.metadata["tokens_after"] < summary.metadata["tokens_before"]
    # The model saw the summary and what it kept, as default_convert_to_llm gives them.
    assert list(model.requests[2].messages) == default_convert_to_llm(
        conversation_view(history[:-1])
    )
    # Events: the summary's message, then history.compacted, then the reply.
    third = [e for e in events if e.turn_id == turns[2].id]
    assert [e.type for e in third] == [
        "input.received",
        "turn.started",
        "message",
        "message",
        "history.compacted",
        "message",
        "turn.completed",
    ]
    assert Message.from_dict(third[3].data["message"]) == summary
    assert third[4].data == dict(summary.metadata)


async def test_a_session_compacts_again_from_its_latest_summary(any_db_url: str) -> None:
    summariser = ScriptedModel([f"Summary {i}." for i in range(10)])
    compaction = Compaction(max_tokens=45, keep_last=2, model=summariser)
    app, model = talker(any_db_url, [f"{LINE} a{i}" for i in range(12)], compaction)
    async with app:
        session = await app.create_session("talker")
        turns = await run_turns(app, session.id, 12)
        history = await app.history(session.id)
        events = await app.events(session.id)
    assert all(t.status == "completed" for t in turns)
    assert max(len(r.messages) for r in model.requests) <= 4  # bounded however long it goes
    summaries = [m for m in history if m.type == "compaction"]
    assert len(summaries) == len(summariser.requests) >= 3
    assert [m.text for m in summaries] == [f"Summary {i}." for i in range(len(summaries))]
    later = summariser.requests[1].messages[0].text
    assert "Summary of the conversation before this point: Summary 0." in later
    replaced = [m.metadata["replaced"] for m in summaries]
    assert replaced == sorted(replaced) and replaced[-1] > replaced[0]
    standard = [m.text for m in history if m.type == "standard"]
    assert standard == [x for i in range(12) for x in (f"{LINE} q{i}", f"{LINE} a{i}")]
    for summary in summaries:  # each stands right before the two messages it kept
        index = history.index(summary)
        assert [m.type for m in history[index + 1 : index + 3]] == ["standard"] * 2
    assert [e.type for e in events].count("history.compacted") == len(summaries)
    assert list(model.requests[-1].messages) == default_convert_to_llm(
        conversation_view(history[:-1])
    )


async def test_a_compaction_within_a_tool_loop_keeps_the_call_with_its_result(
    db_url: str,
) -> None:
    call = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "c1", "name": "lookup", "input": {"q": "z"}}],
    }
    summariser = ScriptedModel(["Earlier: q0 and a0."])
    compaction = Compaction(max_tokens=40, keep_last=2, model=summariser)
    app, model = talker(db_url, [f"{LINE} a0", call, f"{LINE} done"], compaction)
    async with app:
        session = await app.create_session("talker")
        turns = await run_turns(app, session.id, 2)
        history = await app.history(session.id)
    assert [t.status for t in turns] == ["completed"] * 2
    # The second turn's second model call compacted: the call and its result stay together.
    assert [(m.type, m.role) for m in history] == [
        ("standard", "user"),
        ("standard", "assistant"),
        ("standard", "user"),
        ("compaction", "user"),
        ("standard", "assistant"),
        ("standard", "user"),
        ("standard", "assistant"),
    ]
    assert history[3].metadata["replaced"] == 3
    assert [len(r.messages) for r in model.requests] == [1, 3, 3]


@pytest.mark.parametrize("failure", ["raises", "says nothing"])
async def test_a_failed_summary_goes_on_uncompacted_when_it_fits_the_window(
    db_url: str, failure: str, caplog: pytest.LogCaptureFixture
) -> None:
    summariser = ScriptedModel([_broken if failure == "raises" else "  "])
    compaction = Compaction(max_tokens=45, keep_last=2, model=summariser)
    app, model = talker(db_url, [f"{LINE} a{i}" for i in range(3)], compaction)
    async with app:
        session = await app.create_session("talker")
        turns = await run_turns(app, session.id, 3)
        history = await app.history(session.id)
        events = await app.events(session.id)
    assert [t.status for t in turns] == ["completed"] * 3
    assert len(summariser.requests) == 1
    assert [m.type for m in history] == ["standard"] * 6
    assert len(model.requests[2].messages) == 5  # all of it
    assert "history.compacted" not in [e.type for e in events]
    assert "compaction skipped" in caplog.text


@pytest.mark.parametrize("failure", ["raises", "says nothing"])
async def test_a_failed_summary_over_the_window_fails_the_turn_with_nothing_half_written(
    db_url: str, failure: str
) -> None:
    summariser = ScriptedModel([_broken if failure == "raises" else ""])
    compaction = Compaction(max_tokens=45, keep_last=2, model=summariser)
    replies = [f"{LINE} a{i}" for i in range(3)]
    app, model = talker(db_url, replies, compaction, context_window=50)
    async with app:
        session = await app.create_session("talker")
        turns = await run_turns(app, session.id, 3)
        history = await app.history(session.id)
        events = await app.events(session.id)
        later = await run_turns(app, session.id, 1, start=3)  # the session goes on: fails again
    failed = turns[2]
    assert failed.status == "failed" and failed.reason == "context_too_long"
    assert "more than the context window of scripted:scripted (50)" in failed.error
    assert "compacting it failed" in failed.error
    assert len(model.requests) == 2  # the model was not called for the third turn
    assert [m.text for m in history][-1] == f"{LINE} q2"  # its input only: no summary, no reply
    assert [m.type for m in history] == ["standard"] * 5
    third = [e.type for e in events if e.turn_id == failed.id]
    assert third == ["input.received", "turn.started", "message", "turn.failed"]
    assert events[-1].data["reason"] == "context_too_long"
    assert later[0].reason == "context_too_long"


def _broken(request: object) -> str:
    raise RuntimeError("the summariser is down")


# -- the provider's count, across turns ----------------------------------------------------


def billed(db_url: str, model: ScriptedModel, summariser: ScriptedModel) -> App:
    app = App(db_url, fire_schedules=False)
    compaction = Compaction(max_tokens=100, keep_last=2, model=summariser)
    app.agent("talker", model=model, compaction=compaction)(lambda: "Talk.")
    return app


async def test_a_turn_estimates_from_the_count_reported_for_the_last_reply(
    any_db_url: str,
) -> None:
    summariser = ScriptedModel(["They asked about x."])
    model = BilledModel([f"{LINE} a0", f"{LINE} a1"], input_tokens=500)
    app = billed(any_db_url, model, summariser)
    async with app:
        session = await app.create_session("talker")
        turns = await run_turns(app, session.id, 2)
        history = await app.history(session.id)
    assert [t.status for t in turns] == ["completed"] * 2
    # By characters / 4 the second turn is 33 tokens; the provider counted 500 for
    # the first reply's request: 500 + 22 for that reply and the new input (86 / 4).
    (summary,) = [m for m in history if m.type == "compaction"]
    assert summary.metadata["tokens_before"] == 500 + 22 and summary.metadata["replaced"] == 1
    assert [m.text for m in history] == [
        f"{LINE} q0",
        "They asked about x.",
        f"{LINE} a0",
        f"{LINE} q1",
        f"{LINE} a1",
    ]
    (request,) = summariser.requests
    assert f"User: {LINE} q0" in request.messages[0].text and "a0" not in request.messages[0].text


async def test_a_count_taken_before_a_later_compaction_is_not_used(db_url: str) -> None:
    def down(request: object) -> str:
        raise RuntimeError("the provider is down")

    summariser = ScriptedModel(["They asked about x.", "Again."])
    model = BilledModel([f"{LINE} a0", down, f"{LINE} a2"], input_tokens=500)
    app = billed(db_url, model, summariser)
    async with app:
        session = await app.create_session("talker")
        turns = await run_turns(app, session.id, 3)
        history = await app.history(session.id)
    # The second turn compacted, then its model call failed: the summary stays.
    assert [t.status for t in turns] == ["completed", "failed", "completed"]
    # The third turn's latest reply (a0) was counted before that summary replaced
    # q0: its 500 tokens no longer apply, and characters / 4 is under max_tokens.
    assert len(summariser.requests) == 1
    assert [m.type for m in history].count("compaction") == 1
    assert list(model.requests[-1].messages) == default_convert_to_llm(
        conversation_view(history[:-1])
    )


# -- across a crash ----------------------------------------------------------------------


def killed_after_summarising(tmp_path: Path, mode: str) -> tuple[Path, str]:
    """A child (the crash tests' runner) that summarised, then blocked in the model
    call, killed with -9: its database and the turn it was running."""
    db = tmp_path / "crash.db"
    child = Child(db, mode, script=CRASH_APP)
    lines = {child.line(), child.line()}  # the turn id and "model blocked", in either order
    child.kill()
    assert "model blocked" in lines
    (turn_id,) = json.loads(next(line for line in lines if line.startswith("[")))
    assert db.with_suffix(".marker").read_text() == "summarised\n"
    return db, turn_id


async def test_a_compaction_made_before_a_kill_is_not_made_again(tmp_path: Path) -> None:
    from sessions.compaction_crash_app import build

    db, turn_id = killed_after_summarising(tmp_path, "compact")

    summariser = ScriptedModel([])  # a second summary would fail the test: none is left
    model = ScriptedModel(["after the restart"])
    app = build(str(db), model, summariser, executor_id="child")
    async with app:
        turn = await app.wait(turn_id, timeout=30)
        history = await app.history(turn.session_id)
        events = await app.events(turn.session_id)
    assert turn.status == "completed" and turn.output == "after the restart"
    assert summariser.requests == []
    assert db.with_suffix(".marker").read_text() == "summarised\n"
    (summary,) = [m for m in history if m.type == "compaction"]
    assert summary.text == "They talked about x." and history.index(summary) == 3
    assert [e.type for e in events].count("history.compacted") == 1
    assert [e.type for e in events if e.turn_id == turn_id].count("turn.started") == 1
    (request,) = model.requests  # the replayed turn's model call got the summary
    assert list(request.messages) == default_convert_to_llm(conversation_view(history[:-1]))


async def test_a_compaction_the_reported_count_called_for_is_replayed_after_a_kill(
    tmp_path: Path,
) -> None:
    from sessions.compaction_crash_app import build

    db, turn_id = killed_after_summarising(tmp_path, "billed")

    summariser = ScriptedModel([])  # a second summary would fail the test: none is left
    model = ScriptedModel(["after the restart"])
    app = build(str(db), model, summariser, "billed", executor_id="child")
    async with app:
        turn = await app.wait(turn_id, timeout=30)
        history = await app.history(turn.session_id)
    # The replay read the first reply's count from its step, as the first run had
    # it, so it compacted again from the recorded summary instead of going on whole.
    assert turn.status == "completed" and summariser.requests == []
    (summary,) = [m for m in history if m.type == "compaction"]
    assert history.index(summary) == 1 and summary.metadata["tokens_before"] == 522
    (request,) = model.requests
    assert list(request.messages) == default_convert_to_llm(conversation_view(history[:-1]))


# -- the local model as summariser -------------------------------------------------------


async def test_the_local_model_summarises_a_long_session(db_url: str) -> None:
    from turnkit.providers.local import LocalModel

    facts = [
        "My name is Ada and I live in Paris.",
        "I keep two cats, Tom and Mia.",
        "I work as a baker and start at five in the morning.",
    ]
    compaction = Compaction(max_tokens=300, keep_last=2, model=LocalModel())
    app, model = talker(db_url, ["Noted."] * 3 + ["Tom and Mia."], compaction)
    async with app:
        session = await app.create_session("talker")
        for text in [*(f"{fact} {'Please remember it. ' * 20}" for fact in facts), "Cats?"]:
            turn = await app.wait((await app.send(session.id, text=text)).turn_id, timeout=25)
            assert turn.status == "completed", turn.error
        history = await app.history(session.id)
        events = await app.events(session.id)
    # The third turn compacted (about 345 tokens): its first two messages and the second fact.
    (summary,) = [m for m in history if m.type == "compaction"]
    assert summary.text.strip() and history.index(summary) == 3
    assert summary.metadata["replaced"] == 3
    assert summary.metadata["tokens_after"] < summary.metadata["tokens_before"]
    assert [m.text for m in history[-5::2]] == ["Noted.", "Noted.", "Tom and Mia."]
    assert [e.type for e in events].count("history.compacted") == 1
    # The last turn's request starts with the local model's summary, then what it kept.
    first = model.requests[-1].messages[0].text
    assert summary.text in first and "<summary>" in first
    assert len(model.requests[-1].messages) == 5
