"""What an App is made of: agents (render functions) and the tools renders may offer by name."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from turnkit.agent.compaction import Compaction
from turnkit.agent.config import resolve_agent_model
from turnkit.agent.output import OutputType
from turnkit.errors import UnknownAgentError
from turnkit.providers.base import Model, ModelSettings, settings_from
from turnkit.sessions.model.inputs import ON_BUSY
from turnkit.sessions.render.ask import ask_tool
from turnkit.tools import Tool, is_tool_source, tool

__all__ = ["AgentDef", "Definitions"]


@dataclasses.dataclass(frozen=True, slots=True)
class AgentDef:
    """An agent of an App: its render function, model, tools and limits."""

    name: str
    render: Callable[[], Any]
    model: Model
    tools: dict[str, Tool]
    max_turns: int
    settings: ModelSettings
    sources: tuple[Any, ...] = ()  # tool sources (MCP servers), listed before each call
    output: OutputType | None = None
    output_retries: int = 1
    compaction: Compaction | None = None  # its model resolved (a Model) when it has one
    on_busy: str = "queue"  # what an input does while a turn runs (SPEC 7, "Input while busy")


class Definitions:
    """The definition side of :class:`~turnkit.sessions.App` (no database needed)."""

    def __init__(self) -> None:
        self.agents: dict[str, AgentDef] = {}
        self.tools: dict[str, Tool] = {}
        self._made_tools: dict[Any, Tool] = {}

    def agent_named(self, name: object) -> AgentDef:
        """The agent defined under ``name``; :class:`UnknownAgentError` otherwise."""
        found = self.agents.get(name) if isinstance(name, str) else None
        if found is None:
            raise UnknownAgentError(name, tuple(self.agents))
        return found

    def agent(
        self,
        name: str,
        *,
        model: str | Model | None = None,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        max_turns: int = 10,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
        thinking: Any = None,
        output_type: Any = None,
        output_retries: int = 1,
        compaction: Compaction | None = None,
        on_busy: str = "queue",
    ) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
        """Define an agent whose render function gives the system text of each model call.

        ``tools`` may hold tool sources (MCP servers) too; ``output_type`` asks
        for structured output as in :class:`~turnkit.AgentConfig` (the turn's
        ``output_data``); ``compaction`` (a :class:`~turnkit.Compaction`)
        summarises the older part of a long session before a model call, as a
        recorded step (SPEC section 7, "Long sessions"); ``on_busy`` says what an
        input that arrives while a turn of the session runs does: ``"queue"`` (its
        own turn after the running one), ``"steer"`` (the running turn reads it at
        its next model call), ``"interrupt"`` (the running turn stops, the input
        runs next) or ``"merge"`` (it joins the session's queued turn); a ``send``
        may choose otherwise (SPEC section 7, "Input while busy")."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"app.agent: the name must be a non-empty string, got {name!r}")
        if type(max_turns) is not int or max_turns < 1:
            raise ValueError(f"app.agent({name!r}): max_turns must be an int >= 1")
        tool_map: dict[str, Tool] = {}
        sources = tuple(item for item in tools if is_tool_source(item))
        for item in tools:
            if is_tool_source(item):
                continue
            made = self._as_tool(item, f"app.agent({name!r}).tools")
            if made.name in tool_map or made.name == "ask":
                raise ValueError(f"app.agent({name!r}): two tools are named {made.name!r}")
            tool_map[made.name] = made
        settings = settings_from(
            {
                "max_output_tokens": max_output_tokens,
                "temperature": temperature,
                "thinking": thinking,
            }
        )
        if type(output_retries) is not int or output_retries < 0:
            raise ValueError(f"app.agent({name!r}): output_retries must be an int >= 0")
        output = None if output_type is None else OutputType(output_type)
        if on_busy not in ON_BUSY:
            raise ValueError(
                f"app.agent({name!r}): on_busy must be one of {', '.join(ON_BUSY)}; got {on_busy!r}"
            )
        if compaction is not None and not isinstance(compaction, Compaction):
            raise TypeError(
                f"app.agent({name!r}): compaction must be a turnkit.Compaction or None, "
                f"got {compaction!r}"
            )

        def define(render: Callable[[], Any]) -> Callable[[], Any]:
            if not callable(render):
                raise TypeError("app.agent: decorate a function (the agent's render)")
            if name in self.agents:
                raise ValueError(f"app.agent: an agent named {name!r} is already defined")
            resolved = resolve_agent_model(model)
            summarising = compaction
            if compaction is not None and compaction.model is not None:
                summariser = resolve_agent_model(compaction.model)
                summarising = dataclasses.replace(compaction, model=summariser)
            self.agents[name] = AgentDef(
                name,
                render,
                resolved,
                tool_map,
                max_turns,
                settings,
                sources,
                output,
                output_retries,
                summarising,
                on_busy,
            )
            return render

        return define

    def tool(self, fn: Any = None, /, **options: Any) -> Any:
        """Register a tool that renders may offer by name (``use_tool("name")``)."""

        def register(function: Any) -> Tool:
            made = function if isinstance(function, Tool) else tool(**options)(function)
            if made.name in self.tools or made.name == "ask":
                raise ValueError(f"app.tool: a tool named {made.name!r} is already registered")
            self.tools[made.name] = made
            return made

        return register(fn) if fn is not None else register

    def _as_tool(self, item: Any, where: str) -> Tool:
        if isinstance(item, Tool):
            return item
        if not callable(item):
            raise TypeError(f"{where}: expected a Tool or a function, got {item!r}")
        made = self._made_tools.get(item)
        if made is None:
            made = self._made_tools[item] = tool(item)
        return made

    def tool_resolver(self, agent: AgentDef) -> Callable[[Any], list[Any]]:
        """What ``use_tool(x)`` offers in ``agent``'s render: tools, or a tool source."""

        def resolve(wanted: Any) -> list[Any]:
            if isinstance(wanted, str):
                if wanted == "ask":
                    return [ask_tool()]
                found = agent.tools.get(wanted) or self.tools.get(wanted)
                if found is None:
                    known = sorted({"ask", *agent.tools, *self.tools})
                    raise ValueError(
                        f"use_tool: no tool named {wanted!r}; known: {', '.join(known)}"
                    )
                return [found]
            if is_tool_source(wanted):
                return [wanted]
            return [self._as_tool(wanted, "use_tool")]

        return resolve
