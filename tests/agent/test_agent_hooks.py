"""before_run and after_run, as SPEC section 4 describes them."""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnkit import (
    Agent,
    AgentConfig,
    ImageBlock,
    InvalidMessageError,
    Message,
    RunContext,
    RunResult,
    TextBlock,
)
from turnkit.agent.context import latest_prompt, replace_prompt
from turnkit.messages import CacheControl
from turnkit.testing import ScriptedModel

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n hook image").decode()
IMAGE = ImageBlock({"type": "base64", "media_type": "image/png", "data": PNG})


def agent_with(model: ScriptedModel, **config: Any) -> Agent:
    return Agent(AgentConfig("hooked", model=model, **config))


async def test_before_run_sees_a_full_copy_and_the_latest_user_prompt() -> None:
    seen: list[RunContext] = []
    history = [Message.user("first"), Message.assistant("answer")]
    agent = agent_with(ScriptedModel(["ok"]), history=history, before_run=seen.append)
    await agent.prompt([{"type": "text", "text": "Hello "}, IMAGE, TextBlock("there")])
    (ctx,) = seen
    assert ctx.prompt == "Hello there"
    assert ctx.messages[:2] == history
    assert ctx.messages[2].content == (TextBlock("Hello "), IMAGE, TextBlock("there"))
    assert ctx.agent_name == "hooked"
    assert ctx.invocation_id == ctx.messages[2].invocation_id


async def test_image_only_turn_has_an_empty_prompt_and_a_rewrite_is_prepended() -> None:
    seen: list[str] = []

    def hook(ctx: RunContext) -> dict[str, Any]:
        seen.append(ctx.prompt)
        return {"prompt": "Describe this image."}

    model = ScriptedModel(["A cat."])
    agent = agent_with(model, before_run=hook)
    await agent.prompt([IMAGE])
    assert seen == [""]
    assert model.requests[0].messages[0].content == (TextBlock("Describe this image."), IMAGE)
    assert agent.get_history()[0].content == (IMAGE,)


async def test_prompt_rewrite_reaches_the_model_but_history_keeps_the_original_turn() -> None:
    def hook(ctx: RunContext) -> RunContext:
        ctx.prompt = f"[context: user is in Paris] {ctx.prompt}"
        return ctx

    model = ScriptedModel(["It is sunny."])
    agent = agent_with(model, before_run=hook)
    result = await agent.prompt([IMAGE, {"type": "text", "text": "What is the weather?"}])
    sent = model.requests[0].messages[-1]
    assert sent.content == (IMAGE, TextBlock("[context: user is in Paris] What is the weather?"))
    history = agent.get_history()
    assert [m.role for m in history] == ["user", "assistant"]
    assert history[0].content == (IMAGE, TextBlock("What is the weather?"))
    assert history[1].text == "It is sunny."
    assert result.messages == (history[1],)


async def test_prompt_rewrite_replaces_all_text_blocks_at_the_first_ones_place() -> None:
    model = ScriptedModel(["ok", "ok"])
    agent = agent_with(model, before_run=lambda ctx: {"prompt": "one"})
    cached = TextBlock("a", cache=CacheControl("1h"))
    await agent.run([Message.user(IMAGE, cached, IMAGE, "b"), Message.assistant("x")])
    await agent.run([Message.user(IMAGE)])
    assert model.requests[0].messages[0].content == (
        IMAGE,
        TextBlock("one", cache=CacheControl("1h")),
        IMAGE,
    )
    assert model.requests[0].messages[1].text == "x"
    assert model.requests[1].messages[0].content == (TextBlock("one"), IMAGE)


async def test_unchanged_prompt_leaves_the_text_blocks_alone() -> None:
    model = ScriptedModel(["ok"])
    agent = agent_with(model, before_run=lambda ctx: {"prompt": ctx.prompt})
    await agent.run([Message.user("a", IMAGE, "b")])
    assert model.requests[0].messages[0].content == Message.user("a", IMAGE, "b").content


async def test_returned_messages_replace_the_input_before_the_prompt_is_applied() -> None:
    def hook(ctx: RunContext) -> dict[str, Any]:
        return {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "replaced"}]},
                *ctx.messages,
                {"role": "assistant", "content": [{"type": "text", "text": "noted"}]},
                {"role": "user", "content": [IMAGE.to_dict()]},
            ],
            "prompt": "new prompt",
        }

    model = ScriptedModel(["ok"])
    agent = agent_with(model, before_run=hook)
    await agent.run("original")
    sent = model.requests[0].messages
    assert [m.text for m in sent] == ["replaced", "original", "noted", "new prompt"]
    assert sent[-1].content == (TextBlock("new prompt"), IMAGE)


