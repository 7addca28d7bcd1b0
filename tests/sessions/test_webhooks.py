"""Webhooks: Standard Webhooks signatures, payloads as inputs, replays stored once."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from turnkit.errors import WebhookNotFoundError, WebhookSignatureError
from turnkit.sessions import App, InvalidInputError
from turnkit.sessions.sources.webhooks import verify_signature
from turnkit.testing import ScriptedModel

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OTHER_SECRET = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo="


def signed(
    body: bytes, message_id: str = "msg_1", secret: str = SECRET, at: float | None = None
) -> dict[str, str]:
    """Standard Webhooks headers for ``body``, signed by the package itself."""
    stamp = int(time.time() if at is None else at)
    signature = Webhook(secret).sign(message_id, datetime.fromtimestamp(stamp, UTC), body.decode())
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": signature,
    }


def webhook_app(db_url: str, **options: Any) -> App:
    app = App(db_url, fire_schedules=False)

    @app.agent("triage", model=ScriptedModel([lambda r: "triaged"] * 50))
    def triage() -> str:
        return "Triage the delivery."

    app.webhook("github", agent="triage", secret=SECRET, **options)
    return app


async def count_inputs(app: App) -> int:
    from turnkit.sessions.db import schema

    with app.runtime.store.read() as conn:
        return conn.execute(schema.inputs.select()).all().__len__()


def test_the_published_vector_verifies_at_its_own_time() -> None:
    headers = {
        "webhook-id": "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W",
        "webhook-timestamp": "1674087231",
        "webhook-signature": "v1,SJVF30Kpi2mR/9mMIvIkhtG4Iz8hWa0S4q2Yt1caIO0=",
    }
    body = b'{"test": 2432232314}'
    verifier = Webhook(SECRET)
    assert verify_signature(verifier, headers, body, now=1674087231) == headers["webhook-id"]
    assert verify_signature(verifier, headers, body, now=1674087231 + 299) == headers["webhook-id"]
    with pytest.raises(WebhookSignatureError, match="more than 5 minutes from now"):
        verify_signature(verifier, headers, body, now=1674087231 + 301)
    with pytest.raises(WebhookSignatureError, match="more than 5 minutes from now"):
        verify_signature(verifier, headers, body)  # today: long expired
    rotated = dict(headers, **{"webhook-signature": "v1,bm9wZQ== " + headers["webhook-signature"]})
    assert verify_signature(verifier, rotated, body, now=1674087231) == headers["webhook-id"]
    with pytest.raises(WebhookSignatureError, match="no v1 signature matches"):
        verify_signature(verifier, headers, b'{"test": 2432232315}', now=1674087231)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"webhook-signature": None}, "the webhook-signature header is missing"),
        ({"webhook-id": None}, "the webhook-id header is missing"),
        ({"webhook-timestamp": "soon"}, "must be UNIX seconds"),
        ({"webhook-timestamp": "1e9"}, "must be UNIX seconds"),
        ({"webhook-signature": "v1"}, "no v1 signature matches"),
        ({"webhook-signature": "v1,!!!not-base64"}, "no v1 signature matches"),
        ({"webhook-signature": "v2,AAAA v1a,BBBB ,,, v1,,"}, "no v1 signature matches"),
        ({"webhook-id": "x" * 201}, "longer than 200"),
    ],
)
def test_malformed_headers_are_refused_with_a_reason(
    change: dict[str, str | None], reason: str
) -> None:
    body = b'{"a": 1}'
    headers = signed(body)
    for name, value in change.items():
        if value is None:
            headers.pop(name)
        else:
            headers[name] = value
    with pytest.raises(WebhookSignatureError, match=reason):
        verify_signature(Webhook(SECRET), headers, body)


async def test_a_delivery_becomes_a_webhook_input_and_a_replay_stores_nothing(
    db_url: str,
) -> None:
    body = json.dumps({"action": "opened", "number": 7}).encode()
    headers = signed(body, "msg_7")
    async with webhook_app(db_url) as app:
        first = await app.deliver_webhook("github", headers, body)
        assert not first.receipt.duplicate and first.message_id == "msg_7"
        turn = await app.wait(first.receipt.turn_id, timeout=10)
        assert turn.status == "completed"
        assert turn.input.source == "webhook" and turn.input.text is None
        assert turn.input.payload == {"action": "opened", "number": 7}
        assert (turn.input.webhook.id, turn.input.webhook.message_id) == ("github", "msg_7")
        events = await app.events(first.session_id)
        again = await app.deliver_webhook("github", headers, body)
        assert again.receipt.duplicate and again.receipt.input_id == first.receipt.input_id
        assert await app.events(first.session_id) == events
        second = await app.deliver_webhook("github", signed(body, "msg_8"), body)
        assert second.session_id == first.session_id  # one session per webhook by default
    async with webhook_app(db_url) as app:  # after a restart, still a replay
        replay = await app.deliver_webhook("github", signed(body, "msg_7"), body)
        assert replay.receipt.duplicate
        assert await count_inputs(app) == 2


async def test_bad_signatures_and_old_timestamps_store_nothing(db_url: str) -> None:
    body = b'{"action": "opened"}'
    async with webhook_app(db_url) as app:
        bad = [
            signed(body, secret=OTHER_SECRET),
            signed(body, at=time.time() - 6 * 60),
            signed(body, at=time.time() + 6 * 60),
            {**signed(body), "webhook-signature": "v1,SJVF30Kpi2mR/9mMIvIkhtG4Iz8hWa0S4q2Yt1caIO0"},
            {},
        ]
        for headers in bad:
            with pytest.raises(WebhookSignatureError):
                await app.deliver_webhook("github", headers, body)
        tampered = signed(body)
        with pytest.raises(WebhookSignatureError):
            await app.deliver_webhook("github", tampered, b'{"action": "closed"}')
        assert await count_inputs(app) == 0
        from turnkit.sessions.db import schema

        with app.runtime.store.read() as conn:
            assert conn.execute(schema.sessions.select()).all() == []
        with pytest.raises(WebhookNotFoundError):
            await app.deliver_webhook("gitlab", signed(body), body)


async def test_session_key_picks_the_session_from_the_payload(db_url: str) -> None:
    app = webhook_app(db_url, session_key=lambda payload: f"repo-{payload['repo']}")
    async with app:
        deliveries = []
        for n, repo in enumerate(["a", "b", "a"]):
            body = json.dumps({"repo": repo}).encode()
            deliveries.append(await app.deliver_webhook("github", signed(body, f"m{n}"), body))
        assert deliveries[0].session_id == deliveries[2].session_id != deliveries[1].session_id
        assert (await app.get_session(deliveries[1].session_id)).key == "repo-b"
        body = b'{"no_repo": true}'
        with pytest.raises(InvalidInputError, match="session_key: raised KeyError"):
            await app.deliver_webhook("github", signed(body, "m9"), body)
        assert await count_inputs(app) == 3


async def test_a_string_session_key_sends_every_delivery_to_that_one_session(
    db_url: str,
) -> None:
    app = webhook_app(db_url, session_key="orders")
    async with app:
        deliveries = []
        for n, repo in enumerate(["a", "b"]):
            body = json.dumps({"repo": repo}).encode()
            deliveries.append(await app.deliver_webhook("github", signed(body, f"m{n}"), body))
        assert deliveries[0].session_id == deliveries[1].session_id
        assert (await app.get_session(deliveries[0].session_id)).key == "orders"
        session = await app.create_session("triage", key="orders")
        assert session.id == deliveries[0].session_id  # the same session as by its key


async def test_bodies_that_are_not_json_or_too_large_are_refused(db_url: str) -> None:
    async with webhook_app(db_url) as app:
        for body, problem in [
            (b"not json", "body: is not valid JSON"),
            (b'{"a": ' + b'"' + b"x" * (256 * 1024) + b'"}', "over the limit of 262144"),
        ]:
            with pytest.raises(InvalidInputError, match=problem):
                await app.deliver_webhook("github", signed(body), body)
        assert await count_inputs(app) == 0


def test_webhook_definitions_are_checked() -> None:
    app = App("sqlite:////nonexistent/unused.db")
    app.agent("triage", model=ScriptedModel(["x"]))(lambda: "x")
    with pytest.raises(ValueError, match="URL path segment"):
        app.webhook("a/b", "triage", SECRET)
    with pytest.raises(ValueError, match="not base64"):
        app.webhook("gh", "triage", "whsec_%%%")
    for bad in (42, b"orders", ["orders"]):
        with pytest.raises(ValueError, match=r"session_key must be a string .* a function"):
            app.webhook("gh", "triage", SECRET, session_key=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"app.webhook\('gh'\): session_key: must be a non-empty"):
        app.webhook("gh", "triage", SECRET, session_key="")
    app.webhook("gh", "triage", SECRET)
    with pytest.raises(ValueError, match="already defined"):
        app.webhook("gh", "triage", SECRET)


async def test_concurrent_replays_store_one_input(any_db_url: str) -> None:
    import asyncio

    db_url = any_db_url
    body = b'{"n": 1}'
    headers = signed(body, "msg_same")
    async with webhook_app(db_url) as app:
        await app.create_session("triage", key="webhook:github")
        results = await asyncio.gather(
            *(app.deliver_webhook("github", headers, body) for _ in range(8))
        )
        assert sum(not r.receipt.duplicate for r in results) == 1
        assert len({r.receipt.input_id for r in results}) == 1
        assert await count_inputs(app) == 1


async def test_a_delivery_to_an_ended_session_is_refused_but_its_replay_is_not(
    db_url: str,
) -> None:
    from turnkit.sessions import SessionEndedError

    body = b'{"a": 1}'
    async with webhook_app(db_url) as app:
        first = await app.deliver_webhook("github", signed(body, "m1"), body)
        await app.end_session(first.session_id)
        replay = await app.deliver_webhook("github", signed(body, "m1"), body)
        assert replay.receipt.duplicate
        with pytest.raises(SessionEndedError):
            await app.deliver_webhook("github", signed(body, "m2"), body)
        assert await count_inputs(app) == 1


async def test_a_webhook_id_replayed_with_another_body_goes_where_the_first_went(
    any_db_url: str,
) -> None:
    import asyncio

    app = webhook_app(any_db_url, session_key=lambda payload: f"repo-{payload['repo']}")
    async with app:
        first_body, other_body = b'{"repo": "a"}', b'{"repo": "b"}'
        first = await app.deliver_webhook("github", signed(first_body, "m1"), first_body)
        replay = await app.deliver_webhook("github", signed(other_body, "m1"), other_body)
        assert replay.receipt.duplicate and replay.session_id == first.session_id
        assert replay.receipt.input_id == first.receipt.input_id
        bodies = [json.dumps({"repo": f"r{n}"}).encode() for n in range(8)]
        raced = await asyncio.gather(
            *(app.deliver_webhook("github", signed(body, "m2"), body) for body in bodies)
        )
        assert sum(not r.receipt.duplicate for r in raced) == 1
        assert len({r.session_id for r in raced}) == 1
        assert await count_inputs(app) == 2
        assert await app.find_session("triage", "repo-b") is None
        # the races' losers opened no session of their own (it was rolled back)
        opened = [await app.find_session("triage", f"repo-r{n}") for n in range(8)]
        assert sum(session is not None for session in opened) == 1


async def test_signed_bodies_past_the_json_bounds_are_refused_naming_the_place(
    db_url: str,
) -> None:
    async with webhook_app(db_url) as app:
        for body, problem in [
            (b'{"n": ' + b"7" * 5000 + b"}", r"body\.n: not plain data \(an integer outside"),
            (b'{"n": -' + b"7" * 30 + b"}", r"body\.n: not plain data \(an integer outside"),
            (b"[" * 100_000 + b"]" * 100_000, "body: is nested too deeply"),
            (b'{"a": ' + b"[" * 70 + b"]" * 70 + b"}", "more than 64 nested containers"),
            (b'{"t": NaN}', "body: is not valid JSON .NaN is not JSON"),
            (b'{"t": 1e999}', r"body\.t: not plain data \(inf\)"),
        ]:
            with pytest.raises(InvalidInputError, match=problem):
                await app.deliver_webhook("github", signed(body), body)
        assert await count_inputs(app) == 0
