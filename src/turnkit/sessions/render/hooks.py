"""Render hooks: what an agent's render function reads and offers.

A render (``@app.agent(...)``) runs before every model call of a turn; while
it runs, these hooks reach that turn. Called anywhere else they raise
``RuntimeError``. Light on purpose: ``import turnkit`` may load this module.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from turnkit.tools import Tool  # already loaded by `import turnkit`

if TYPE_CHECKING:
    from turnkit.sessions.model.inputs import AgentInput

__all__ = ["RenderScope", "use_current_input", "use_input", "use_session_data", "use_tool"]


class RenderScope:
    """What the hooks of one render see: the turn's input, its data, the tools it offers."""

    __slots__ = ("data", "input", "offered", "resolve_tool", "sources")

    def __init__(
        self,
        input: AgentInput,
        data: dict[str, Any],
        resolve_tool: Callable[[Any], list[Tool]],
    ) -> None:
        self.input = input
        self.data = data
        self.resolve_tool = resolve_tool
        self.offered: list[Tool] = []
        self.sources: list[Any] = []  # tool sources (MCP servers): listed after the render


current_scope: ContextVar[RenderScope | None] = ContextVar("turnkit_render", default=None)


def _scope(hook: str) -> RenderScope:
    scope = current_scope.get()
    if scope is None:
        raise RuntimeError(
            f"{hook}() works only while an agent's render function runs "
            "(a function decorated with @app.agent)"
        )
    return scope


def use_input() -> AgentInput:
    """The :class:`~turnkit.sessions.AgentInput` of the turn being rendered."""
    return _scope("use_input").input


def use_current_input() -> AgentInput:
    """Alias of :func:`use_input`."""
    return _scope("use_current_input").input


def use_tool(tool: str | Tool | Any) -> None:
    """Offer a tool to the model for this call.

    ``tool`` is a name (``"ask"`` is built in; other names refer to tools
    given to ``app.agent(tools=...)`` or ``app.tool``), a
    :class:`~turnkit.Tool`, a typed function (made into a tool), or a tool
    source such as a :class:`turnkit.mcp.MCPServer` (its tools are listed
    for this call). Tools given to ``app.agent(tools=...)`` are always
    offered; this adds more.
    """
    scope = _scope("use_tool")
    for found in scope.resolve_tool(tool):
        if not isinstance(found, Tool):  # a tool source: its tools are listed for this call
            if all(found is not known for known in scope.sources):
                scope.sources.append(found)
        elif all(found.name != offered.name for offered in scope.offered):
            scope.offered.append(found)


def use_session_data() -> dict[str, Any]:
    """The session's JSON data, mutable; saved with the session when the turn ends."""
    return _scope("use_session_data").data
