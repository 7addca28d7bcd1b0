"""Agent: one model, its tools and hooks, and a conversation history."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from turnkit._sync import run_sync
from turnkit._values import uuid4_str
from turnkit.agent._compacting import with_compactions
from turnkit.agent._inputs import (
    approvals_input,
    history_input,
    message_input,
    prompt_blocks,
    run_input,
)
from turnkit.agent.approvals import Approval
from turnkit.agent.compaction import Compaction, TokenReport
from turnkit.agent.config import AgentConfig, resolve_agent_model
from turnkit.agent.context import RunContext, apply_after_run, apply_before_run, latest_prompt
from turnkit.agent.loop import AgentLoop, RunState
from turnkit.agent.output import OUTPUT_TOOL, OutputType
from turnkit.agent.results import RunResult, StreamEvent
from turnkit.messages import Block, Message, validate_messages
from turnkit.messages.checks import need_str
from turnkit.providers.base import Model, settings_from
from turnkit.tools import Tool, ToolSource, gather_tools, is_tool_source, tool

__all__ = ["Agent"]

RunInput = str | Sequence[Message | dict[str, Any]]
PromptInput = str | Sequence[Block | dict[str, Any]]
Approvals = Mapping[str, bool | Approval]


class Agent:
    """An LLM agent: a model, a system prompt, tools, hooks and a history.

    >>> from turnkit.testing import ScriptedModel
    >>> agent = Agent(AgentConfig("helper", model=ScriptedModel(["Hi!"])))
    >>> agent.prompt_sync("Hello").output
    'Hi!'
    >>> [m.role for m in agent.get_history()]
    ['user', 'assistant']

    ``run()`` and ``stream()`` are fresh: they neither read nor write the
    history. ``prompt()`` adds one user turn and, on success, appends it with
    the run's replies to the history. Every input is validated before
    anything happens (:class:`~turnkit.InvalidMessageError`). A model or
    provider error fails the run (``RunResult.success`` is False); errors in
    hooks and in ``transform_context``/``convert_to_llm`` propagate.

    With ``AgentConfig.backend`` (a :mod:`turnkit.backends` transport), the
    runs go to that external agent instead, text only; ``aclose()`` (or
    ``async with agent:``) ends the process an ``AcpBackend`` keeps for
    ``prompt()``.
    """

    def __init__(self, config: AgentConfig) -> None:
        if not isinstance(config, AgentConfig):
            raise TypeError(f"Agent takes an AgentConfig, got {type(config).__name__}")
        if not isinstance(config.name, str) or not config.name:
            raise ValueError("AgentConfig.name must be a non-empty string")
        if type(config.max_turns) is not int or config.max_turns < 1:
            raise ValueError(f"AgentConfig.max_turns must be an int >= 1, got {config.max_turns!r}")
        if config.thinking_replay not in ("drop", "text"):
            problem = f"must be 'drop' or 'text', got {config.thinking_replay!r}"
            raise ValueError(f"AgentConfig.thinking_replay {problem}")
        self._config = config
        self._backend = None if config.backend is None else _bind_backend(config)
        self._history = history_input(config.history)
        tools, self._sources = _tool_map(config.tools)
        self._loop = AgentLoop(
            system=None if config.system is None else need_str(config.system, "system"),
            tools=tools,
            settings=settings_from(
                {
                    "max_output_tokens": config.max_output_tokens,
                    "temperature": config.temperature,
                    "thinking": config.thinking,
                    "thinking_replay": config.thinking_replay,
                    "image_policy": config.image_policy,
                }
            ),
            max_turns=config.max_turns,
            transform_context=config.transform_context,
            convert_to_llm=config.convert_to_llm,
            output=_output_type(config, tools),
            output_retries=config.output_retries,
            compaction=_compaction(config),
        )
        self._loop.prepare(self._history)
        self._model: Model | None = None
        self._report: TokenReport | None = None  # the provider's count for the last reply
        import threading  # here, not at the top: it keeps `import turnkit` lighter

        self._busy = threading.Lock()

    @property
    def config(self) -> AgentConfig:
        """The configuration this agent was built from."""
        return self._config

    @property
    def name(self) -> str:
        return self._config.name

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The agent's tools, in the order given."""
        return tuple(self._loop.tools.values())

    def __repr__(self) -> str:
        return f"<Agent {self.name!r}>"

    # -- history -------------------------------------------------------------

    def get_history(self) -> list[Message]:
        """The conversation so far, as a new list each call."""
        return list(self._history)

    def add_message(self, message: Message | dict[str, Any]) -> None:
        """Add ``message`` (a dict or Message) to the history, without a run.

        A message with the same non-empty ``id`` as one in the history
        replaces it in place; any other is appended. No hook runs. Raises
        RuntimeError while a ``prompt()`` or ``continue_run()`` is in progress.
        """
        checked = message_input(message)
        with self._exclusive("add_message()"):
            history = list(self._history)
            for index, old in enumerate(history):
                if checked.id and old.id == checked.id:
                    history[index] = checked
                    break
            else:
                history.append(checked)
            self._history = list(validate_messages(history, path="history"))

    # -- runs ----------------------------------------------------------------

    def validate_run_input(self, input: RunInput) -> tuple[Message, ...]:
        """The messages ``run(input)`` would start from; raises InvalidMessageError.

        Callers that must refuse bad input before doing anything else (the
        orchestrator emits progress only for valid input) check with this.
        An agent with a backend takes a str only: any list raises.
        """
        if self._backend is not None:
            return self._backend.run_input(input)
        return run_input(input)

    async def run(self, input: RunInput, *, approvals: Approvals | None = None) -> RunResult:
        """Run on ``input`` (a str or a list of messages), apart from the history.

        ``approvals`` decides the tool calls held at the end of ``input`` (a
        run that stopped with ``stop_reason="approval_required"``):
        ``{call_id: True | False | Approval}``, one for every held call.
        Approved calls run, denied ones get an error result, then the loop
        goes on. The run's messages then begin with the whole answer to
        those calls, which takes the place of the partial answer (the
        results of the calls that ran) ending ``input``: it has its ``id``.
        A bad decision raises ValueError or TypeError before anything runs.
        """
        messages = self.validate_run_input(input)
        state = self._start(messages)
        state.decisions = self._decisions(messages, approvals)
        return await self._complete(state, session=False)

    def stream(
        self, input: RunInput, *, approvals: Approvals | None = None
    ) -> AsyncIterator[StreamEvent]:
        """``run(input)`` delivered as :class:`StreamEvent` s, ``done`` last.

        The input (and ``approvals``, as for :meth:`run`) is validated now,
        so an invalid one raises here, before the iterator is returned. A
        run that stops for approvals ends with ``approval_required`` instead
        of ``done``.
        """
        messages = self.validate_run_input(input)
        state = self._start(messages)
        state.decisions = self._decisions(messages, approvals)
        if self._backend is not None:
            return self._backend.events(state, streaming=True, session=False)
        return self._events(self._resolved_model(), state, streaming=True)

    async def prompt(self, input: PromptInput) -> RunResult:
        """One user turn (a str or a list of content blocks), in the history.

        On success the user turn and the run's messages are appended to the
        history; a failed run leaves the history as it was. A cancelled one
        keeps the user turn and what the run finished, tool calls still
        running answered as interrupted, so :meth:`continue_run` can resume.
        """
        if self._backend is not None:
            blocks = self._backend.prompt_blocks(input)
        else:
            blocks = prompt_blocks(input)
        with self._exclusive("prompt()"):
            state = self._start(())
            user = Message("user", blocks, invocation_id=state.invocation_id)
            state.input = (*self._history, user)
            return await self._commit(state, (user,))

    async def continue_run(self, *, approvals: Approvals | None = None) -> RunResult:
        """Run the loop from the current history, with no new input.

        Raises ValueError on an empty history. The run's messages are
        appended to the history as with :meth:`prompt`. An agent with a
        backend raises NotImplementedError: the history cannot be forwarded.
        ``approvals`` decides the calls held at the end of the history, as
        for :meth:`run`; the whole answer to them replaces the partial one
        in the history.
        """
        if self._backend is not None:
            raise NotImplementedError(
                f"continue_run(): agent {self.name!r} has an external backend, which takes "
                "one text prompt per turn; its history cannot be forwarded"
            )
        with self._exclusive("continue_run()"):
            if not self._history:
                raise ValueError("continue_run() needs a history to continue; it is empty")
            state = self._start(tuple(self._history))
            state.decisions = self._decisions(state.input, approvals)
            return await self._commit(state, ())

    async def aclose(self) -> None:
        """Release what the agent holds open: the process of a backend's session.

        Only an ``AcpBackend`` keeps one (for ``prompt()``); a later prompt
        starts a new session. Idempotent. ``async with agent:`` calls it.
        """
        if self._backend is not None:
            await self._backend.aclose()

    def close(self) -> None:
        """:meth:`aclose`, for code without an event loop (or inside one)."""
        run_sync(self.aclose())

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def run_sync(self, input: RunInput, *, approvals: Approvals | None = None) -> RunResult:
        """:meth:`run`, for code without an event loop (or inside one)."""
        return run_sync(self.run(input, approvals=approvals))

    def prompt_sync(self, input: PromptInput) -> RunResult:
        """:meth:`prompt`, for code without an event loop (or inside one)."""
        return run_sync(self.prompt(input))

    def continue_run_sync(self, *, approvals: Approvals | None = None) -> RunResult:
        """:meth:`continue_run`, for code without an event loop (or inside one)."""
        return run_sync(self.continue_run(approvals=approvals))

    # -- internals -----------------------------------------------------------

    @contextmanager
    def _exclusive(self, what: str) -> Iterator[None]:
        if not self._busy.acquire(blocking=False):
            raise RuntimeError(
                f"{what}: agent {self.name!r} is already running a prompt() or continue_run()"
            )
        try:
            yield
        finally:
            self._busy.release()

    def _resolved_model(self) -> Model:
        if self._model is None:
            self._model = resolve_agent_model(self._config.model)
        return self._model

    def _decisions(
        self, messages: tuple[Message, ...], approvals: Approvals | None
    ) -> dict[str, Approval] | None:
        """``approvals`` checked against the calls held at the end of ``messages``."""
        if approvals is not None and self._backend is not None:
            raise NotImplementedError(
                f"approvals: agent {self.name!r} has an external backend, whose tool calls "
                "are its own"
            )
        return approvals_input(approvals, messages, self._loop.tools)

    def _start(self, messages: tuple[Message, ...]) -> RunState:
        return RunState(uuid4_str(), messages)

    async def _complete(self, state: RunState, session: bool) -> RunResult:
        """Run ``state`` to its result; ``session``: a ``prompt()`` turn."""
        if self._backend is not None:
            events = self._backend.events(state, streaming=False, session=session)
        else:
            events = self._events(self._resolved_model(), state, streaming=False)
        result: RunResult | None = None
        async for event in events:
            result = event.result
        assert result is not None
        return result

    async def _commit(self, state: RunState, before: tuple[Message, ...]) -> RunResult:
        """Run ``state`` and append ``before`` and its messages to the history."""
        import asyncio

        given = state.input
        if self._config.compaction is not None:
            state.compact_from(self._report)
        try:
            result = await self._complete(state, session=True)
        except asyncio.CancelledError:
            self._append(state, before, state.settled())
            raise
        if result.success:
            self._keep(state, given, before, result)
        return result

    def _keep(
        self,
        state: RunState,
        given: tuple[Message, ...],
        before: tuple[Message, ...],
        result: RunResult,
    ) -> None:
        """Append a successful run to the history, its compaction messages in place.

        They have a place only when the run's conversation is the history's
        (``before_run`` and ``after_run`` changed no messages; a run that
        completed the partial answer ending ``given`` dropped only that
        answer); otherwise the next run compacts again, from the provider's
        count of nothing stale.
        """
        compacting = state.compacting
        if compacting is None or not compacting.made:
            self._append(state, before, result.messages)
        elif _same_input(state, given) and result.messages == tuple(state.added):
            self._history = with_compactions((*state.input, *result.messages), compacting.made)
        else:
            self._append(state, before, result.messages)
            compacting.report = None
        if compacting is not None:
            self._report = compacting.report

    def _append(
        self, state: RunState, before: tuple[Message, ...], added: Sequence[Message]
    ) -> None:
        """Add a run's messages to the history; an answer it completed is replaced."""
        history = self._history
        if state.replaced is not None and history and history[-1] == state.replaced:
            history.pop()
        history.extend((*before, *added))

    async def _events(
        self, model: Model, state: RunState, streaming: bool
    ) -> AsyncIterator[StreamEvent]:
        before, after = self._config.before_run, self._config.after_run
        if before is not None:
            state.input = await apply_before_run(before, self._context(state))
        loop = await self._loop_for_run(state)
        if loop is not None:
            async for event in loop.run(model, state, streaming):
                yield event
        result = state.result()
        if after is not None:
            result = await apply_after_run(after, self._context(state), result)
        if not result.success and streaming:
            yield StreamEvent("error", error=result.error)
        yield StreamEvent("approval_required" if result.approvals else "done", result=result)

    async def _loop_for_run(self, state: RunState) -> AgentLoop | None:
        """The loop with the tools of the agent's sources; None (the run failed) if
        a source cannot list them, e.g. an MCP server that does not start."""
        if not self._sources:
            return self._loop
        try:
            return self._loop.with_tools(await gather_tools(self._sources))
        except Exception as err:
            state.fail(f"{type(err).__name__}: {err}", exception=err)
            return None

    def _context(self, state: RunState) -> RunContext:
        messages = list(state.input)
        return RunContext(messages, latest_prompt(messages), self.name, state.invocation_id)


