"""Tool and ``@tool``: what a model may call, and how its input is checked.

A :class:`Tool` is a name, a description, the JSON schema of its input and the
function that runs. ``@tool`` builds one from a typed function: pydantic makes
the schema from the signature and checks the input before the function runs.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from turnkit._sync import is_async_callable
from turnkit.errors import InvalidMessageError, ToolInputError
from turnkit.messages import FrozenDict, thaw
from turnkit.messages.checks import need_str
from turnkit.providers.base import ToolSpec

__all__ = ["DEFAULT_TOOL_TIMEOUT_S", "ApprovalCheck", "Tool", "ToolInputError", "tool"]

F = TypeVar("F", bound=Callable[..., Any])
InputValidator = Callable[[dict[str, Any]], Mapping[str, Any]]
ApprovalCheck = Callable[[dict[str, Any]], bool | Awaitable[bool]]
"""Says whether one call needs a person's approval, given its checked input."""

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

DEFAULT_TOOL_TIMEOUT_S = 120.0
"""How long a tool call may run before it becomes an error result (per tool:
``Tool(..., timeout_s=...)`` or ``@tool(timeout_s=...)``; None: no limit)."""


@dataclass(frozen=True, slots=True)
class Tool:
    """A function the model may call.

    ``fn`` (sync or async) receives the fields of the model's input as keyword
    arguments, after the input was checked: by ``validator`` when given (it
    returns the keyword arguments, or raises ``ValueError``), else against
    ``input_schema`` with ``jsonschema``. Sync functions run in a worker
    thread, so they do not hold the event loop up: it waits for one's answer
    directly for at most 50 us (a hand-back through the loop costs more), then
    goes on with other work until it returns. ``idempotent=True`` says a
    call may safely run twice: a durable session re-runs such a call that a
    crash interrupted, where any other gets an "interrupted" error result.
    ``timeout_s`` (default :data:`DEFAULT_TOOL_TIMEOUT_S`, 120 s; None for no
    limit) bounds one call: past it the call is an error result for the
    model, an async function is cancelled, and a sync one is abandoned in
    its daemon thread (nothing waits for it, not even interpreter exit).
    ``needs_approval`` (default False) holds a call until a person decides
    (see :mod:`turnkit.agent.approvals`): True for every call, or a sync or
    async function that gets the checked input (the keyword arguments ``fn``
    would get, as one dict) and returns whether this call needs approval.

    >>> add = Tool("add", "Add two numbers.", {
    ...     "type": "object",
    ...     "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    ...     "required": ["a", "b"],
    ... }, lambda a, b: a + b)
    """

    name: str
    description: str
    input_schema: Mapping[str, Any]
    fn: Callable[..., Any | Awaitable[Any]]
    validator: InputValidator | None = field(default=None, kw_only=True, repr=False)
    idempotent: bool = field(default=False, kw_only=True)
    timeout_s: float | None = field(default=DEFAULT_TOOL_TIMEOUT_S, kw_only=True)
    needs_approval: bool | ApprovalCheck = field(default=False, kw_only=True)
    _schema_check: Any = field(default=None, init=False, repr=False, compare=False)
    is_async: bool = field(default=False, init=False, repr=False, compare=False)
    """Whether ``fn`` is async (else it runs in a worker thread); decided once."""

    def __post_init__(self) -> None:
        if isinstance(self.name, str) and type(self.name) is not str:  # a plain copy
            object.__setattr__(self, "name", str.__str__(self.name))
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(
                f"tool name {self.name!r} must be 1-64 letters, digits, '_' or '-' "
                "(what every provider accepts)"
            )
        if not isinstance(self.description, str):
            raise TypeError(f"tool {self.name!r}: description must be a string")
        try:
            object.__setattr__(self, "description", need_str(self.description, "description"))
        except InvalidMessageError as err:
            raise ValueError(f"tool {self.name!r}: {err}") from None
        if not isinstance(self.input_schema, Mapping):
            raise TypeError(f"tool {self.name!r}: input_schema must be a JSON schema object")
        if not isinstance(self.input_schema, FrozenDict):
            try:
                schema = FrozenDict(self.input_schema)
            except InvalidMessageError as err:
                raise err.within("input_schema") from None
            object.__setattr__(self, "input_schema", schema)
        if not callable(self.fn):
            raise TypeError(f"tool {self.name!r}: fn must be callable")
        object.__setattr__(self, "is_async", is_async_callable(self.fn))
        timeout = self.timeout_s
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
        ):
            raise ValueError(
                f"tool {self.name!r}: timeout_s must be a positive number or None, got {timeout!r}"
            )
        if type(self.needs_approval) is not bool and not callable(self.needs_approval):
            raise TypeError(
                f"tool {self.name!r}: needs_approval must be True, False or a function of "
                f"the call's input, got {self.needs_approval!r}"
            )

    @property
    def spec(self) -> ToolSpec:
        """What the model is told about this tool."""
        return ToolSpec(self.name, self.description, self.input_schema)  # type: ignore[arg-type]

    def check_input(self, data: dict[str, Any]) -> Mapping[str, Any]:
        """The keyword arguments for ``fn``, or :class:`ToolInputError`."""
        if self.validator is not None:
            try:
                return self.validator(data)
            except ToolInputError:
                raise
            except ValueError as err:
                raise ToolInputError(str(err)) from None
        check = self._schema_check
        if check is None:
            check = _schema_checker(thaw(self.input_schema))
            object.__setattr__(self, "_schema_check", check)
        check(data)
        return data


