"""A session turn reads only the messages stored since the last one; a rollback forgets."""

from __future__ import annotations

import pytest

import turnkit.sessions.db.conversation as conversation
from turnkit.messages import Message
from turnkit.sessions import App
from turnkit.testing import ScriptedModel


def echo_app(db_url: str) -> App:
    app = App(db_url, fire_schedules=False)

    @app.agent("echo", model=ScriptedModel([lambda r: f"echo:{r.last_text}"] * 100))
    def echo() -> str:
        return "Echo."

    return app


async def test_a_turn_decodes_only_the_messages_new_since_the_last_turn(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded: list[str] = []

    class Counting:
        @staticmethod
        def from_dict(data: dict) -> Message:
            decoded.append(data["role"])
            return Message.from_dict(data)

    monkeypatch.setattr(conversation, "Message", Counting)
    app = echo_app(db_url)
    async with app:
        session = await app.create_session("echo")
        for i in range(30):
            await app.wait((await app.send(session.id, text=f"m{i}")).turn_id, timeout=10)
        assert len(decoded) <= 2 * 30  # each stored message once, none again
        decoded.clear()
        turn = await app.wait((await app.send(session.id, text="last")).turn_id, timeout=10)
        assert turn.output == "echo:last"
        assert decoded == ["assistant", "user"]  # the previous reply, then this input
        assert len(await app.history(session.id)) == 62


async def test_what_a_rolled_back_transaction_read_is_forgotten(db_url: str) -> None:
    app = echo_app(db_url)
    async with app:
        session = await app.create_session("echo")
        await app.wait((await app.send(session.id, text="a")).turn_id, timeout=10)
        cache = conversation.Conversations()
        store = app.runtime.store
        with pytest.raises(RuntimeError), store.write() as tx:
            tx.execute(
                conversation.t.messages.insert().values(
                    session_id=session.id,
                    position=tx.bump(session.id, "message_seq"),
                    turn_id="never",
                    turn_index=0,
                    message='{"role": "user", "content": [{"type": "text", "text": "ghost"}]}',
                )
            )
            assert [m.text for m in cache.read(tx, session.id).messages][-1] == "ghost"
            raise RuntimeError("roll back")
        with store.write() as tx:
            texts = [m.text for m in cache.read(tx, session.id).messages]
        assert texts == ["a", "echo:a"]
