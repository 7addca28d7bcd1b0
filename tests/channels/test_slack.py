"""Slack: signed Events API requests become inputs; replies land in the thread."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from slack_sdk.signature import Clock

import turnkit
from fakes.slack import FakeSlack
from turnkit.channels.slack import MAX_MESSAGE_CHARS, SlackChannel, split_message
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

from ._support import (
    BOT,
    SLACK_SECRET,
    TAMPERINGS,
    ask_message,
    count_rows,
    mention,
    message,
    slack_event,
    slack_request,
    slack_signature,
    slack_signed,
    tampered,
)

ASK = ask_message("Refund or keep the order?", "Refund", "Keep")


def slack_app(db_url: str, fake: FakeSlack, replies: list[Any]) -> tuple[App, ScriptedModel]:
    app = App(db_url)
    model = ScriptedModel(replies)

    @app.agent("helper", model=model)
    def helper() -> str:
        turnkit.use_tool("ask")
        return "Help in Slack."

    app.slack("helper", SLACK_SECRET, fake.api_key, api_url=fake.api_url)
    return app, model


async def deliver(app: App, envelope: dict[str, Any], **headers: str) -> Any:
    request_headers, body = slack_request(envelope, **headers)
    return await app.handle_channel("slack", request_headers, body)


async def next_event(app: App, session_id: str, kind: str, after: int = 0) -> Any:
    async with asyncio.timeout(15):
        async for event in app.follow(session_id, after):
            if event.type == kind:
                return event
    raise AssertionError(f"no {kind} event")


def test_the_documented_example_signature_is_what_the_handler_checks() -> None:
    body = (
        b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&"
        b"channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&"
        b"command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2F"
        b"commands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&"
        b"trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
    )
    expected = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
    assert slack_signature(SLACK_SECRET, "1531420618", body) == expected

    class Frozen(Clock):
        def __init__(self, now: float) -> None:
            self.at = now

        def now(self) -> float:
            return self.at

    headers = {"X-Slack-Request-Timestamp": "1531420618", "X-Slack-Signature": expected}
    signed = SlackChannel("helper", SLACK_SECRET, "xoxb-1", clock=Frozen(1531420618 + 300))
    answer = asyncio.run(signed.handle(None, headers, body))
    assert answer.status == 400 and "not valid JSON" in answer.body["detail"]  # signature accepted
    stale = SlackChannel("helper", SLACK_SECRET, "xoxb-1", clock=Frozen(1531420618 + 301))
    assert asyncio.run(stale.handle(None, headers, body)).status == 401


async def test_url_verification_answers_its_challenge_only_when_signed(db_url: str) -> None:
    with FakeSlack() as fake:
        app, _ = slack_app(db_url, fake, [])
        async with app:
            challenge = {
                "token": "t",
                "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3g",
                "type": "url_verification",
            }
            answer = await deliver(app, challenge)
            assert (answer.status, answer.body) == (200, {"challenge": challenge["challenge"]})
            forged = await deliver(app, challenge, secret="another-secret")
            assert forged.status == 401 and forged.media_type == "application/problem+json"


async def test_a_mention_in_a_thread_gets_a_threaded_reply(db_url: str) -> None:
    with FakeSlack() as fake:
        app, model = slack_app(db_url, fake, ["Hello there"])
        async with app:
            event = mention(
                f"<@{BOT}> what is the status of order 7?", "1700000100.000200", "1700000000.000100"
            )
            answer = await deliver(app, slack_event(event))
            assert answer.status == 200 and answer.body["duplicate"] is False
            posts = await asyncio.to_thread(fake.wait_for_posts, 1)
            assert [(p.channel, p.thread_ts, p.text) for p in posts] == [
                ("C1", "1700000000.000100", "Hello there")
            ]
            session = await app.get_session(answer.body["session_id"])
            assert session.key == "slack:T1:C1:1700000000.000100"
            completed = await next_event(app, session.id, "turn.completed")
            turn_input = await app.input(completed.turn_id)
        assert turn_input.source == "channel"
        assert turn_input.text == "what is the status of order 7?"
        assert turn_input.channel.to_dict() == {
            "provider": "slack",
            "connection_id": "A1",
            "workspace_id": "T1",
            "conversation_id": "C1:1700000000.000100",
            "user_id": "U1",
        }
        assert turn_input.provider_time == datetime.fromtimestamp(1700000100.0002, UTC)
        assert "what is the status of order 7?" in str(model.requests[0].messages[-1].to_dict())
        assert fake.requests[0].headers["authorization"] == "Bearer xoxb-test"


async def test_a_mention_outside_a_thread_starts_one_and_the_next_mention_there_continues_it(
    db_url: str,
) -> None:
    with FakeSlack() as fake:
        app, _ = slack_app(db_url, fake, ["first", "second"])
        async with app:
            first = await deliver(app, slack_event(mention(f"<@{BOT}> hi", "1700000000.000100")))
            await asyncio.to_thread(fake.wait_for_posts, 1)
            again = mention(f"<@{BOT}> more", "1700000050.000100", "1700000000.000100")
            second = await deliver(app, slack_event(again))
            posts = await asyncio.to_thread(fake.wait_for_posts, 2)
        assert first.body["session_id"] == second.body["session_id"]
        assert [(p.thread_ts, p.text) for p in posts] == [
            ("1700000000.000100", "first"),
            ("1700000000.000100", "second"),
        ]


async def test_retries_and_the_twin_message_event_store_one_input(db_url: str) -> None:
    with FakeSlack() as fake:
        app, _ = slack_app(db_url, fake, ["once"])
        async with app:
            envelope = slack_event(mention(f"<@{BOT}> hi", "1700000000.000100"), "Ev0RETRY")
            first = await deliver(app, envelope)
            retry = await deliver(
                app, envelope, **{"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
            )
            # the same message also arrives as a message event, with its own event_id
            twin = message(f"<@{BOT}> hi", "1700000000.000100")
            also = await deliver(app, slack_event(twin | {"thread_ts": "1700000000.000100"}))
            await asyncio.to_thread(fake.wait_for_posts, 1)
            session_id = first.body["session_id"]
            await next_event(app, session_id, "turn.completed")
            events = await app.events(session_id)
        assert retry.body["duplicate"] is True and retry.body["input_id"] == first.body["input_id"]
        assert also.body.get("ignored") == "a mention (its app_mention event carries it)"
        assert [e.type for e in events].count("input.received") == 1
        assert count_rows(db_url, "turnkit_inputs") == 1
        assert len(fake.posts) == 1


@pytest.mark.parametrize("tamper", TAMPERINGS)
async def test_bad_signatures_are_401_and_store_nothing(db_url: str, tamper: str) -> None:
    with FakeSlack() as fake:
        app, _ = slack_app(db_url, fake, [])
        async with app:
            envelope = slack_event(mention(f"<@{BOT}> hi", "1700000000.000100"))
            stale = datetime.now(UTC).timestamp() - 301
            headers, body = tampered(slack_request, envelope, tamper, "X-Slack-Signature", at=stale)
            answer = await app.handle_channel("slack", headers, body)
        assert answer.status == 401
        assert count_rows(db_url, "turnkit_sessions") == 0
        assert count_rows(db_url, "turnkit_inputs") == 0
        assert fake.requests == []


async def test_posts_by_bots_and_by_the_app_itself_are_ignored(db_url: str) -> None:
    with FakeSlack() as fake:
        app, _ = slack_app(db_url, fake, [])
        async with app:
            by_bot = mention("<@UBOT> loop?", "1700000000.000100") | {"bot_id": "B9"}
            own = message("my own reply", "1700000001.000100", "1700000000.000100") | {"user": BOT}
            im_bot = message("hi", "1700000002.000100", channel_type="im", subtype="bot_message")
            answers = [await deliver(app, slack_event(e)) for e in (by_bot, own, im_bot)]
        assert [a.body["ignored"] for a in answers] == [
            "a bot's post",
            "the app's own post",
            "a bot's post",
        ]
        assert count_rows(db_url, "turnkit_inputs") == 0


async def test_a_direct_message_is_an_input_answered_in_its_thread(db_url: str) -> None:
    with FakeSlack(channels=("D1",)) as fake:
        app, _ = slack_app(db_url, fake, ["Hi in the DM"])
        async with app:
            dm = message("hello bot", "1700000000.000100", channel_type="im", channel="D1")
            answer = await deliver(app, slack_event(dm))
            posts = await asyncio.to_thread(fake.wait_for_posts, 1)
            turn = await next_event(app, answer.body["session_id"], "turn.completed")
            turn_input = await app.input(turn.turn_id)
        assert (posts[0].channel, posts[0].thread_ts, posts[0].text) == (
            "D1",
            "1700000000.000100",
            "Hi in the DM",
        )
        assert (
            turn_input.text == "hello bot"
            and turn_input.channel.conversation_id == "D1:1700000000.000100"
        )


async def test_an_ask_is_posted_with_its_options_and_the_next_thread_message_answers_it(
    db_url: str,
) -> None:
    with FakeSlack() as fake:
        app, _ = slack_app(db_url, fake, [ASK, "Refund started."])
        async with app:
            root = "1700000000.000100"
            chatter = await deliver(
                app, slack_event(message("unrelated", "1699999999.000100", root))
            )
            first = await deliver(app, slack_event(mention(f"<@{BOT}> I want my money back", root)))
            posts = await asyncio.to_thread(fake.wait_for_posts, 1)
            assert posts[0].text == (
                "Refund or keep the order?\n• Refund\n• Keep\n_Reply in this thread to answer._"
            )
            reply = await deliver(app, slack_event(message("refund", "1700000200.000100", root)))
            posts = await asyncio.to_thread(fake.wait_for_posts, 2)
            session_id = first.body["session_id"]
            answered = await app.wait((await app.events(session_id))[-1].turn_id or "", timeout=10)
        assert chatter.body["ignored"] == "not addressed to the app"
        assert reply.body["session_id"] == session_id
        assert answered.input.answer is not None
        assert (answered.input.answer.text, answered.input.answer.value) == ("refund", "refund")
        assert posts[1].text == "Refund started." and posts[1].thread_ts == root


async def test_long_replies_are_split_in_pieces_slack_accepts(db_url: str) -> None:
    paragraph = "word " * 700  # 3,500 characters
    reply = "\n\n".join(paragraph.strip() for _ in range(3))
    with FakeSlack() as fake:
        app, _ = slack_app(db_url, fake, [reply])
        async with app:
            await deliver(app, slack_event(mention(f"<@{BOT}> essay", "1700000000.000100")))
            posts = await asyncio.to_thread(fake.wait_for_posts, 3)
        assert all(len(p.text) <= MAX_MESSAGE_CHARS for p in posts)
        assert "\n\n".join(p.text for p in posts) == reply


@given(st.text(min_size=0, max_size=9000), st.integers(min_value=20, max_value=500))
def test_split_message_keeps_every_word_within_the_limit(text: str, limit: int) -> None:
    pieces = split_message(text, limit)
    assert all(0 < len(piece) <= limit for piece in pieces)
    assert "".join("".join(p.split()) for p in pieces) == "".join(text.split())


async def test_a_rate_limited_post_is_retried_after_retry_after(db_url: str) -> None:
    with FakeSlack() as fake:
        fake.rate_limit(retry_after=0, times=1)
        app, _ = slack_app(db_url, fake, ["after the limit"])
        async with app:
            await deliver(app, slack_event(mention(f"<@{BOT}> hi", "1700000000.000100")))
            posts = await asyncio.to_thread(fake.wait_for_posts, 1)
        assert posts[0].text == "after the limit"
        assert len(fake.requests) == 2


async def test_a_transient_ok_false_is_retried_and_a_permanent_one_is_recorded(
    db_url: str,
) -> None:
    with FakeSlack() as fake:
        fake.refuse("internal_error")
        app, _ = slack_app(db_url, fake, ["retried", "lost"])
        async with app:
            await deliver(app, slack_event(mention(f"<@{BOT}> a", "1700000000.000100")))
            posts = await asyncio.to_thread(fake.wait_for_posts, 1)
            gone = mention(f"<@{BOT}> b", "1700000001.000100", channel="C404")
            answer = await deliver(app, slack_event(gone))
            failed = await next_event(app, answer.body["session_id"], "channel.delivery_failed")
        assert posts[0].text == "retried"
        assert failed.data["error"] == "chat.postMessage: channel_not_found"
        assert failed.data["provider"] == "slack" and failed.turn_id is not None


async def test_an_error_text_the_database_would_refuse_is_recorded_storable_and_bounded(
    any_db_url: str,
) -> None:
    """Slack's error text goes into the outbox row and the event: a U+0000 (which
    Postgres refuses) or megabytes of it once left the row leased, posted again
    each time its lease lapsed."""
    with FakeSlack() as fake:
        fake.refuse("bad\x00" + "x" * 100_000)
        app, _ = slack_app(any_db_url, fake, ["lost", "next"])
        async with app:
            answer = await deliver(app, slack_event(mention(f"<@{BOT}> a", "1700000000.000100")))
            session_id = answer.body["session_id"]
            failed = await next_event(app, session_id, "channel.delivery_failed")
            again = mention(f"<@{BOT}> b", "1700000001.000100", thread_ts="1700000000.000100")
            await deliver(app, slack_event(again))
            (post,) = await asyncio.to_thread(fake.wait_for_posts, 1)
    error = failed.data["error"]
    assert error.startswith("chat.postMessage: bad\ufffdxxx")
    assert len(error.encode()) <= 4 * 1024
    assert (post.thread_ts, post.text) == ("1700000000.000100", "next")
    assert count_rows(any_db_url, "turnkit_channel_outbox") == 2


async def test_a_malformed_event_is_400_naming_the_field(db_url: str) -> None:
    with FakeSlack() as fake:
        app, _ = slack_app(db_url, fake, [])
        async with app:
            broken = mention(f"<@{BOT}> hi", "yesterday")
            answer = await deliver(app, slack_event(broken))
            no_channel = await deliver(app, slack_event(mention("hi", "1.1") | {"channel": 5}))
        assert answer.status == 400 and "event.ts" in answer.body["detail"]
        assert no_channel.status == 400 and "event.channel" in no_channel.body["detail"]
        assert answer.headers == {"X-Slack-No-Retry": "1"}  # a retry would be refused too
        assert count_rows(db_url, "turnkit_inputs") == 0


def _with_raw(envelope: dict[str, Any], name: str, raw: str) -> bytes:
    """The envelope as JSON with one more field, written as raw JSON text."""
    return json.dumps(envelope)[:-1].encode() + f', "{name}": {raw}}}'.encode()


async def test_signed_events_that_cannot_be_read_are_400_naming_the_field(db_url: str) -> None:
    good = slack_event(mention(f"<@{BOT}> hi", "1700000100.000200"))
    bodies = {
        "huge integer": (_with_raw(good, "event_time", "7" * 5000), "event_time"),
        "deep nesting": (_with_raw(good, "x", "[" * 100_000 + "]" * 100_000), "nested too deeply"),
        "NaN": (_with_raw(good, "event_time", "NaN"), "NaN is not JSON"),
        "far-future ts": (
            json.dumps(slack_event(mention("hi", "999999999999.000100"))).encode(),
            "event.ts: is 999999999999.0001, not a time from 1970 to 9999",
        ),
        "far-future thread": (
            json.dumps(slack_event(mention("hi", "1.1", thread_ts="999999999999"))).encode(),
            "event.thread_ts",
        ),
        "authorizations: 5": (json.dumps(good | {"authorizations": 5}).encode(), "authorizations"),
        "NUL in text": (json.dumps(slack_event(mention("a\x00b", "1.2"))).encode(), "event.text"),
        "495-char channel": (
            json.dumps(slack_event(mention("hi", "1.3", channel="C" * 495))).encode(),
            "event.channel: is 495 characters long; at most 200",
        ),
        "495-char team": (json.dumps(good | {"team_id": "T" * 495}).encode(), "team_id"),
    }
    with FakeSlack() as fake:
        app, _ = slack_app(db_url, fake, [])
        async with app:
            answers = {
                name: await app.handle_channel("slack", *slack_signed(body))
                for name, (body, _) in bodies.items()
            }
    for name, (_, field) in bodies.items():
        answer = answers[name]
        assert answer.status == 400, (name, answer)
        assert answer.media_type == "application/problem+json"
        assert field in answer.body["detail"], (name, answer.body)
        assert answer.headers == {"X-Slack-No-Retry": "1"}
    assert count_rows(db_url, "turnkit_sessions") == 0
    assert count_rows(db_url, "turnkit_inputs") == 0
