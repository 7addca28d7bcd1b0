"""Every string an Agent sends is valid Unicode: lone surrogates are refused where they enter."""

from __future__ import annotations

import json

import pytest

from turnkit import Agent, AgentConfig, InvalidMessageError, Tool
from turnkit.providers.base import ModelRequest, ToolSpec
from turnkit.testing import ScriptedModel

SURROGATE = json.loads('"\\udcff"')  # what a non-UTF-8 byte decodes to with surrogateescape


def agent(**config: object) -> Agent:
    return Agent(AgentConfig("a", model=ScriptedModel(["ok"]), **config))  # type: ignore[arg-type]


def test_a_system_prompt_that_is_not_unicode_is_refused_when_the_agent_is_built() -> None:
    with pytest.raises(InvalidMessageError) as caught:
        agent(system="be " + SURROGATE)
    assert caught.value.path == "system" and "lone surrogate U+DCFF" in caught.value.problem


@pytest.mark.parametrize("entry", ["run_sync", "prompt_sync"])
def test_str_input_that_is_not_unicode_is_refused_at_input(entry: str) -> None:
    with pytest.raises(InvalidMessageError) as caught:
        getattr(agent(), entry)("hi " + SURROGATE)
    assert caught.value.path == "input"


def test_tool_descriptions_and_request_system_text_must_be_unicode() -> None:
    with pytest.raises(ValueError, match="description: text holds a lone surrogate"):
        Tool("t", "adds " + SURROGATE, {"type": "object"}, lambda: 1)
    with pytest.raises(InvalidMessageError, match=r"^description: "):
        ToolSpec("t", "adds " + SURROGATE)
    with pytest.raises(InvalidMessageError, match=r"^system: "):
        ModelRequest((), system=SURROGATE)
