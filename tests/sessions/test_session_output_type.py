"""``@app.agent(output_type=...)`` takes what ``AgentConfig(output_type=...)`` takes."""

from __future__ import annotations

import pytest
from typing_extensions import TypedDict

from turnkit.sessions import App
from turnkit.testing import ScriptedModel


class Verdict(TypedDict):  # typing_extensions: what pydantic asks for on Python < 3.12
    approve: bool
    reason: str


def test_a_typing_extensions_typeddict_is_accepted_and_anything_else_named() -> None:
    app = App("sqlite:////nonexistent/unused.db")
    app.agent("judge", model=ScriptedModel([]), output_type=Verdict)(lambda: "Decide.")
    assert "judge" in app.agents
    with pytest.raises(TypeError, match="a TypedDict or a JSON schema dict, got 3"):
        app.agent("other", model=ScriptedModel([]), output_type=3)


async def test_the_turn_gives_the_validated_typeddict(db_url: str) -> None:
    app = App(db_url)
    model = ScriptedModel(['{"approve": true, "reason": "fine"}'])

    @app.agent("judge", model=model, output_type=Verdict)
    def judge() -> str:
        return "Decide."

    async with app:
        session = await app.create_session("judge")
        turn = await app.wait((await app.send(session.id, text="ok?")).turn_id, timeout=10)
        assert turn.status == "completed"
        assert turn.output_data == {"approve": True, "reason": "fine"}
