"""The fakes refuse structured-output requests the real APIs refuse, with their texts."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import errors, types

from fakes import FakeAnthropic, FakeGemini, FakeOpenAIChat, FakeOpenAIResponses, Reply, Text

OPEN = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
OPTIONAL = {
    "type": "object",
    "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
    "required": ["a"],
    "additionalProperties": False,
}
CLOSED = {**OPEN, "additionalProperties": False}


def chat(fake: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=fake.base_url + "/v1", api_key="test", max_retries=0)


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        (OPEN, "'additionalProperties' is required to be supplied and to be false"),
        (OPTIONAL, "'required' is required to be supplied and to be an array including every"),
    ],
)
def test_openai_strict_schemas_must_be_closed_and_fully_required(
    schema: dict[str, Any], words: str
) -> None:
    user = [{"role": "user", "content": "x"}]
    with FakeOpenAIChat(Reply([Text("{}")])) as fake:
        strict = {"name": "X", "schema": schema, "strict": True}
        fmt = {"type": "json_schema", "json_schema": strict}
        with pytest.raises(openai.BadRequestError, match=words) as caught:
            chat(fake).chat.completions.create(model="gpt-4.1", messages=user, response_format=fmt)
        assert "Invalid schema for response_format 'X'" in str(caught.value)
        loose = {"type": "json_schema", "json_schema": {"name": "X", "schema": schema}}
        chat(fake).chat.completions.create(model="gpt-4.1", messages=user, response_format=loose)
    with FakeOpenAIResponses(Reply([Text("{}")])) as fake:
        text = {"format": {"type": "json_schema", "name": "X", "schema": schema, "strict": True}}
        with pytest.raises(openai.BadRequestError, match=words):
            chat(fake).responses.create(model="gpt-5", input="x", text=text)
        text = {"format": {"type": "json_schema", "schema": CLOSED}}
        with pytest.raises(openai.BadRequestError, match="Missing required parameter"):
            chat(fake).responses.create(model="gpt-5", input="x", text=text)


def test_anthropic_output_schemas_must_be_closed() -> None:
    with FakeAnthropic(Reply([Text("{}")]), Reply([Text("{}")])) as fake:
        client = anthropic.Anthropic(base_url=fake.base_url, api_key="test", max_retries=0)
        ask = {"model": "claude-sonnet-4-6", "max_tokens": 64}
        user = [{"role": "user", "content": "x"}]
        config = {"format": {"type": "json_schema", "schema": OPEN}}
        with pytest.raises(anthropic.BadRequestError, match="must be explicitly set to false"):
            client.messages.create(**ask, messages=user, output_config=config)
        config = {"format": {"type": "json_schema", "schema": CLOSED}}
        client.messages.create(**ask, messages=user, output_config=config)


def test_gemini_json_output_needs_the_json_mime_type_and_no_tools_before_3() -> None:
    with FakeGemini(Reply([Text("{}")])) as fake:
        options = types.HttpOptions(base_url=fake.base_url)
        client = genai.Client(api_key="test", http_options=options)
        with pytest.raises(errors.ClientError, match="response_mime_type"):
            client.models.generate_content(
                model="gemini-2.5-flash", contents="x", config={"response_json_schema": CLOSED}
            )
        tools = [{"function_declarations": [{"name": "f", "description": "f"}]}]
        config = {"response_mime_type": "application/json", "tools": tools}
        with pytest.raises(errors.ClientError, match="Function calling with a response mime"):
            client.models.generate_content(model="gemini-2.5-flash", contents="x", config=config)
