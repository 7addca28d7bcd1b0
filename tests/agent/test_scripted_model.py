"""ScriptedModel keeps its work on a conversation's start; what it records is unchanged."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from messages.strategies import histories, origins
from turnkit.messages import Message, Origin, message_text_body
from turnkit.providers import ModelRequest, ModelSettings
from turnkit.providers.rules import hoist_system, replay_thinking
from turnkit.testing import ScriptedModel


@st.composite
def signed_histories(draw: st.DrawFn) -> tuple[Message, ...]:
    """Histories whose assistant messages come from this model or another."""
    mine = st.just(None) | origins | st.just(Origin("scripted", "scripted"))
    return tuple(
        m.clone(origin=draw(mine)) if m.role == "assistant" else m for m in draw(histories())
    )


@given(
    st.lists(signed_histories(), min_size=1, max_size=3),
    st.lists(st.integers(0, 20), min_size=1, max_size=6),
    st.sampled_from(("drop", "text")),
    st.none() | st.text(max_size=5),
)
@settings(max_examples=200)
def test_requests_and_usage_are_what_the_rules_give(
    parts: list[tuple[Message, ...]], cuts: list[int], mode: str, system: str | None
) -> None:
    whole = tuple(m for part in parts for m in part)
    model = ScriptedModel(["ok"] * (2 * len(cuts)))
    for cut in cuts:
        for messages in (whole[:cut], parts[cut % len(parts)]):
            request = ModelRequest(messages, system, settings=ModelSettings(thinking_replay=mode))
            response = _request(model, request)
            expected_system, rest = hoist_system(request)
            expected = replay_thinking(rest, "scripted", "scripted", mode)  # type: ignore[arg-type]
            seen = model.requests[-1]
            assert (seen.system, seen.messages) == (expected_system, expected)
            chars = len(expected_system or "") + sum(len(message_text_body(m)) for m in expected)
            assert response.usage.input_tokens == max(1, math.ceil(chars / 4))


def _request(model: ScriptedModel, request: ModelRequest):  # type: ignore[no-untyped-def]
    import asyncio

    return asyncio.run(model.request(request))
