"""History import and export: what users give, what they get back, and the errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fakes import FakeOpenAIChat, Reply, Text
from turnkit import Agent, AgentConfig, InvalidMessageError
from turnkit.messages import (
    Message,
    Origin,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    from_anthropic,
    from_gemini,
    from_openai_chat,
    from_openai_responses,
    to_anthropic,
    to_gemini,
    to_openai_chat,
    to_openai_responses,
)
from turnkit.providers.openai_chat import OpenAIChatModel

PNG = "iVBORw0KGgo="

# The agentcore / OpenAI style many libraries store.
CHAT = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is 2+40?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 2, "b": 40}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "42"},
    {"role": "assistant", "content": "42."},
]


def test_openai_chat_transcript_becomes_turnkit_messages() -> None:
    history = from_openai_chat(CHAT, model="gpt-4.1")
    assert [m.to_dict() for m in history] == [
        {"role": "system", "content": [{"type": "text", "text": "You are terse."}]},
        {"role": "user", "content": [{"type": "text", "text": "What is 2+40?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "call_1", "name": "add", "input": {"a": 2, "b": 40}}
            ],
            "origin": {"provider": "openai", "model": "gpt-4.1"},
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "42"}],
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "42."}],
            "origin": {"provider": "openai", "model": "gpt-4.1"},
        },
    ]
    assert to_openai_chat(history) == CHAT


def test_agent_continues_a_conversation_imported_from_openai_chat() -> None:
    with FakeOpenAIChat(Reply([Text("You asked about 2+40.")])) as fake:
        model = OpenAIChatModel("gpt-4.1", base_url=fake.base_url + "/v1", api_key="test")
        agent = Agent(
            AgentConfig("a", model=model, history=from_openai_chat(CHAT, model="gpt-4.1"))
        )
        result = agent.prompt_sync("What did I ask?")
        sent = fake.requests[-1].body["messages"]
    assert result.output == "You asked about 2+40."
    assert sent[:5] == CHAT
    assert sent[-1] == {"role": "user", "content": "What did I ask?"}
    assert [m.role for m in agent.get_history()] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]


def test_anthropic_thinking_keeps_its_origin_so_replay_rules_hold() -> None:
    transcript = {
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "Hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "greet", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "Hello!"},
                ],
            },
        ],
    }
    history = from_anthropic(transcript, model="claude-sonnet-4-5")
    assert history[2].origin == Origin("anthropic", "claude-sonnet-4-5")
    assert history[2].content[:2] == (
        ThinkingBlock("greet", "sig"),
        ThinkingBlock("", "opaque", redacted=True),
    )
    assert to_anthropic(history) == {
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
            transcript["messages"][1],
        ],
    }


def test_thinking_another_provider_wrote_is_refused_unless_told_what_to_do() -> None:
    history = from_anthropic(
        {
            "messages": [
                {"role": "user", "content": "Hi"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "greet", "signature": "sig"},
                        {"type": "text", "text": "Hello!"},
                    ],
                },
            ]
        },
        model="claude-sonnet-4-5",
    )
    with pytest.raises(InvalidMessageError) as caught:
        to_openai_chat(history)
    assert caught.value.path == "messages[1].content[0]"
    assert "written by anthropic:claude-sonnet-4-5" in str(caught.value)
    assert to_openai_chat(history, thinking="text")[1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "<thinking>\ngreet\n</thinking>"},
            {"type": "text", "text": "Hello!"},
        ],
    }
    assert to_openai_chat(history, thinking="drop")[1] == {"role": "assistant", "content": "Hello!"}
    with pytest.raises(InvalidMessageError, match="written by anthropic"):
        to_gemini(history)
    with pytest.raises(InvalidMessageError, match="written by anthropic"):
        to_openai_responses(history)


def test_responses_items_with_reasoning_round_trip_in_place() -> None:
    items = [
        {"role": "user", "content": "Add 1 and 2"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "add"}],
            "encrypted_content": "enc",
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "add",
            "arguments": '{"a": 1, "b": 2}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "3"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "3", "annotations": []}],
        },
    ]
    history = from_openai_responses(items, model="gpt-5")
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]
    assert history[1].content[1] == ToolUseBlock("call_1", "add", {"a": 1, "b": 2})
    exported = to_openai_responses(history)
    assert exported[1] == items[1]
    assert exported[2] == items[2]
    assert from_openai_responses(exported, model="gpt-5") == history


def test_gemini_camel_case_and_unnamed_responses_are_read() -> None:
    transcript = {
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "Weather?"}]},
            {
                "role": "model",
                "parts": [
                    {
                        "functionCall": {"name": "weather", "args": {"city": "Oslo"}},
                        "thoughtSignature": "c2ln",
                    }
                ],
            },
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "weather", "response": {"temp": 3}}}],
            },
        ],
    }
    history = from_gemini(transcript)
    assert history[2].content == (
        ThinkingBlock("", "c2ln"),
        ToolUseBlock("call_1_0", "weather", {"city": "Oslo"}),
    )
    assert history[3].content == (ToolResultBlock("call_1_0", json.dumps({"temp": 3})),)
    exported = to_gemini(history)
    assert exported["contents"][1]["parts"][0]["thought_signature"] == "c2ln"


@pytest.mark.parametrize(
    ("convert", "data", "path", "words"),
    [
        (
            from_openai_chat,
            [{"role": "function", "content": "x"}],
            "messages[0].role",
            "unknown role",
        ),
        (from_openai_chat, "hi", "messages", "expected a list"),
        (
            from_openai_chat,
            [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{oops"},
                        }
                    ],
                }
            ],
            "messages[0].tool_calls[0].function.arguments",
            "not valid JSON",
        ),
        (
            from_openai_chat,
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image_url",
                            "image_url": {"url": "https://x.test/a.png", "detail": "high"},
                        }
                    ],
                }
            ],
            "messages[0].content[0].image_url.detail",
            "no detail setting",
        ),
        (
            from_openai_chat,
            [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}],
            "messages[0].content[0].type",
            "cannot represent",
        ),
        (
            from_openai_chat,
            [{"role": "user", "content": "x", "name": "bob"}],
            "messages[0].name",
            "no place",
        ),
        (
            from_openai_chat,
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@"}}
                    ],
                }
            ],
            "messages[0].content[0].image_url.url",
            "invalid base64",
        ),
        (
            from_openai_chat,
            [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c", "function": {"name": "f"}}],
                },
                {"role": "tool", "tool_call_id": "c", "content": "1"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c", "function": {"name": "f"}}],
                },
            ],
            "messages[2].tool_calls[0].id",
            "duplicate tool call id",
        ),
        (
            from_anthropic,
            {
                "messages": [
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "server_tool_use", "id": "s", "name": "web", "input": {}}
                        ],
                    }
                ]
            },
            "messages[0].content[0].type",
            "cannot represent",
        ),
        (
            from_anthropic,
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/png",
                                    "data": "x",
                                },
                            }
                        ],
                    }
                ]
            },
            "messages[0].content[0].source.data",
            "base64",
        ),
        (
            from_anthropic,
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
                    }
                ]
            },
            "messages[0].content[0]",
            "not allowed in a user message",
        ),
        (
            from_gemini,
            {
                "contents": [
                    {
                        "role": "user",
                        "parts": [
                            {
                                "file_data": {
                                    "mime_type": "application/pdf",
                                    "file_uri": "gs://b/f.pdf",
                                }
                            }
                        ],
                    }
                ]
            },
            "contents[0].parts[0].file_data.file_uri",
            "gs://",
        ),
        (
            from_gemini,
            {"contents": [{"role": "user", "parts": [{"executable_code": {"code": "1"}}]}]},
            "contents[0].parts[0].executable_code",
            "no place",
        ),
        (
            from_openai_responses,
            [{"type": "item_reference", "id": "msg_1"}],
            "input[0].type",
            "cannot represent",
        ),
        (
            from_openai_responses,
            [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [
                        {
                            "type": "output_text",
                            "text": "x",
                            "annotations": [{"type": "url_citation"}],
                        }
                    ],
                }
            ],
            "input[0].content[0].annotations",
            "no annotations",
        ),
    ],
)
def test_what_cannot_be_represented_raises_with_its_path(
    convert: Any, data: Any, path: str, words: str
) -> None:
    with pytest.raises(InvalidMessageError) as caught:
        convert(data)
    assert caught.value.path == path
    assert words in str(caught.value)
    assert str(caught.value).startswith(path)


def test_export_refuses_blocks_a_format_has_no_form_for() -> None:
    image_result = [
        Message.user("look"),
        Message.assistant(ToolUseBlock("c1", "shot", {})),
        Message.user(
            ToolResultBlock(
                "c1",
                [
                    TextBlock("see"),
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                    },
                ],
            )
        ),
    ]
    for export in (to_openai_chat, to_gemini):
        with pytest.raises(InvalidMessageError) as caught:
            export(image_result)
        assert caught.value.path == "messages[2].content[0].content[1]"
    summary = [Message("user", (TextBlock("earlier"),), type="compaction")]
    with pytest.raises(InvalidMessageError, match="default_convert_to_llm") as caught:
        to_anthropic(summary)
    assert caught.value.path == "messages[0].type"
    with pytest.raises(InvalidMessageError) as caught:
        to_openai_chat([{"role": "user", "content": "not blocks"}])
    assert caught.value.path == "messages[0].content"


def test_documented_normalisations() -> None:
    history = [
        Message.system("One."),
        Message.system("Two."),
        Message.user("Hi"),
        Message.assistant(ToolUseBlock("c1", "f", {}), TextBlock("calling")),
        Message.user(ToolResultBlock("c1", "boom", is_error=True), TextBlock("and more")),
    ]
    chat = from_openai_chat(to_openai_chat(history))
    # a result-and-text user message comes back as two; reasoning/text before calls; no is_error
    assert [m.role for m in chat] == ["system", "system", "user", "assistant", "user", "user"]
    assert chat[3].content == (TextBlock("calling"), ToolUseBlock("c1", "f", {}))
    assert chat[4].content == (ToolResultBlock("c1", "boom"),)
    anthropic = from_anthropic(to_anthropic(history))
    # system text becomes one leading system message
    assert anthropic[0] == Message("system", (TextBlock("One."), TextBlock("Two.")))
    assert anthropic[3].content[0] == ToolResultBlock("c1", "boom", is_error=True)
    gemini = from_gemini(to_gemini([*history, Message.user("again")]))
    # consecutive user messages merge into one content
    assert gemini[-1].content[-2:] == (TextBlock("and more"), TextBlock("again"))
    assert from_openai_chat([{"role": "developer", "content": "Dev."}]) == [Message.system("Dev.")]


# What Claude Code and the Anthropic docs write for a failed tool call.
CLAUDE_CODE_ERROR = {
    "messages": [
        {"role": "user", "content": "List the files."},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "ls"}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01",
                    "is_error": True,
                    "content": [
                        {"type": "text", "text": "Exit code 2"},
                        {"type": "text", "text": "ls: cannot access 'x': No such file"},
                    ],
                }
            ],
        },
        {"role": "assistant", "content": "The listing failed."},
    ]
}


def test_an_error_result_with_text_blocks_is_imported_as_its_joined_text() -> None:
    history = from_anthropic(CLAUDE_CODE_ERROR)
    assert history[2].content == (
        ToolResultBlock("toolu_01", "Exit code 2\nls: cannot access 'x': No such file", True),
    )
    exported = to_anthropic(history)
    expected = json.loads(json.dumps(CLAUDE_CODE_ERROR))
    result = expected["messages"][2]["content"][0]
    result["content"] = "Exit code 2\nls: cannot access 'x': No such file"
    expected["messages"][0]["content"] = [{"type": "text", "text": "List the files."}]
    expected["messages"][3]["content"] = [{"type": "text", "text": "The listing failed."}]
    assert exported == expected
    assert from_anthropic(exported) == history


@pytest.mark.parametrize(
    ("part", "path", "words"),
    [
        (
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            "messages[1].content[0].content[1]",
            "holds text only in turnkit, not an image block",
        ),
        (
            {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}},
            "messages[1].content[0].content[1].cache_control",
            "no cache mark",
        ),
    ],
)
def test_an_error_result_that_cannot_be_one_string_is_refused_with_its_path(
    part: dict[str, Any], path: str, words: str
) -> None:
    transcript = {
        "messages": [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t",
                        "is_error": True,
                        "content": [{"type": "text", "text": "failed"}, part],
                    }
                ],
            },
        ]
    }
    with pytest.raises(InvalidMessageError) as caught:
        from_anthropic(transcript)
    assert caught.value.path == path
    assert str(caught.value).startswith(path) and words in str(caught.value)
    ok = json.loads(json.dumps(transcript))
    ok["messages"][1]["content"][0]["is_error"] = False  # a successful result keeps its parts
    assert len(from_anthropic(ok)[1].content[0].content) == 2
