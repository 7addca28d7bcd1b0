"""The provider contract, for every provider: sent whole, or refused before sending.

Generated histories hold what providers disagree about: images and files in
user and assistant messages (inline and by URL), file types each API takes
or not, tool calls whose arguments were not a JSON object, empty and blank
text, and unicode edge cases. For every history and every provider, the
outcome is one of:

- accepted by the provider's strict fake, with every input block accounted
  for in the request: each non-blank text, image, file, tool call and tool
  result is there (counted), blank text is not (the documented rule);
- ``UnsupportedContentError`` naming the path of an image or file the
  provider cannot take, or ``InvalidMessageError`` for a history with
  nothing to send, before any request reaches the fake.

Streaming and non-streaming agree: the same outcome and the same request body.
The local model (no fake: it runs in-process) is held to the same contract
on the prompt it would generate from.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fakes import Reply, Text
from fakes.models import REMOTES, serve
from turnkit import (
    FileBlock,
    ImageBlock,
    InvalidMessageError,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UnsupportedContentError,
    normalize_tool_call_history,
)
from turnkit.providers import Model, ModelRequest, ToolSpec
from turnkit.providers.edges import RAW_ARGUMENTS, tool_call

NAMES = ("add", "search_orders")
TOOLS = tuple(ToolSpec(name, f"The {name} tool", {"type": "object"}) for name in NAMES)
PROVIDERS = [*REMOTES, "local"]

unicode_text = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20),
    st.sampled_from(
        [
            "e\u0301",  # a combining accent
            "\u202eevil\u202c",  # right-to-left override
            "\U0001f469\u200d\U0001f4bb",  # an emoji joined by ZWJ
            "line\u2028separator",
            "\ufeffbom",
            "tab\tand\r\nnewline",
            "\x00nul",
        ]
    ),
)
blank_text = st.sampled_from(["", " ", "\n", "\t \r\n"])


class Tokens:
    """Unique payloads, so that each block can be found (and counted) in a request."""

    def __init__(self) -> None:
        self.count = 0
        self.calls = 0

    def next(self) -> str:
        self.count += 1
        return f"tok{self.count:04d}"


def image(draw: st.DrawFn, tokens: Tokens) -> ImageBlock:
    token = tokens.next()
    if draw(st.booleans()):
        data = base64.b64encode(b"\x89PNG" + token.encode()).decode()
        return ImageBlock({"type": "base64", "media_type": "image/png", "data": data})
    return ImageBlock({"type": "url", "url": f"https://example.com/{token}.png"})


def file(draw: st.DrawFn, tokens: Tokens) -> FileBlock:
    token = tokens.next()
    media_type, suffix = draw(
        st.sampled_from(
            [("application/pdf", "pdf"), ("text/plain", "txt"), ("application/zip", "zip")]
        )
    )
    name = f"{token}.{suffix}"
    if draw(st.booleans()):
        data = base64.b64encode(f"file {token}".encode()).decode()
        return FileBlock({"type": "base64", "media_type": media_type, "data": data}, name)
    source = {"type": "url", "url": f"https://example.com/{name}"}
    if draw(st.booleans()):
        source["media_type"] = media_type
    return FileBlock(source, name)


def text(draw: st.DrawFn) -> TextBlock:
    return TextBlock(draw(st.one_of(unicode_text, blank_text)))


def media(draw: st.DrawFn, tokens: Tokens) -> ImageBlock | FileBlock:
    return image(draw, tokens) if draw(st.booleans()) else file(draw, tokens)


def call(draw: st.DrawFn, tokens: Tokens) -> ToolUseBlock:
    tokens.calls += 1
    call_id, name = f"call_{tokens.calls}", draw(st.sampled_from(NAMES))
    arguments = draw(
        st.one_of(
            st.dictionaries(st.sampled_from("abc"), st.integers() | unicode_text, max_size=2),
            st.sampled_from(['{"a": 1', "[1, 2]", '{"a": NaN}', "not json", ""]),
        )
    )
    return tool_call(call_id, name, arguments)  # as a provider parses a model's call


def result(draw: st.DrawFn, tokens: Tokens, call_id: str) -> ToolResultBlock:
    if draw(st.booleans()):
        parts = [text(draw), *([image(draw, tokens)] if draw(st.booleans()) else [])]
        return ToolResultBlock(call_id, tuple(parts))
    content = draw(st.one_of(unicode_text, blank_text))
    return ToolResultBlock(call_id, content, draw(st.booleans()))


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    tokens = Tokens()
    history: list[Message] = []
    if draw(st.booleans()):  # a history that starts with the assistant
        history.append(Message("assistant", (text(draw),)))
    for _ in range(draw(st.integers(1, 3))):
        user = [text(draw) for _ in range(draw(st.integers(0, 2)))]
        user += [media(draw, tokens) for _ in range(draw(st.integers(0, 2)))]
        history.append(Message("user", tuple(user) or (text(draw),)))
        calls = [call(draw, tokens) for _ in range(draw(st.integers(0, 2)))]
        said = [text(draw)] if draw(st.booleans()) or not calls else []
        shown = [media(draw, tokens)] if draw(st.integers(0, 4)) == 0 else []
        history.append(Message("assistant", (*said, *shown, *calls)))
        if calls:
            history.append(Message("user", tuple(result(draw, tokens, c.id) for c in calls)))
    return history


# -- running one request --------------------------------------------------------------


@pytest.fixture(scope="module", params=PROVIDERS)
def provider(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any, Model]]:
    if request.param == "local":
        from turnkit.providers.local import LocalModel

        yield "local", None, LocalModel()
        return
    with serve(request.param) as (fake, model):
        yield request.param, fake, model


async def run_remote(fake: Any, model: Model, request: ModelRequest) -> list[Any]:
    """Each of request() and stream(): (body sent or None, error or None)."""
    outcomes = []
    for streaming in (False, True):
        before = len(fake.requests)
        fake.script(Reply([Text("Done.")]))
        try:
            if streaming:
                events = [event async for event in model.stream(request)]
                assert events[-1].response.text == "Done."
            else:
                assert (await model.request(request)).text == "Done."
        except (UnsupportedContentError, InvalidMessageError) as err:
            assert len(fake.requests) == before, "refused after a request was sent"
            outcomes.append((None, err))
            continue
        assert len(fake.requests) == before + 1
        outcomes.append((fake.requests[-1].body, None))
    return outcomes


def drain(fake: Any) -> None:
    """Leave no scripted reply behind (a refused request consumes none)."""
    while fake.pending:
        fake.next_reply(None)


# -- what the request must hold ---------------------------------------------------------


def expected(messages: list[Message]) -> tuple[Counter[str], set[str]]:
    """What the request must hold: counts of media and tool blocks, and media payloads."""
    counts: Counter[str] = Counter()
    payloads: set[str] = set()
    for message in messages:
        for block in message.content:
            parts = (
                block.content
                if isinstance(block, ToolResultBlock) and not isinstance(block.content, str)
                else (block,)
            )
            for part in parts:
                if isinstance(part, (ImageBlock, FileBlock)):
                    counts["media"] += 1
                    payloads.add(payload_token(part))
            if isinstance(block, ToolUseBlock):
                counts["tool_use"] += 1
                counts[RAW_ARGUMENTS] += RAW_ARGUMENTS in block.input
            elif isinstance(block, ToolResultBlock):
                counts["tool_result"] += 1
    return +counts, payloads


def payload_token(block: ImageBlock | FileBlock) -> str:
    source = block.source
    if hasattr(source, "url"):
        return re.search(r"tok\d{4}", source.url).group()  # type: ignore[union-attr]
    raw = base64.b64decode(source.data)
    return re.search(rb"tok\d{4}", raw).group().decode()  # type: ignore[union-attr]


MEDIA_TYPES = frozenset({"image", "document", "image_url", "file", "input_image", "input_file"})
MEDIA_KEYS = frozenset({"inlineData", "fileData", "inline_data", "file_data"})


def found(provider: str, body: Any) -> tuple[Counter[str], set[str]]:
    """The same, counted in the wire request."""
    flat = json.dumps(body, ensure_ascii=False)
    counts: Counter[str] = Counter(
        media=_count_media(body),
        tool_use=_count_calls(provider, body),
        tool_result=_count_results(provider, body),
    )
    counts[RAW_ARGUMENTS] = flat.count(RAW_ARGUMENTS)
    payloads = set(re.findall(r"tok\d{4}", flat))
    for data in re.findall(r"[A-Za-z0-9+/]{8,}={0,2}", flat):  # inline payloads
        try:
            raw = base64.b64decode(data, validate=True)
        except ValueError:
            continue
        payloads.update(m.decode() for m in re.findall(rb"tok\d{4}", raw))
    return +counts, payloads


def _count_media(value: Any) -> int:
    if isinstance(value, list):
        return sum(map(_count_media, value))
    if not isinstance(value, dict):
        return 0
    if value.get("type") in MEDIA_TYPES or MEDIA_KEYS & value.keys():
        return 1  # one media part, however its payload is nested
    return sum(map(_count_media, value.values()))


def _count_calls(provider: str, body: Any) -> int:
    if provider == "anthropic":
        return sum(b.get("type") == "tool_use" for m in body["messages"] for b in m["content"])
    if provider == "openai":
        return sum(len(m.get("tool_calls") or ()) for m in body["messages"])
    if provider == "openai-responses":
        return sum(item.get("type") == "function_call" for item in body["input"])
    return sum("functionCall" in p for c in body["contents"] for p in c["parts"])


def _count_results(provider: str, body: Any) -> int:
    if provider == "anthropic":
        return sum(b.get("type") == "tool_result" for m in body["messages"] for b in m["content"])
    if provider == "openai":
        return sum(m["role"] == "tool" for m in body["messages"])
    if provider == "openai-responses":
        return sum(item.get("type") == "function_call_output" for item in body["input"])
    return sum("functionResponse" in p for c in body["contents"] for p in c["parts"])


def check_texts(messages: list[Message], body: Any) -> None:
    flat = json.dumps(body, ensure_ascii=False)
    for message in messages:
        for block in message.content:
            if isinstance(block, TextBlock) and block.text.strip():
                assert json.dumps(block.text, ensure_ascii=False)[1:-1] in flat
    assert not re.search(r'"text": "(?:\s|\\[ntr])*"', flat), "blank text was sent"


def check_refusal(messages: list[Message], error: Exception) -> None:
    """A refusal names an image or file of the request, or says there is nothing to send."""
    if isinstance(error, InvalidMessageError):
        assert error.path == "messages" and "nothing to send" in str(error)
        assert not any(
            not isinstance(b, TextBlock) or b.text.strip()
            for m in messages
            if m.role != "system"
            for b in m.content
        )
        return
    path = re.search(r"messages\[(\d+)\]\.content\[(\d+)\](?:\.content\[(\d+)\])?", str(error))
    assert path is not None, f"no path in {error}"
    block: Any = messages[int(path[1])].content[int(path[2])]
    if path[3] is not None:
        block = block.content[int(path[3])]
    assert isinstance(block, (ImageBlock, FileBlock)), f"{error} names a {block.type} block"


# -- the property -------------------------------------------------------------------------


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=histories())
def test_every_history_is_sent_whole_or_refused_before_sending(
    provider: tuple[str, Any, Model], history: list[Message]
) -> None:
    name, fake, model = provider
    messages = normalize_tool_call_history(history)
    request = ModelRequest(tuple(messages), "Be brief.", TOOLS)
    if name == "local":
        check_local(model, request, messages)
        return
    try:
        outcomes = asyncio.run(run_remote(fake, model, request))
    finally:
        drain(fake)
    (whole, whole_error), (streamed, streamed_error) = outcomes
    assert type(whole_error) is type(streamed_error) and str(whole_error) == str(streamed_error)
    if whole_error is not None:
        event(f"refused: {type(whole_error).__name__}")
        check_refusal(messages, whole_error)
        return
    event("accepted")
    assert strip_stream_flags(whole) == strip_stream_flags(streamed)
    assert found(name, whole) == expected(messages)
    check_texts(messages, whole)


def strip_stream_flags(body: Any) -> Any:
    return {k: v for k, v in body.items() if k not in ("stream", "stream_options")}


def check_local(model: Any, request: ModelRequest, messages: list[Message]) -> None:
    try:
        prompt = asyncio.run(model.build_prompt(request))
    except (UnsupportedContentError, InvalidMessageError) as err:
        check_refusal(messages, err)
        return
    assert not any(isinstance(b, (ImageBlock, FileBlock)) for m in messages for b in m.content)
    # Assistant turns are written as the JSON the model is asked to answer in.
    joined = "\n".join(m["content"] for m in prompt.messages)
    for message in messages:
        for block in message.content:
            if isinstance(block, TextBlock) and block.text.strip():
                escaped = json.dumps(block.text, ensure_ascii=False)[1:-1]
                assert block.text in joined or escaped in joined
            elif isinstance(block, ToolUseBlock):
                assert json.dumps({"tool": block.name}, ensure_ascii=False)[:-1] in joined
    assert joined.count(RAW_ARGUMENTS) == expected(messages)[0][RAW_ARGUMENTS]
