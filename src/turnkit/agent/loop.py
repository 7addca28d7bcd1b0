"""The agent loop: call the model, run the tools it asks for, repeat.

One :class:`AgentLoop` per agent holds what every request shares (model, tools,
settings, the context pipeline); one :class:`RunState` per run holds what the
run has produced so far, so that a cancelled run can still leave a
consistent history behind.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from turnkit._sync import maybe_await
from turnkit.agent._compacting import RunCompaction
from turnkit.agent.approvals import (
    Approval,
    ApprovalRequest,
    answer_for,
    decide,
    needs_approval,
    pending_calls,
)
from turnkit.agent.compaction import Compaction, TokenReport, summariser_for
from turnkit.agent.output import (
    OUTPUT_TOOL,
    OutputProgress,
    OutputType,
    check_answer,
    request_with_output,
    take_output_call,
)
from turnkit.agent.results import RunResult, StreamEvent
from turnkit.errors import ContextTooLongError
from turnkit.messages import (
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    validate_messages,
)
from turnkit.messages.history import LlmConversion, interrupted_result
from turnkit.messages.message import stamped
from turnkit.providers.base import (
    Model,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ToolSpec,
    Usage,
)
from turnkit.tools import Tool, execute_tool_call

__all__ = ["AgentLoop", "RunState", "ToolRunner"]

_NO_USAGE = Usage()  # immutable: one for every run that starts

ToolRunner = Callable[[ToolUseBlock, Mapping[str, Tool]], Awaitable[ToolResultBlock]]
"""Runs one tool call with the tools of a run; never raises but for cancellation."""


class RunState:
    """What one run has done so far."""

    __slots__ = (
        "added",
        "answering",
        "approvals",
        "calls",
        "compacting",
        "decisions",
        "error",
        "exception",
        "input",
        "invocation_id",
        "output",
        "replaced",
        "results",
        "stop_reason",
        "usage",
    )

    def __init__(self, invocation_id: str, messages: tuple[Message, ...]) -> None:
        self.invocation_id = invocation_id
        self.input = messages
        self.added: list[Message] = []
        self.usage = _NO_USAGE
        self.stop_reason = "end_turn"
        self.error: str | None = None
        self.exception: Exception | None = None
        self.calls: tuple[ToolUseBlock, ...] = ()  # the tool calls now running
        self.results: dict[str, ToolResultBlock] = {}
        self.output: OutputProgress | None = None  # set when the agent has an output_type
        self.compacting: RunCompaction | None = None  # set when the agent has a compaction
        self.decisions: Mapping[str, Approval] | None = None  # for calls held at the input's end
        self.approvals: tuple[ApprovalRequest, ...] = ()  # the calls this run holds
        self.replaced: Message | None = None  # the input's partial answer the run completes
        self.answering: Message | None = None  # that answer, while its calls run

    def compact_from(self, report: TokenReport | None) -> None:
        """Compact this run (its agent has a compaction), its first estimate
        starting from ``report``: the provider's count for the input's latest reply."""
        self.compacting = RunCompaction(report)

    def fail(
        self, error: str, stop_reason: str = "error", exception: Exception | None = None
    ) -> None:
        self.error, self.stop_reason, self.exception = error, stop_reason, exception

    def result(self) -> RunResult:
        """The RunResult of a run that has finished, or failed."""
        messages = tuple(self.added)
        if self.error is not None:
            return RunResult(
                False, "", messages, self.usage, self.stop_reason, self.error, self.exception
            )
        if self.approvals:
            reply = next(m for m in reversed(messages) if m.role == "assistant")
            usage, reason = self.usage, self.stop_reason
            return RunResult(True, reply.text, messages, usage, reason, approvals=self.approvals)
        output = self.output
        if output is None:
            return RunResult(True, messages[-1].text, messages, self.usage, self.stop_reason)
        text = output.text if output.text is not None else messages[-1].text
        return RunResult(
            True, text, messages, self.usage, self.stop_reason, output_data=output.value
        )

    def settled(self) -> list[Message]:
        """What the run added, with calls still running answered as interrupted."""
        added = list(self.added)
        if self.calls:
            results = {c.id: self.results.get(c.id) or interrupted_result(c) for c in self.calls}
            added.append(answer_for(self.calls, self.answering, results, self.invocation_id))
        return added

    def hold(self, calls: tuple[ToolUseBlock, ...]) -> None:
        """Stop the run: ``calls`` wait for a person's decision."""
        self.approvals = tuple(ApprovalRequest.of(call) for call in calls)
        self.stop_reason = "approval_required"