def _schema_checker(schema: Mapping[str, Any]) -> Callable[[dict[str, Any]], None]:
    """A function that raises ToolInputError when data does not match ``schema``."""
    import jsonschema  # imported on first use: it is slow to import

    kind = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    validator = kind(schema)

    def check(data: dict[str, Any]) -> None:
        errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        if errors:
            raise ToolInputError("; ".join(_describe(error) for error in errors[:5]))

    return check


def _describe(error: Any) -> str:
    where = ".".join(str(step) for step in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


@overload
def tool(fn: F, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    idempotent: bool = False,
    timeout_s: float | None = DEFAULT_TOOL_TIMEOUT_S,
    needs_approval: bool | ApprovalCheck = False,
) -> Callable[[F], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    idempotent: bool = False,
    timeout_s: float | None = DEFAULT_TOOL_TIMEOUT_S,
    needs_approval: bool | ApprovalCheck = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a :class:`Tool` of a typed sync or async function.

    The input schema comes from the signature (pydantic), the description from
    the docstring's first paragraph, and parameter descriptions from a
    Google-style ``Args:`` section or Sphinx ``:param x:`` lines. The input is
    validated (and coerced, as pydantic does) before the function runs.
    ``idempotent=True`` marks a tool that may safely run twice, and
    ``timeout_s`` bounds one call, and ``needs_approval`` holds calls for a
    person's decision (see :class:`Tool`).

    >>> @tool
    ... def get_weather(city: str, days: int = 1) -> str:
    ...     '''Forecast for a city.
    ...
    ...     Args:
    ...         city: The city name.
    ...         days: How many days ahead.
    ...     '''
    ...     return f"Sunny in {city} for {days} days"
    >>> get_weather.name, get_weather.input_schema["required"]
    ('get_weather', ('city',))
    """

    # Names visible where @tool is written, for annotations that refer to local classes.
    local_names = dict(sys._getframe(1).f_locals)

    def build(function: Callable[..., Any]) -> Tool:
        from turnkit.tools._schema import function_schema

        tool_name = name if name is not None else getattr(function, "__name__", "")
        summary, schema, validator = function_schema(function, tool_name, local_names)
        text = description if description is not None else summary
        return Tool(
            tool_name,
            text,
            schema,
            function,
            validator=validator,
            idempotent=idempotent,
            timeout_s=timeout_s,
            needs_approval=needs_approval,
        )

    if fn is not None:
        if isinstance(fn, Tool):
            return fn
        return build(fn)
    return build