def _bind_backend(config: AgentConfig) -> Any:
    """The runner of ``config.backend`` for one Agent (it checks the config)."""
    bind = getattr(config.backend, "bind", None)
    if not callable(bind):
        raise TypeError(
            "AgentConfig.backend must be a turnkit.backends transport (ProcessBackend, "
            f"AcpBackend), got {type(config.backend).__name__}"
        )
    return bind(config)


def _same_input(state: RunState, given: tuple[Message, ...]) -> bool:
    """Whether the run's conversation began with ``given``, the history (and the
    prompt): as it was, or without the partial answer the run completed."""
    if state.input is given:
        return True
    replaced = state.replaced
    return replaced is not None and given[-1:] == (replaced,) and state.input == given[:-1]


def _compaction(config: AgentConfig) -> Compaction | None:
    """The checked ``compaction`` setting; a wrong kind raises at build time."""
    compaction = config.compaction
    if compaction is None:
        return None
    if not isinstance(compaction, Compaction):
        raise TypeError(
            f"AgentConfig.compaction must be a turnkit.Compaction or None, got {compaction!r}"
        )
    if config.backend is not None:
        raise ValueError(
            "AgentConfig.compaction cannot be used with a backend: external agents keep "
            "their own conversation"
        )
    return compaction


def _output_type(config: AgentConfig, tools: dict[str, Tool]) -> OutputType | None:
    """The checked ``output_type``, or None; bad settings raise here, at build time."""
    if type(config.output_retries) is not int or config.output_retries < 0:
        problem = f"must be an int >= 0, got {config.output_retries!r}"
        raise ValueError(f"AgentConfig.output_retries {problem}")
    if config.output_type is None:
        return None
    if config.backend is not None:
        raise ValueError(
            "AgentConfig.output_type cannot be used with a backend: external agents "
            "return text only"
        )
    if OUTPUT_TOOL in tools:
        raise ValueError(
            f"AgentConfig.tools: a tool is named {OUTPUT_TOOL!r}, the name structured "
            "output uses; rename it"
        )
    return OutputType(config.output_type)


def _tool_map(
    tools: Sequence[Tool | Callable[..., Any] | ToolSource],
) -> tuple[dict[str, Tool], tuple[ToolSource, ...]]:
    """The tools by name, and the tool sources (MCP servers) listed at run time."""
    found: dict[str, Tool] = {}
    sources: list[ToolSource] = []
    for item in tools:
        if is_tool_source(item):
            sources.append(item)  # type: ignore[arg-type]
            continue
        if not isinstance(item, Tool):
            if not callable(item):
                problem = f"expected a Tool or a function (or an MCPServer), got {item!r}"
                raise TypeError(f"AgentConfig.tools: {problem}")
            item = tool(item)
        if item.name in found:
            raise ValueError(f"AgentConfig.tools: two tools are named {item.name!r}")
        found[item.name] = item
    return found, tuple(sources)
