""":class:`MCPServer`: the tools of an MCP server, as turnkit tools.

Built on the official ``mcp`` package (``pip install 'turnkit[mcp]'``),
imported only when a server is first used. One connection per event loop
(the sync twins run each call on a fresh loop), opened on first use and
held by a task of that loop, so the ``mcp`` client is entered and left in
one task as anyio requires. ``aclose()`` (or ``async with server:``) ends it;
otherwise it ends with its event loop.

Nothing hangs: starting waits at most ``connect_timeout`` seconds, a call at
most ``timeout``; a server that cannot start raises :class:`MCPServerError`
(a run fails with it), one that dies during a call gives that call an error
result naming the server, and the next call starts it again.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import weakref
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any

from turnkit.errors import MCPServerError, MCPToolError
from turnkit.mcp._content import error_text, result_content
from turnkit.tools import Tool

__all__ = ["MCPServer"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
Include = Collection[str] | Callable[[str], bool] | None
NeedsApproval = (
    bool
    | Callable[[dict[str, Any]], bool | Awaitable[bool]]
    | Callable[[str, dict[str, Any]], bool | Awaitable[bool]]
)
"""True, False, or a function of the checked input, or of (the server's tool name, the input)."""


class MCPServer:
    """An MCP server whose tools an agent can call.

    >>> files = MCPServer.stdio("npx", ["-y", "@modelcontextprotocol/server-filesystem", "."])
    >>> agent = Agent(AgentConfig("a", tools=[files]))   # doctest: +SKIP

    ``include`` keeps some tools (names as the server gives them, or a
    predicate); ``prefix`` is put in front of every name (``"fs_"``). Names
    are then made what every provider accepts (characters other than
    letters, digits, ``_`` and ``-`` become ``_``, at most 64); the server
    still gets its own names. :meth:`list_tools` gives the tools as turnkit
    :class:`~turnkit.Tool` objects, for code that offers tools itself.

    ``needs_approval`` holds calls for a person's decision (see
    :class:`~turnkit.Tool`): True for every tool of the server, or a sync or
    async function that says whether this call needs approval: of the call's
    checked input, as a :class:`~turnkit.Tool`'s, or of ``(name, input)``
    (the server's own tool name, as ``include`` gets it, then the input)::

        MCPServer.stdio("shop-server", needs_approval=lambda name, input: name != "search")
    """

    def __init__(
        self,
        target: Any,
        label: str,
        *,
        include: Include = None,
        prefix: str = "",
        timeout: float | None = 60.0,
        connect_timeout: float = 30.0,
        needs_approval: NeedsApproval = False,
    ) -> None:
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a string, got {prefix!r}")
        if type(needs_approval) is not bool and not callable(needs_approval):
            raise TypeError(
                "needs_approval must be True, False or a function of the input or of "
                f"(tool name, input), got {needs_approval!r}"
            )
        self.needs_approval = needs_approval
        self._check_takes_name = type(needs_approval) is not bool and _takes_name(needs_approval)
        self._target = target
        self.label = label
        self.include = include
        self.prefix = prefix
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._connections: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Connection]
        self._connections = weakref.WeakKeyDictionary()

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        *,
        cwd: str | None = None,
        include: Include = None,
        prefix: str = "",
        timeout: float | None = 60.0,
        connect_timeout: float = 30.0,
        needs_approval: NeedsApproval = False,
    ) -> MCPServer:
        """A server run as a subprocess, speaking MCP on its stdin and stdout.

        ``env`` is added to the ``mcp`` package's safe default environment
        (``PATH``, ``HOME``, ...), not to this process's whole environment.
        The server's stderr goes to this process's stderr.
        """
        if not isinstance(command, str) or not command:
            raise ValueError(f"command must be a non-empty string, got {command!r}")
        if isinstance(args, str):
            raise TypeError("args must be a sequence of strings, not one string")
        target = ("stdio", command, tuple(args), dict(env or {}), cwd)
        label = " ".join([command, *args])
        return cls(
            target,
            label,
            include=include,
            prefix=prefix,
            timeout=timeout,
            connect_timeout=connect_timeout,
            needs_approval=needs_approval,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        include: Include = None,
        prefix: str = "",
        timeout: float | None = 60.0,
        connect_timeout: float = 30.0,
        needs_approval: NeedsApproval = False,
    ) -> MCPServer:
        """A server at ``url``, over streamable HTTP (``http://host:port/mcp``)."""
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"url must be an http(s) URL, got {url!r}")
        return cls(
            ("http", url),
            url,
            include=include,
            prefix=prefix,
            timeout=timeout,
            connect_timeout=connect_timeout,
            needs_approval=needs_approval,
        )

    def __repr__(self) -> str:
        return f"<MCPServer {self.label!r}>"

    # -- public ------------------------------------------------------------------------

    async def list_tools(self) -> tuple[Tool, ...]:
        """The server's tools (kept by ``include``, named with ``prefix``) as turnkit tools.

        Connects first if needed; raises :class:`~turnkit.errors.MCPServerError`
        when the server cannot be started or reached. Each tool calls the
        server through the connection of the event loop it runs in.
        """
        connection = await self._connection()
        if connection.tools is None:
            listed = await connection.run(_list_all, "listing its tools")
            connection.tools = self._tools(listed)
        return connection.tools

    async def aclose(self) -> None:
        """Close this event loop's connection (a stdio server's process ends). Idempotent."""
        connection = self._connections.pop(asyncio.get_running_loop(), None)
        if connection is not None:
            await connection.close()

    async def __aenter__(self) -> MCPServer:
        await self._connection()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- internals ---------------------------------------------------------------------

    async def _connection(self) -> _Connection:
        loop = asyncio.get_running_loop()
        for other in [other for other in self._connections if other.is_closed()]:
            del self._connections[other]  # its task held the loop: drop it, or neither is freed
        connection = self._connections.get(loop)
        if connection is not None and connection.dead:
            await connection.close()  # a server that died starts again
            connection = None
        if connection is None:
            connection = self._connections[loop] = _Connection(self)
        await connection.open()
        return connection

    async def _call(self, name: str, arguments: dict[str, Any]) -> Any:
        connection = await self._connection()

        def call(client: Any) -> Awaitable[Any]:
            return client.call_tool(name, arguments)

        result = await connection.run(call, f"the call of tool {name!r}", self.timeout)
        if result.is_error:
            raise MCPToolError(error_text(result))
        return result_content(result)

    def _tools(self, listed: list[Any]) -> tuple[Tool, ...]:
        tools: dict[str, Tool] = {}
        for found in listed:
            if not self._included(found.name):
                continue
            name = _UNSAFE.sub("_", self.prefix + found.name)[:64]
            if name in tools:
                raise MCPServerError(
                    f"MCP server {self.label!r}: two tools are named {name!r} once made "
                    "provider-safe; pass include= or prefix= to tell them apart"
                )
            tools[name] = self._tool(name, found)
        return tuple(tools.values())

    def _included(self, name: str) -> bool:
        include = self.include
        if include is None:
            return True
        return include(name) if callable(include) else name in include

    def _tool(self, name: str, found: Any) -> Tool:
        server_name = found.name

        async def call(**arguments: Any) -> Any:
            return await self._call(server_name, arguments)

        annotations = getattr(found, "annotations", None)
        idempotent = bool(getattr(annotations, "idempotent_hint", False))
        schema = found.input_schema or {"type": "object"}
        try:
            return Tool(
                name,
                found.description or "",
                schema,
                call,
                idempotent=idempotent,
                needs_approval=self._approval_check(server_name),
            )
        except (TypeError, ValueError) as err:
            raise MCPServerError(
                f"MCP server {self.label!r}: tool {server_name!r} cannot be offered: {err}"
            ) from None

    def _approval_check(self, server_name: str) -> Any:
        """The ``needs_approval`` of the tool the server calls ``server_name``."""
        check = self.needs_approval
        if type(check) is bool:
            return check

        takes_name = self._check_takes_name

        async def needs_approval(arguments: dict[str, Any]) -> bool:
            from turnkit._sync import maybe_await

            call: Any = check
            answer = call(server_name, arguments) if takes_name else call(arguments)
            return await maybe_await(answer)  # type: ignore[no-any-return]

        return needs_approval


