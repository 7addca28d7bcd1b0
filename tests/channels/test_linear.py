"""Linear agent sessions: signed webhooks become inputs; replies are agent activities."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest

import turnkit
from fakes.linear import FakeLinear
from turnkit.channels import LinearInputPayload
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

from ._support import (
    LINEAR_SECRET,
    TAMPERINGS,
    ask_message,
    count_rows,
    linear_created,
    linear_prompted,
    linear_request,
    linear_signed,
    tampered,
)

ASK = ask_message("Which region should I check first?", "EU", "US")
LOOKUP = {
    "role": "assistant",
    "content": [
        {"type": "tool_use", "id": "call_1", "name": "lookup_logs", "input": {"region": "eu"}}
    ],
}


def lookup_logs(region: str) -> str:
    """Read the payment logs of a region."""
    return f"3 card declines in {region}"


async def wait_forever(reason: str) -> str:
    """A long job (it waits until the test releases it)."""
    await asyncio.Event().wait()
    return reason


def linear_app(
    db_url: str, fake: FakeLinear, replies: list[Any], token: str | None = None
) -> tuple[App, ScriptedModel]:
    app = App(db_url)
    model = ScriptedModel(replies)

    @app.agent("triage", model=model, tools=[lookup_logs, wait_forever])
    def triage() -> str:
        turnkit.use_tool("ask")
        return "Triage the issue."

    app.linear("triage", LINEAR_SECRET, token or fake.api_key, api_url=fake.api_url)
    return app, model


async def deliver(app: App, payload: dict[str, Any], **options: Any) -> Any:
    headers, body = linear_request(payload, **options)
    return await app.handle_channel("linear", headers, body)


async def next_event(app: App, session_id: str, kind: str) -> Any:
    async with asyncio.timeout(15):
        async for event in app.follow(session_id):
            if event.type == kind:
                return event
    raise AssertionError(f"no {kind} event")


def contents(fake: FakeLinear, count: int) -> list[tuple[str, str]]:
    activities = fake.wait_for_activities(count)
    return [(a.content["type"], a.content.get("body") or a.content["action"]) for a in activities]


async def test_created_posts_a_thought_at_once_then_the_response(db_url: str) -> None:
    with FakeLinear(sessions=("as-1",)) as fake:
        app, _ = linear_app(db_url, fake, [LOOKUP, "EU cards are declined by the 3DS step."])
        async with app:
            answer = await deliver(app, linear_created())
            assert answer.status == 200 and answer.body["duplicate"] is False
            done = await asyncio.to_thread(contents, fake, 3)
            completed = await next_event(app, answer.body["session_id"], "turn.completed")
            turn_input = await app.input(completed.turn_id)
            session = await app.get_session(answer.body["session_id"])
        assert done == [
            ("thought", "Looking into it."),
            ("action", "lookup_logs"),
            ("response", "EU cards are declined by the 3DS step."),
        ]
        action = fake.activities[1].content
        assert action == {
            "type": "action",
            "action": "lookup_logs",
            "parameter": '{"region":"eu"}',
            "result": "3 card declines in eu",
        }
        assert {a.agent_session_id for a in fake.activities} == {"as-1"}
        assert fake.requests[0].headers["authorization"] == "Bearer lin_oauth_test"
        assert session.key == "linear:as-1"
        assert turn_input.source == "channel" and turn_input.text == "@agent please look at this"
        assert turn_input.channel.to_dict() == {
            "provider": "linear",
            "connection_id": "app-user-1",
            "workspace_id": "org-1",
            "conversation_id": "as-1",
            "user_id": "user-9",
        }
        assert turn_input.provider_time == datetime(2026, 11, 30, 23, 59, tzinfo=UTC)
        payload = LinearInputPayload.from_payload(turn_input.payload)
        assert payload.issue["identifier"] == "ENG-7"
        assert [c["id"] for c in payload.comments] == ["com-1", "com-2"]
        assert payload.guidance == [{"body": "Answer in English.", "origin": {"type": "workspace"}}]
        assert payload.session == {
            "id": "as-1",
            "status": "pending",
            "creator": {"id": "user-9", "name": "Ada"},
        }
        assert payload.origin == {
            "parent": {"id": "iss-0", "identifier": "ENG-1", "title": "Payments"},
            "created_by_agent": True,
        }


async def test_an_ask_becomes_an_elicitation_and_the_prompt_answers_it(db_url: str) -> None:
    with FakeLinear(sessions=("as-1",)) as fake:
        app, model = linear_app(db_url, fake, [ASK, "Checking EU first."])
        async with app:
            created = await deliver(app, linear_created())
            asked = await asyncio.to_thread(contents, fake, 2)
            assert asked[1] == ("elicitation", "Which region should I check first?\n- EU\n- US")
            session = await app.get_session(created.body["session_id"])
            assert session.status == "awaiting_input"
            # the prompted activity names another parent: origin stays as read at the start
            prompt = linear_prompted("eu", "act-1")
            prompt["agentSession"]["issue"] = dict(prompt["agentSession"]["issue"], parent=None)
            answered = await deliver(app, prompt)
            replies = await asyncio.to_thread(contents, fake, 3)
            turn = await app.wait(
                (await app.events(created.body["session_id"]))[-1].turn_id or "", timeout=10
            )
        assert answered.body["session_id"] == created.body["session_id"]
        assert replies[2] == ("response", "Checking EU first.")
        assert turn.input.answer is not None
        assert (turn.input.answer.text, turn.input.answer.value) == ("eu", "eu")
        payload = LinearInputPayload.from_payload(turn.input.payload)
        assert payload.origin["parent"]["id"] == "iss-0"
        assert turn.input.channel.user_id == "user-9"
        assert "eu" in str(model.requests[-1].messages[-1].to_dict())


async def test_replays_of_created_and_prompted_store_one_input_each(db_url: str) -> None:
    with FakeLinear(sessions=("as-1",)) as fake:
        app, _ = linear_app(db_url, fake, ["first", "second"])
        async with app:
            created = linear_created()
            one = await deliver(app, created)
            two = await deliver(app, created)
            await asyncio.to_thread(contents, fake, 2)
            prompt = linear_prompted("and now?", "act-7")
            three = await deliver(app, prompt)
            four = await deliver(
                app,
                prompt
                | {"agentActivity": dict(prompt["agentActivity"], content={"body": "and now?"})},
            )
            await asyncio.to_thread(contents, fake, 3)
            await next_event(app, one.body["session_id"], "turn.completed")
        assert (one.body["duplicate"], two.body["duplicate"]) == (False, True)
        assert (three.body["duplicate"], four.body["duplicate"]) == (False, True)
        assert count_rows(db_url, "turnkit_inputs") == 2
        assert [a.content["type"] for a in fake.activities] == ["thought", "response", "response"]


@pytest.mark.parametrize("tamper", TAMPERINGS)
async def test_bad_signatures_are_401_and_nothing_happens(db_url: str, tamper: str) -> None:
    with FakeLinear(sessions=("as-1",)) as fake:
        app, _ = linear_app(db_url, fake, [])
        async with app:
            payload = linear_created()
            headers, body = tampered(
                linear_request, payload, tamper, "linear-signature", skew_s=-61
            )
            answer = await app.handle_channel("linear", headers, body)
        assert answer.status == 401
        assert count_rows(db_url, "turnkit_sessions") == 0
        assert count_rows(db_url, "turnkit_channel_outbox") == 0
        assert fake.requests == []


async def test_stop_cancels_the_running_turn_and_says_it_stopped(db_url: str) -> None:
    waiting = {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "w1", "name": "wait_forever", "input": {"reason": "x"}}
        ],
    }
    with FakeLinear(sessions=("as-1",)) as fake:
        app, _ = linear_app(db_url, fake, [waiting, "Back again."])
        async with app:
            created = await deliver(app, linear_created())
            session_id = created.body["session_id"]
            await next_event(app, session_id, "tool.started")
            stop = await deliver(app, linear_prompted("", "act-stop", signal="stop"))
            cancelled = await next_event(app, session_id, "turn.cancelled")
            again = await deliver(app, linear_prompted("", "act-stop", signal="stop"))
            await deliver(app, linear_prompted("try again", "act-8"))
            # replies keep their order: a post for the cancelled turn would come before this
            done = await asyncio.to_thread(contents, fake, 3)
        assert cancelled.data == {"reason": "stopped"}
        assert stop.body["stopped"] == [cancelled.turn_id]
        assert again.body == {"ok": True, "duplicate": True}
        assert done == [
            ("thought", "Looking into it."),
            ("response", "Stopped, as you asked."),
            ("response", "Back again."),
        ]


async def test_a_failed_turn_is_an_error_activity(db_url: str) -> None:
    with FakeLinear(sessions=("as-1",)) as fake:
        app, _ = linear_app(db_url, fake, [])  # the script is empty: the model call fails
        async with app:
            created = await deliver(app, linear_created())
            failed = await next_event(app, created.body["session_id"], "turn.failed")
            done = await asyncio.to_thread(contents, fake, 2)
        assert done[1][0] == "error"
        assert done[1][1].startswith(f"The turn failed ({failed.data['reason']})")


async def test_server_errors_are_retried_and_refusals_are_recorded(db_url: str) -> None:
    with FakeLinear(sessions=("as-1",)) as fake:
        fake.fail_with_status(503)
        fake.rate_limit()
        app, _ = linear_app(db_url, fake, ["done", "lost"])
        async with app:
            created = await deliver(app, linear_created())
            done = await asyncio.to_thread(contents, fake, 2)
            assert done == [("thought", "Looking into it."), ("response", "done")]
            assert len(fake.requests) == 4  # 503, RATELIMITED, then the two activities
            # an agent session Linear does not know: the API refuses, retrying cannot help
            other = await deliver(app, linear_created("as-unknown"))
            failed = await next_event(app, other.body["session_id"], "channel.delivery_failed")
        assert (
            failed.data["error"]
            == "agentActivityCreate: Entity not found: AgentSession (INVALID_INPUT)"
        )
        assert failed.data["kind"] == "notice" and failed.data["attempts"] == 1
        assert created.body["session_id"] != other.body["session_id"]


async def test_a_personal_key_is_sent_bare_and_a_wrong_token_is_recorded(db_url: str) -> None:
    with FakeLinear(token="lin_api_personal", sessions=("as-1",)) as fake:
        app, _ = linear_app(db_url, fake, ["ok"])
        async with app:
            await deliver(app, linear_created())
            await asyncio.to_thread(contents, fake, 2)
        assert fake.requests[0].headers["authorization"] == "lin_api_personal"
    with FakeLinear(sessions=("as-1",)) as fake:
        app, _ = linear_app(db_url.replace(".db", "2.db"), fake, ["ok"], token="lin_oauth_revoked")
        async with app:
            created = await deliver(app, linear_created())
            failed = await next_event(app, created.body["session_id"], "channel.delivery_failed")
        assert "AUTHENTICATION_ERROR" in failed.data["error"]
        assert fake.activities == []


async def test_malformed_webhooks_are_dropped_with_a_200_naming_the_field(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Linear retries anything but a 200, and a retry of this body fails the same way
    with FakeLinear() as fake:
        app, _ = linear_app(db_url, fake, [])
        async with app:
            no_session = linear_created()
            del no_session["agentSession"]
            empty_prompt = linear_prompted("   ", "act-1")
            answers = [await deliver(app, p) for p in (no_session, empty_prompt)]
            other = await deliver(app, {"type": "Issue", "action": "create"})
        assert [a.status for a in answers] == [200, 200]
        assert [a.body["ok"] for a in answers] == [False, False]
        assert "agentSession" in answers[0].body["dropped"]
        assert "agentActivity.content.body" in answers[1].body["dropped"]
        assert "agentActivity.content.body" in caplog.text  # the reason is logged
        assert other.status == 200 and other.body["ignored"] == "type 'Issue'"
        assert count_rows(db_url, "turnkit_sessions") == 0


def _stamped(payload: dict[str, Any], stamp: str | None = None, **raw: str) -> bytes:
    """``payload`` as JSON with a fresh webhookTimestamp (or ``stamp``, raw JSON text) and
    more fields written as raw JSON text."""
    fields = {"webhookTimestamp": stamp or str(int(time.time() * 1000)), **raw}
    extra = "".join(f', "{name}": {text}' for name, text in fields.items())
    return json.dumps(payload)[:-1].encode() + extra.encode() + b"}"


async def test_signed_webhooks_that_cannot_be_read_are_dropped_and_store_nothing(
    db_url: str,
) -> None:
    created, long_id = linear_created(), "a" * 495
    no_comments = dict(created)
    del no_comments["previousComments"]
    bodies = {
        "huge integer": (_stamped(created, count="7" * 5000), "count: not plain data"),
        "huge timestamp": (_stamped(created, "9" * 5000), "webhookTimestamp: not plain data"),
        "NaN timestamp": (_stamped(created, "NaN"), "NaN is not JSON"),
        "deep nesting": (_stamped(created, x="[" * 100_000 + "]" * 100_000), "nested too deeply"),
        "previousComments: 5": (
            _stamped(no_comments, previousComments="5"),
            "previousComments: must be a list",
        ),
        "495-char activity id": (
            _stamped(linear_prompted("go", long_id)),
            "agentActivity.id: is 495 characters long; at most 200",
        ),
        "495-char session id": (_stamped(linear_created(long_id)), "agentSession.id"),
        "NUL in the prompt": (_stamped(linear_prompted("a\x00", "act-1")), "U+0000"),
    }
    with FakeLinear(sessions=("as-1",)) as fake:
        app, _ = linear_app(db_url, fake, [])
        async with app:
            answers = {
                name: await app.handle_channel("linear", *linear_signed(body))
                for name, (body, _) in bodies.items()
            }
            stale = await app.handle_channel("linear", *linear_signed(_stamped(created, "1e18")))
    for name, (_, why) in bodies.items():
        answer = answers[name]
        assert (answer.status, answer.body["ok"]) == (200, False), (name, answer)
        assert why in answer.body["dropped"], (name, answer.body)
    assert stale.status == 401  # a number, but not a time near now
    for table in ("turnkit_sessions", "turnkit_inputs", "turnkit_channel_outbox"):
        assert count_rows(db_url, table) == 0, table
    assert fake.requests == []


async def test_concurrent_copies_of_created_open_one_session_with_one_turn(
    any_db_url: str,
) -> None:
    with FakeLinear(sessions=("as-1",)) as fake:
        app, _ = linear_app(any_db_url, fake, ["Only once."])
        async with app:
            headers, body = linear_request(linear_created())
            answers = await asyncio.gather(
                *(app.handle_channel("linear", headers, body) for _ in range(8))
            )
            assert [a.status for a in answers] == [200] * 8, answers
            assert sum(not a.body["duplicate"] for a in answers) == 1
            (session_id,) = {a.body["session_id"] for a in answers}
            await next_event(app, session_id, "turn.completed")
            await asyncio.to_thread(contents, fake, 2)
            kinds = [e.type for e in await app.events(session_id)]
        assert kinds.count("input.received") == 1 and kinds.count("turn.started") == 1
        assert [a.content["type"] for a in fake.activities] == ["thought", "response"]


async def test_a_session_started_by_automation_has_no_user_and_no_comment(db_url: str) -> None:
    with FakeLinear(sessions=("as-2",)) as fake:
        app, _ = linear_app(db_url, fake, ["Triaged."])
        async with app:
            payload = linear_created("as-2", creatorId="someone-else", parent=None)
            for name in ("creator", "comment"):
                del payload["agentSession"][name]
            del payload["createdAt"]
            answer = await deliver(app, payload)
            completed = await next_event(app, answer.body["session_id"], "turn.completed")
            turn_input = await app.input(completed.turn_id)
            await asyncio.to_thread(contents, fake, 2)
        assert turn_input.channel.user_id is None
        assert turn_input.text == payload["promptContext"]  # no comment: Linear's prompt context
        # no createdAt: the webhook's own timestamp, which was now
        assert abs((datetime.now(UTC) - turn_input.provider_time).total_seconds()) < 60
        payload_out = LinearInputPayload.from_payload(turn_input.payload)
        assert payload_out.origin == {"parent": None, "created_by_agent": False}
        assert [c["id"] for c in payload_out.comments] == ["com-1"]