class AgentLoop:
    """Runs the model/tool loop for one agent's configuration."""

    def __init__(
        self,
        *,
        system: str | None,
        tools: Mapping[str, Tool],
        settings: ModelSettings,
        max_turns: int,
        transform_context: Callable[..., Any] | None,
        convert_to_llm: Callable[..., Any] | None,
        run_tool: ToolRunner = execute_tool_call,
        output: OutputType | None = None,
        output_retries: int = 1,
        compaction: Compaction | None = None,
        conversion: LlmConversion | None = None,
    ) -> None:
        self.system = system
        self.tools = tools
        self.specs: tuple[ToolSpec, ...] = tuple(t.spec for t in tools.values())
        self.settings = settings
        self.max_turns = max_turns
        self.transform_context = transform_context
        self.convert_to_llm = convert_to_llm
        self.run_tool = run_tool  # sessions swap in a durable one
        self.output = output
        self.output_retries = output_retries
        self.compaction = compaction
        self._summariser: Model | None = None  # compaction.model, resolved on first use
        # Messages are immutable, so what the pipeline made of a conversation
        # is kept and only the new messages of the next call are converted
        # (``conversion``: one kept elsewhere, e.g. a session's across its turns).
        if conversion is None:
            conversion = LlmConversion(convert=convert_to_llm is None)
        self._conversion = conversion

    def prepare(self, history: Sequence[Message]) -> None:
        """Convert ``history`` now (an agent's configured history, when it is
        built), so that the first request converts only what follows it."""
        pure = self.transform_context is None and self.convert_to_llm is None
        if pure and self.compaction is None and history:
            self._conversion(tuple(history))

    def with_tools(self, extra: Sequence[Tool]) -> AgentLoop:
        """A copy that also offers ``extra`` (tools a source listed for one run)."""
        if not extra:
            return self
        tools = dict(self.tools)
        for found in extra:
            if found.name in tools or (self.output is not None and found.name == OUTPUT_TOOL):
                raise ValueError(
                    f"two tools are named {found.name!r} (one from a tool source such as an "
                    "MCP server; give that source a prefix= or include=)"
                )
            tools[found.name] = found
        clone = copy.copy(self)
        clone.tools = tools
        clone.specs = tuple(t.spec for t in tools.values())
        return clone

    async def request_for(self, messages: Sequence[Message]) -> ModelRequest:
        """The request for ``messages``: transform, convert, normalize."""
        if self.transform_context is not None:
            transformed = await maybe_await(self.transform_context(list(messages)))
            messages = validate_messages(transformed, path="transform_context()")
        if self.convert_to_llm is not None:
            converted = await maybe_await(self.convert_to_llm(list(messages)))
            messages = validate_messages(converted)
        llm = self._conversion(tuple(messages))
        return ModelRequest(llm, self.system, self.specs, self.settings)

    async def context_for(self, model: Model, state: RunState) -> tuple[Message, ...] | None:
        """The run's conversation as the model sees it next, compacted when due;
        None (and a failure) when it is too long and compacting failed."""
        conversation = (*state.input, *state.added) if state.added else state.input
        compaction = self.compaction
        if compaction is None:
            return conversation
        if state.compacting is None:
            state.compacting = RunCompaction()
        if self._summariser is None and compaction.model is not None:
            self._summariser = summariser_for(compaction, model)
        try:
            return await state.compacting.context(conversation, compaction, model, self._summariser)
        except ContextTooLongError as err:
            state.fail(str(err), stop_reason="context_too_long", exception=err)
            return None

    async def run(
        self, model: Model, state: RunState, streaming: bool
    ) -> AsyncIterator[StreamEvent]:
        """Loop until a final answer, a failure or ``max_turns``; events when streaming."""
        if self.output is not None:
            state.output = OutputProgress()
        if state.decisions is not None:
            async for event in self._resume(state, streaming):
                yield event
        for _ in range(self.max_turns):
            conversation = await self.context_for(model, state)
            if conversation is None:
                return
            request = await self.request_for(conversation)
            if self.output is not None:
                request = request_with_output(self.output, model, request, state.output)
            replies: list[ModelResponse] = []
            async for event in _model_events(model, request, state, streaming, replies):
                yield event
            message = self._accept(state, replies[0]) if replies else None
            if message is None:
                return
            if streaming:
                yield StreamEvent("message", message=message)
            calls = tuple(b for b in message.content if type(b) is ToolUseBlock)
            if calls:
                held = await self._held(calls)
                ready = tuple(c for c in calls if c.id not in held) if held else calls
                if ready:
                    answer = await self._run_tools(state, ready)
                    if held:  # a partial answer: the one that completes it takes its id
                        answer = state.added[-1] = answer.clone(id=f"answer-{calls[0].id}")
                    if streaming:
                        for block in answer.content:
                            yield StreamEvent("tool_result", block=block)
                        yield StreamEvent("message", message=answer)
                if held:
                    state.hold(tuple(c for c in calls if c.id in held))
                    return
                if state.output is not None and self._output_settled(state):
                    return
                continue
            feedback = self._check_answer(state, message)
            if feedback is None:
                return
            if streaming:
                yield StreamEvent("message", message=feedback)
        turns = self.max_turns
        state.fail(
            f"The run stopped after {turns} model turn{'s' * (turns != 1)} (max_turns) "
            "without a final answer.",
            stop_reason="max_turns",
        )

    def _accept(self, state: RunState, response: ModelResponse) -> Message | None:
        """Add the model's reply to the run; None (and a failure) if it is unusable."""
        message = response.message
        state.usage += response.usage
        if message.role != "assistant":
            state.fail(f"the model replied with a {message.role} message, not an assistant one")
            return None
        if reused := _reused_call_ids(message, state.input, state.added):
            state.fail(f"the model reused tool_use id {reused!r} from earlier in the conversation")
            return None
        message = stamped(message, invocation_id=state.invocation_id)  # an id we made
        state.added.append(message)
        if state.compacting is not None:
            state.compacting.replied(message, response.usage)
        state.stop_reason = response.stop_reason
        return message

    async def _held(self, calls: tuple[ToolUseBlock, ...]) -> set[str]:
        """The ids of the calls that wait for a person's decision."""
        tools = self.tools
        return {call.id for call in calls if await needs_approval(tools.get(call.name), call)}

    async def _resume(self, state: RunState, streaming: bool) -> AsyncIterator[StreamEvent]:
        """Carry out the decisions on the calls held at the end of the input.

        Every decision is checked before any call runs (ValueError). The
        answer to the held calls' reply then holds every result, the earlier
        ones too, and takes the place of the input's partial answer.
        """
        assert state.decisions is not None
        pending = pending_calls(state.input)
        decided = decide(() if pending is None else pending.calls, state.decisions, self.tools)
        if pending is None:
            return
        if pending.answer is not None:
            state.input, state.replaced = state.input[:-1], pending.answer
        approved = {call.id: call for call in decided.run}
        calls = tuple(
            approved.get(b.id, b) for b in pending.reply.content if type(b) is ToolUseBlock
        )
        state.answering = pending.answer
        answer = await self._run_tools(state, calls, decided.denied)
        if streaming:
            for call in pending.calls:
                yield StreamEvent("tool_result", block=state.results[call.id])
            yield StreamEvent("message", message=answer)

    async def _run_tools(
        self,
        state: RunState,
        calls: tuple[ToolUseBlock, ...],
        settled: Mapping[str, ToolResultBlock] | None = None,
    ) -> Message:
        """Run a turn's calls concurrently; their results in call order.

        The calls with a result in ``settled`` (a denial), or in the answer
        being completed (``state.answering``), do not run again.
        """
        state.results = dict(settled or {})
        if state.answering is not None:
            for block in state.answering.content:
                if type(block) is ToolResultBlock:
                    state.results.setdefault(block.tool_use_id, block)
        state.calls = calls
        todo = [call for call in calls if call.id not in state.results]
        if len(todo) == 1:
            await self._run_tool(state, todo[0])
        elif todo:
            import asyncio

            async with asyncio.TaskGroup() as group:
                for call in todo:
                    group.create_task(self._run_tool(state, call))
        answer = answer_for(calls, state.answering, state.results, state.invocation_id)
        state.added.append(answer)
        state.calls, state.answering = (), None
        return answer

    async def _run_tool(self, state: RunState, call: ToolUseBlock) -> None:
        progress = state.output
        if progress is not None and progress.via_tool and call.name == OUTPUT_TOOL:
            assert self.output is not None
            state.results[call.id] = take_output_call(self.output, call, progress)
            return
        state.results[call.id] = await self.run_tool(call, self.tools)

    def _check_answer(self, state: RunState, message: Message) -> Message | None:
        """A final text answer: accepted (None), or the feedback for another try."""
        if self.output is None or state.output is None:
            return None
        feedback = check_answer(self.output, message.text, state.output)
        if feedback is None or self._output_settled(state):
            return None
        answer = Message("user", (TextBlock(feedback),), invocation_id=state.invocation_id)
        state.added.append(answer)
        return answer

    def _output_settled(self, state: RunState) -> bool:
        """Whether the run ends here: the answer was accepted, or retries are spent."""
        progress = state.output
        assert progress is not None
        if progress.accepted:
            return True
        error, progress.error = progress.error, None
        if error is None:
            return False  # ordinary tool calls: the loop goes on
        progress.failures += 1
        if progress.failures > self.output_retries:
            state.fail(f"{type(error).__name__}: {error}", exception=error)
            return True
        return False