def _takes_name(check: Callable[..., Any]) -> bool:
    """Whether a ``needs_approval`` function takes (name, input), else the input alone.

    Two required positional parameters: (name, input); one: the input. Raises
    TypeError, naming the function, for one that can take neither.
    """
    try:
        parameters = list(inspect.signature(check).parameters.values())
    except (TypeError, ValueError):  # no signature to read (some builtins): the two-argument form
        return True
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    taken = [p for p in parameters if p.kind in positional]
    required = [p for p in taken if p.default is inspect.Parameter.empty]
    varargs = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters)
    if len(required) > 2 or not (taken or varargs):
        raise TypeError(
            "needs_approval must be a function of the call's input, or of (tool name, input); "
            f"{check!r} takes {len(required) if taken else 'no'} positional arguments"
        )
    if len(required) == 2:
        return True
    if len(required) == 1:
        return False
    return varargs or len(taken) >= 2


async def _list_all(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            return tools


class _Connection:
    """One ``mcp`` client session, held open by a task of one event loop."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.client: Any = None
        self.tools: tuple[Tool, ...] | None = None
        self.task: asyncio.Task[None] | None = None
        self.broken = False  # the transport closed under a call
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._lock = asyncio.Lock()

    @property
    def dead(self) -> bool:
        return self.broken or (self.task is not None and self.task.done())

    async def open(self) -> None:
        async with self._lock:
            if self.task is None:
                self.task = asyncio.create_task(self._hold(), name=f"mcp {self.server.label}")
            if self._ready.is_set():
                return
            ready = asyncio.create_task(self._ready.wait())
            limit = self.server.connect_timeout
            await asyncio.wait({self.task, ready}, timeout=limit, return_when="FIRST_COMPLETED")
            if self._ready.is_set():
                return
            ready.cancel()
            if self.task.done():
                cause = _cause(self.task)
                raise MCPServerError(f"MCP server {self.server.label!r} failed to start: {cause}")
            self.task.cancel()
            raise MCPServerError(
                f"MCP server {self.server.label!r} did not start within {limit:g} seconds"
            )

    async def _hold(self) -> None:
        import mcp

        async with mcp.Client(_transport(self.server._target)) as client:
            self.client = client
            self._ready.set()
            await self._closing.wait()

    async def run(
        self, action: Callable[[Any], Awaitable[Any]], what: str, timeout: float | None = None
    ) -> Any:
        """``action(client)``, raced against the connection's end and ``timeout``."""
        assert self.task is not None
        label = self.server.label
        work = asyncio.ensure_future(action(self.client))
        try:
            await asyncio.wait({work, self.task}, timeout=timeout, return_when="FIRST_COMPLETED")
        finally:
            if not work.done():
                work.cancel()
        if work.done() and not work.cancelled() and work.exception() is None:
            return work.result()
        if self.task.done():
            raise MCPServerError(f"MCP server {label!r} stopped during {what}: {_cause(self.task)}")
        if not work.done() or work.cancelled():
            raise MCPServerError(f"MCP server {label!r} did not answer {what} within {timeout:g} s")
        error = work.exception()
        self.broken = _closed(error)
        raise MCPServerError(f"MCP server {label!r} failed {what}: {_describe(error)}") from error

    async def close(self) -> None:
        self._closing.set()
        if self.task is None:
            return
        done, _ = await asyncio.wait({self.task}, timeout=self.server.connect_timeout)
        if not done:
            self.task.cancel()
        elif not self.task.cancelled():
            self.task.exception()  # retrieved: a server that died is not an error on close


def _transport(target: tuple[Any, ...]) -> Any:
    if target[0] == "http":
        return target[1]
    from mcp.client.stdio import StdioServerParameters

    _, command, args, env, cwd = target
    return StdioServerParameters(command=command, args=list(args), env=env or None, cwd=cwd)


def _closed(error: BaseException | None) -> bool:
    from mcp.types import CONNECTION_CLOSED

    return getattr(error, "code", None) == CONNECTION_CLOSED


def _cause(task: asyncio.Task[None]) -> str:
    if task.cancelled():
        return "the connection was cancelled"
    error = task.exception()
    return _describe(error) if error is not None else "the connection ended"


def _describe(error: BaseException | None) -> str:
    """The innermost cause, in one line (anyio wraps errors in groups)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if error is None:
        return "unknown error"
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
