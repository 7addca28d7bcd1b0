"""Structured output: AgentConfig(output_type=...), RunResult.output_data."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict as ExtTypedDict

from fakes import FakeAnthropic, FakeGemini, FakeOpenAIChat, FakeOpenAIResponses, Reply, Text
from fakes import ToolCall as FakeCall
from turnkit import Agent, AgentConfig, Message, OutputValidationError, ToolUseBlock, tool
from turnkit.agent.output import OUTPUT_TOOL
from turnkit.providers.anthropic import AnthropicModel
from turnkit.providers.gemini import GeminiModel
from turnkit.providers.openai_chat import OpenAIChatModel
from turnkit.providers.openai_responses import OpenAIResponsesModel
from turnkit.testing import ScriptedModel


class City(BaseModel):
    name: str
    population: int


@dataclass
class CityData:
    name: str
    population: int


class CityDict(TypedDict):
    name: str
    population: int


class CityExtDict(ExtTypedDict):  # what pydantic asks for on Python < 3.12
    name: str
    population: int
    country: NotRequired[str]


CITY_SCHEMA = {
    "title": "City",
    "type": "object",
    "properties": {"name": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["name", "population"],
}
OSLO = '{"name": "Oslo", "population": 709000}'


@pytest.mark.parametrize(
    ("output_type", "expected"),
    [
        (City, City(name="Oslo", population=709000)),
        (CityData, CityData("Oslo", 709000)),
        (CityDict, {"name": "Oslo", "population": 709000}),
        (CityExtDict, {"name": "Oslo", "population": 709000}),
        (CITY_SCHEMA, {"name": "Oslo", "population": 709000}),
    ],
)
def test_each_kind_of_output_type_gives_its_value(output_type: Any, expected: Any) -> None:
    model = ScriptedModel([OSLO], structured_output=True)
    result = Agent(AgentConfig("a", model=model, output_type=output_type)).run_sync("Oslo?")
    assert result.success
    assert result.output_data == expected
    assert result.output == OSLO
    schema = model.requests[0].output
    assert (schema is not None and schema.name == "City") or schema.name.startswith("City")
    assert schema.schema["additionalProperties"] is False
    assert schema.strict == (output_type is not CityExtDict)  # its `country` is optional
    assert model.requests[0].tools == ()  # native: no output tool


def test_a_typing_extensions_typeddict_is_checked_like_any_other() -> None:
    model = ScriptedModel(['{"name": "Oslo"}', OSLO], structured_output=True)
    result = Agent(AgentConfig("a", model=model, output_type=CityExtDict)).run_sync("Oslo?")
    assert result.success and result.output_data == {"name": "Oslo", "population": 709000}
    assert "population: Field required" in result.messages[1].text
    assert model.requests[0].output.schema["required"] == ("name", "population")


def test_invalid_answer_is_fed_back_then_accepted() -> None:
    model = ScriptedModel(['{"name": "Oslo"}', OSLO], structured_output=True)
    result = Agent(AgentConfig("a", model=model, output_type=City)).run_sync("Oslo?")
    assert result.success and result.output_data == City(name="Oslo", population=709000)
    feedback = result.messages[1]
    assert feedback.role == "user"
    assert "population: Field required" in feedback.text
    assert "population: Field required" in model.requests[1].last_text


@pytest.mark.parametrize("retries", [0, 1, 2])
def test_run_fails_with_the_validation_error_after_output_retries(retries: int) -> None:
    model = ScriptedModel(["not json"] * (retries + 1), structured_output=True)
    agent = Agent(AgentConfig("a", model=model, output_type=City, output_retries=retries))
    result = agent.run_sync("Oslo?")
    assert not result.success
    assert isinstance(result.exception, OutputValidationError)
    assert result.error is not None and result.error.startswith("OutputValidationError:")
    assert "not valid JSON" in result.error
    assert len(model.requests) == retries + 1
    assert result.output_data is None


def test_models_without_native_output_answer_through_a_tool() -> None:
    call = ToolUseBlock("c1", OUTPUT_TOOL, {"name": "Oslo", "population": 709000})
    model = ScriptedModel([Message.assistant(call)])
    result = Agent(AgentConfig("a", model=model, output_type=City)).run_sync("Oslo?")
    assert result.success and result.output_data == City(name="Oslo", population=709000)
    assert json.loads(result.output) == {"name": "Oslo", "population": 709000}
    assert model.requests[0].tool_names == (OUTPUT_TOOL,)
    assert model.requests[0].output is None
    assert result.messages[-1].content[0].content == "Final result accepted."


def test_tool_fallback_feeds_a_bad_call_back_and_runs_other_tools() -> None:
    @tool
    def lookup(city: str) -> str:
        """Population of a city."""
        return "709000"

    model = ScriptedModel(
        [
            Message.assistant(
                ToolUseBlock("c1", "lookup", {"city": "Oslo"}),
                ToolUseBlock("c2", OUTPUT_TOOL, {"name": "Oslo"}),
            ),
            Message.assistant(ToolUseBlock("c3", OUTPUT_TOOL, {"name": "Oslo", "population": 1})),
        ]
    )
    agent = Agent(AgentConfig("a", model=model, tools=[lookup], output_type=City))
    result = agent.run_sync("Oslo?")
    assert result.success and result.output_data == City(name="Oslo", population=1)
    first_results = result.messages[1].content
    assert first_results[0].content == "709000"
    assert first_results[1].is_error and "population: Field required" in first_results[1].content
    assert model.requests[0].tool_names == ("lookup", OUTPUT_TOOL)


def test_tool_fallback_accepts_a_json_text_answer_and_asks_for_the_tool_otherwise() -> None:
    model = ScriptedModel(["I think Oslo.", OSLO])
    result = Agent(AgentConfig("a", model=model, output_type=City)).run_sync("Oslo?")
    assert result.success and result.output_data.population == 709000
    assert f"calling the {OUTPUT_TOOL} tool" in result.messages[1].text


async def test_stream_done_event_carries_the_value() -> None:
    model = ScriptedModel([OSLO], structured_output=True)
    agent = Agent(AgentConfig("a", model=model, output_type=CityDict))
    events = [event async for event in agent.stream("Oslo?")]
    assert events[-1].type == "done"
    assert events[-1].result.output_data == {"name": "Oslo", "population": 709000}
    assert "".join(e.text for e in events if e.type == "text_delta") == OSLO


def test_prompt_keeps_the_feedback_in_history_and_gives_the_value() -> None:
    model = ScriptedModel(["nope", OSLO], structured_output=True)
    agent = Agent(AgentConfig("a", model=model, output_type=City))
    result = agent.prompt_sync("Oslo?")
    assert result.output_data == City(name="Oslo", population=709000)
    assert [m.role for m in agent.get_history()] == ["user", "assistant", "user", "assistant"]


@pytest.mark.parametrize(
    ("config", "error", "words"),
    [
        ({"output_type": int}, TypeError, "Pydantic model class, a dataclass, a TypedDict"),
        ({"output_type": {"type": "array"}}, ValueError, "must describe an object"),
        ({"output_type": {"type": "object", "properties": 3}}, ValueError, "not a valid JSON"),
        ({"output_type": City, "output_retries": -1}, ValueError, "output_retries"),
        (
            {"output_type": City, "tools": [tool(lambda: "x", name=OUTPUT_TOOL)]},
            ValueError,
            "rename it",
        ),
    ],
)
def test_bad_output_settings_raise_when_the_agent_is_built(
    config: dict[str, Any], error: type, words: str
) -> None:
    with pytest.raises(error, match=words):
        Agent(AgentConfig("a", model=ScriptedModel([]), **config))


# -- each provider's native mechanism, against its fake ---------------------------------


def _openai_chat(fake: Any) -> Any:
    return OpenAIChatModel("gpt-4.1", base_url=fake.base_url + "/v1", api_key="test")


def _responses(fake: Any) -> Any:
    return OpenAIResponsesModel("gpt-5", base_url=fake.base_url + "/v1", api_key="test")


def _anthropic(fake: Any) -> Any:
    return AnthropicModel("claude-sonnet-4-6", base_url=fake.base_url, api_key="test")


def _gemini(fake: Any) -> Any:
    return GeminiModel("gemini-2.5-flash", base_url=fake.base_url, api_key="test")


def _schema_sent(name: str, body: dict[str, Any]) -> dict[str, Any]:
    if name == "openai":
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
        assert fmt["json_schema"]["name"] == "City"
        return fmt["json_schema"]["schema"]
    if name == "responses":
        fmt = body["text"]["format"]
        assert (fmt["type"], fmt["name"], fmt["strict"]) == ("json_schema", "City", True)
        return fmt["schema"]
    if name == "anthropic":
        assert body["output_config"]["format"]["type"] == "json_schema"
        return body["output_config"]["format"]["schema"]
    config = body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    return config["responseJsonSchema"]


NATIVE = {
    "openai": (FakeOpenAIChat, _openai_chat),
    "responses": (FakeOpenAIResponses, _responses),
    "anthropic": (FakeAnthropic, _anthropic),
    "gemini": (FakeGemini, _gemini),
}


@pytest.mark.parametrize("name", list(NATIVE))
@pytest.mark.parametrize("streaming", [False, True])
async def test_each_provider_gets_its_native_request_shape(name: str, streaming: bool) -> None:
    fake_class, make = NATIVE[name]
    with fake_class(Reply([Text(OSLO)])) as fake:
        agent = Agent(AgentConfig("a", model=make(fake), output_type=City))
        if streaming:
            events = [event async for event in agent.stream("Oslo?")]
            result = events[-1].result
        else:
            result = await agent.run("Oslo?")
        body = fake.requests[-1].body
    assert result.success, result.error
    assert result.output_data == City(name="Oslo", population=709000)
    schema = _schema_sent(name, body)
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["name", "population"]


async def test_models_without_the_api_fall_back_to_the_tool_on_the_wire() -> None:
    with FakeAnthropic(Reply([FakeCall(OUTPUT_TOOL, {"name": "Oslo", "population": 3})])) as fake:
        model = AnthropicModel("claude-3-5-haiku-latest", base_url=fake.base_url, api_key="test")
        result = await Agent(AgentConfig("a", model=model, output_type=City)).run("Oslo?")
        body = fake.requests[-1].body
    assert result.output_data == City(name="Oslo", population=3)
    assert "output_config" not in body
    assert [t["name"] for t in body["tools"]] == [OUTPUT_TOOL]


async def test_gemini_before_3_with_tools_uses_the_tool_since_the_api_refuses_both() -> None:
    @tool
    def lookup(city: str) -> str:
        """Population of a city."""
        return "709000"

    reply = Reply([FakeCall(OUTPUT_TOOL, {"name": "Oslo", "population": 709000})])
    with FakeGemini(reply) as fake:
        agent = Agent(AgentConfig("a", model=_gemini(fake), tools=[lookup], output_type=City))
        result = await agent.run("Oslo?")
        body = fake.requests[-1].body
    assert result.output_data == City(name="Oslo", population=709000)
    assert "responseMimeType" not in body.get("generationConfig", {})


def test_the_local_model_is_held_to_the_schema_by_a_grammar() -> None:
    agent = Agent(AgentConfig("a", model="local", output_type=City, max_output_tokens=48))
    result = agent.run_sync("Name a large city and its population.")
    assert result.success, result.error
    assert isinstance(result.output_data, City)
    assert len(result.messages) == 1  # valid the first time: no feedback round
    assert City.model_validate_json(result.output) == result.output_data


class Draft(BaseModel):
    title: str
    tags: list[str] = []


async def test_a_schema_with_optional_fields_is_sent_without_openai_strict_mode() -> None:
    with FakeOpenAIChat(Reply([Text('{"title": "Hi"}')])) as fake:
        agent = Agent(AgentConfig("a", model=_openai_chat(fake), output_type=Draft))
        result = await agent.run("Draft?")
        fmt = fake.requests[-1].body["response_format"]["json_schema"]
    assert result.output_data == Draft(title="Hi")
    assert fmt["strict"] is False  # strict mode would refuse the optional "tags"
    assert fmt["schema"]["additionalProperties"] is False


async def test_the_orchestrator_passes_structured_output_through_its_metered_model() -> None:
    from turnkit import Orchestrator

    model = ScriptedModel([OSLO], structured_output=True)
    result = await Orchestrator(default_model=model).run_agent(
        AgentConfig("a", output_type=City), "Oslo?"
    )
    assert result.output_data == City(name="Oslo", population=709000)
    assert model.requests[0].output is not None