async def test_async_hooks_work_like_sync_ones() -> None:
    calls: list[str] = []

    async def before(ctx: RunContext) -> dict[str, str]:
        calls.append("before")
        return {"prompt": ctx.prompt.upper()}

    async def after(ctx: RunContext, result: RunResult) -> RunResult:
        calls.append(f"after:{ctx.prompt}")
        return replace(result, output=result.output + "!")

    model = ScriptedModel(["done"])
    result = await agent_with(model, before_run=before, after_run=after).run("go")
    assert calls == ["before", "after:GO"]
    assert model.requests[0].messages[0].text == "GO"
    assert result.output == "done!"


async def test_before_run_returning_none_changes_nothing_even_if_ctx_was_mutated() -> None:
    def hook(ctx: RunContext) -> None:
        ctx.prompt = "ignored"
        ctx.messages.clear()

    model = ScriptedModel(["ok"])
    await agent_with(model, before_run=hook).run("kept")
    assert model.requests[0].messages[0].text == "kept"


async def test_before_run_returning_invalid_messages_raises_without_a_model_call() -> None:
    model = ScriptedModel(["ok"])
    agent = agent_with(
        model, before_run=lambda ctx: {"messages": [{"role": "user", "content": "text"}]}
    )
    with pytest.raises(InvalidMessageError, match=r"^before_run\(\)\.messages\[0\]\.content"):
        await agent.prompt("hi")
    assert model.requests == []
    assert agent.get_history() == []


async def test_before_run_returning_something_else_raises_type_error() -> None:
    agent = agent_with(ScriptedModel(["ok"]), before_run=lambda ctx: "text")
    with pytest.raises(TypeError, match="before_run must return None, the ctx, or a dict"):
        await agent.run("hi")
    agent = agent_with(ScriptedModel(["ok"]), before_run=lambda ctx: {"promt": "typo"})
    with pytest.raises(TypeError, match="unknown fields"):
        await agent.run("hi")


async def test_after_run_sees_the_result_and_failed_results_too() -> None:
    seen: list[tuple[str, RunResult]] = []
    model = ScriptedModel([])  # every call fails: the script is empty
    agent = agent_with(model, after_run=lambda ctx, result: seen.append((ctx.prompt, result)))
    result = await agent.run("hi")
    assert not result.success
    assert seen == [("hi", result)]


async def test_after_run_can_fail_a_prompt_and_then_history_is_unchanged() -> None:
    def veto(ctx: RunContext, result: RunResult) -> RunResult:
        return replace(result, success=False, error="rejected by policy")

    agent = agent_with(ScriptedModel(["secret"]), after_run=veto)
    result = await agent.prompt("tell me")
    assert (result.success, result.error) == (False, "rejected by policy")
    assert agent.get_history() == []


async def test_after_run_replacement_messages_are_what_prompt_keeps() -> None:
    def redact(ctx: RunContext, result: RunResult) -> RunResult:
        return replace(
            result,
            messages=[{"role": "assistant", "content": [{"type": "text", "text": "[redacted]"}]}],
        )

    agent = agent_with(ScriptedModel(["secret"]), after_run=redact)
    await agent.prompt("tell me")
    assert [m.text for m in agent.get_history()] == ["tell me", "[redacted]"]


async def test_after_run_returning_something_else_raises_type_error() -> None:
    agent = agent_with(ScriptedModel(["ok"]), after_run=lambda ctx, result: "nope")
    with pytest.raises(TypeError, match="after_run must return None or a RunResult"):
        await agent.prompt("hi")
    assert agent.get_history() == []


blocks = st.lists(st.one_of(st.text(max_size=5).map(TextBlock), st.just(IMAGE)), max_size=6)


@given(before=blocks, after=st.lists(st.sampled_from(["a", "b"]), max_size=2), text=st.text())
def test_replace_prompt_puts_one_text_block_where_the_first_was(
    before: list[Any], after: list[str], text: str
) -> None:
    messages = (Message.user("older"), Message.user(*before), *map(Message.assistant, after))
    out = replace_prompt(messages, text)
    assert out[0] == messages[0] and out[2:] == messages[2:]
    content = out[1].content
    assert out[1].text == text
    assert [b for b in content if type(b) is not TextBlock] == [
        b for b in before if type(b) is not TextBlock
    ]
    texts = [i for i, b in enumerate(before) if type(b) is TextBlock]
    where = sum(1 for b in before[: texts[0]] if type(b) is not TextBlock) if texts else 0
    assert content[where] == TextBlock(text)
    assert latest_prompt(out) == text
