"""What every backend is: an external agent that takes one text prompt per turn."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import TYPE_CHECKING

from turnkit.agent.results import RunResult, StreamEvent
from turnkit.errors import InvalidMessageError
from turnkit.messages.checks import kind_of, need_str

if TYPE_CHECKING:
    from turnkit.agent.config import AgentConfig
    from turnkit.backends._runner import BackendRunner

__all__ = ["Backend", "Conversation", "text_input"]


class Conversation(ABC):
    """The turns of one Agent's ``prompt()`` calls, in order.

    A backend that keeps no state between turns runs each one fresh; one
    with sessions (ACP) continues the same session.
    """

    @abstractmethod
    async def send(self, prompt: str) -> RunResult:
        """One turn: ``prompt`` in, the turn's result out."""

    async def aclose(self) -> None:
        """End whatever the conversation keeps open. Idempotent."""
        return None


class Backend(ABC):
    """An external agent behind the :class:`~turnkit.Agent` API (text only).

    Set one as ``AgentConfig.backend``; the Agent's ``run``/``stream``/
    ``prompt`` then go to it. A backend holds configuration only and may be
    shared by many agents: what one agent keeps open lives in its
    :class:`Conversation`.
    """

    @abstractmethod
    def turn(self, prompt: str) -> AsyncIterator[StreamEvent]:
        """A fresh turn on ``prompt``.

        Yields ``text_delta``, ``thinking_delta``, ``tool_use`` and
        ``tool_result`` events, then ``done`` with the :class:`RunResult`
        (its ``messages``: one assistant message on success). Failures of the
        external agent are failed results, never exceptions; cancelling the
        awaiting task ends the external process.
        """

    def conversation(self) -> Conversation:
        """What one Agent's ``prompt()`` turns run on (default: fresh turns)."""
        return _FreshTurns(self)

    def bind(self, config: AgentConfig) -> BackendRunner:
        """The runner of this backend for one Agent built from ``config``."""
        from turnkit.backends._runner import BackendRunner

        return BackendRunner(self, config)


class _FreshTurns(Conversation):
    """Every ``prompt()`` is a fresh turn."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend

    async def send(self, prompt: str) -> RunResult:
        result: RunResult | None = None
        async with aclosing(self._backend.turn(prompt)) as events:
            async for event in events:
                if event.type == "done":
                    result = event.result
        if result is None:
            raise RuntimeError(f"{self._backend!r} ended a turn without a result")
        return result


def text_input(value: object, backend: Backend) -> str:
    """The prompt text of an input; structured input raises InvalidMessageError.

    SPEC section 6: an external agent takes text only, so any list (of
    messages or of blocks, even a single text block) is refused, before any
    process starts.
    """
    if isinstance(value, str):
        return need_str(value, "input")  # a plain str of valid Unicode
    if isinstance(value, (list, tuple)):
        problem = (
            f"{type(backend).__name__} takes text only: structured input (a list of "
            "messages or content blocks) cannot be forwarded to an external agent; pass a str"
        )
    else:
        problem = f"expected a string, got {kind_of(value)}"
    raise InvalidMessageError("input", problem)