def _reused_call_ids(message: Message, *earlier: Sequence[Message]) -> str | None:
    """A tool_use id of ``message`` that a message of ``earlier`` already used.

    The sequences are walked as they are: a reply without calls (most of
    them) costs nothing however long the conversation is.
    """
    ids = {b.id for b in message.content if type(b) is ToolUseBlock}
    if not ids:
        return None
    for messages in earlier:
        for old in messages:
            if old.role == "assistant":
                for block in old.content:
                    if type(block) is ToolUseBlock and block.id in ids:
                        return block.id
    return None


async def _model_events(
    model: Model,
    request: ModelRequest,
    state: RunState,
    streaming: bool,
    replies: list[ModelResponse],
) -> AsyncIterator[StreamEvent]:
    """Call the model; its reply goes in ``replies``, a failure into ``state``."""
    try:
        if streaming:
            async for event in model.stream(request):
                if event.type == "done":
                    replies.append(event.response)
                elif event.type == "tool_input_delta":
                    continue  # the calls are given whole (tool_use)
                else:
                    yield _stream_event(event)
            if not replies or replies[0] is None:
                raise RuntimeError("the model's stream ended without a final response")
        else:
            replies.append(await model.request(request))
    except Exception as err:
        replies.clear()
        state.fail(f"{type(err).__name__}: {err}", exception=err)


def _stream_event(event: Any) -> StreamEvent:
    if event.type == "tool_use":
        return StreamEvent("tool_use", block=event.tool_call)
    return StreamEvent(event.type, text=event.text)
