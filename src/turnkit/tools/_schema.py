"""JSON schema and input validation from a function's signature, via pydantic.

Each parameter becomes a field of a pydantic model whose JSON schema is what
the model is told. Fields carry the parameter name as an alias so that names
like ``copy`` or ``json`` never clash with pydantic's own attributes.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Mapping
from typing import Any

from turnkit.errors import ToolInputError

__all__ = ["function_schema", "parse_docstring"]

_DATA_KEYS = frozenset({"default", "enum", "const", "examples"})
_NAME_KEYS = frozenset({"properties", "$defs", "definitions", "patternProperties"})
_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params)\s*:\s*$")
_GOOGLE_ARG = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_ARG = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


def function_schema(
    fn: Callable[..., Any], tool_name: str, local_names: Mapping[str, Any] | None = None
) -> tuple[str, dict[str, Any], Callable[[dict[str, Any]], Mapping[str, Any]]]:
    """The description, JSON schema and input validator for ``fn``.

    ``local_names`` resolve string annotations that name classes local to the
    scope where the function was decorated.
    """
    import pydantic

    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn, localns=dict(local_names or {}), include_extras=True)
    except Exception as err:  # an unresolvable forward reference, for one
        raise TypeError(f"@tool {tool_name!r}: cannot read the type hints ({err})") from err
    summary, param_docs = parse_docstring(inspect.getdoc(fn) or "")
    fields: dict[str, Any] = {}
    names: dict[str, str] = {}
    for index, param in enumerate(signature.parameters.values()):
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            raise TypeError(
                f"@tool {tool_name!r}: parameter {param.name!r} must be passable by keyword "
                "(no *args, **kwargs or positional-only parameters)"
            )
        default = ... if param.default is param.empty else param.default
        info = pydantic.Field(default, alias=param.name, description=param_docs.get(param.name))
        fields[f"p{index}"] = (hints.get(param.name, Any), info)
        names[f"p{index}"] = param.name
    config = pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    model = pydantic.create_model(f"{tool_name}_input", __config__=config, **fields)
    schema = _without_titles(model.model_json_schema(by_alias=True))
    schema.setdefault("properties", {})
    validate = model.__pydantic_validator__.validate_python

    def validator(data: dict[str, Any]) -> dict[str, Any]:
        try:
            checked = validate(data)
        except pydantic.ValidationError as err:
            raise ToolInputError(_describe_errors(err)) from None
        return {param: getattr(checked, field) for field, param in names.items()}

    return summary, schema, validator


def _describe_errors(err: Any) -> str:
    """pydantic's errors, one short line each: ``where: what (got value)``."""
    parts = []
    for error in err.errors(include_url=False)[:5]:
        where = ".".join(str(step) for step in error["loc"]) or "input"
        text = f"{where}: {error['msg']}"
        if error["type"] not in ("missing", "extra_forbidden"):
            shown = repr(error.get("input"))
            text += f" (got {shown if len(shown) <= 60 else shown[:57] + '...'})"
        parts.append(text)
    more = err.error_count() - len(parts)
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _without_titles(node: Any, names: bool = False) -> Any:
    """The schema without pydantic's generated ``title`` keys (noise for models)."""
    if isinstance(node, dict):
        return {
            key: value
            if key in _DATA_KEYS and not names
            else _without_titles(value, key in _NAME_KEYS)
            for key, value in node.items()
            if names or key != "title"
        }
    if isinstance(node, list):
        return [_without_titles(item) for item in node]
    return node


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph (lines joined by spaces) and parameter descriptions.

    Parameters are read from a Google-style ``Args:`` section or from Sphinx
    ``:param name:`` lines; continuation lines are joined with spaces.
    """
    lines = doc.expandtabs().strip().splitlines()
    summary = []
    for line in lines:
        stripped = line.strip()
        if not stripped or _SECTION.match(stripped) or stripped.startswith(":"):
            break
        summary.append(stripped)
    params = {**_sphinx_params(lines), **_google_params(lines)}
    return " ".join(summary), {name: text for name, text in params.items() if text}


def _google_params(lines: list[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    section: int | None = None  # indent of the "Args:" line while inside it
    entry: int | None = None  # indent of the entries
    current: str | None = None
    for line in lines:
        stripped, indent = line.strip(), len(line) - len(line.lstrip())
        if section is None:
            if _SECTION.match(stripped):
                section = indent
            continue
        if not stripped:
            continue
        if indent <= section:
            break
        match = _GOOGLE_ARG.match(stripped)
        if match and (entry is None or indent <= entry):
            entry, current = indent, match[1].lstrip("*")
            params[current] = match[2].strip()
        elif current is not None:
            params[current] = f"{params[current]} {stripped}".strip()
    return params


def _sphinx_params(lines: list[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    current: str | None = None
    for line in lines:
        stripped = line.strip()
        if match := _SPHINX_ARG.match(stripped):
            current = match[1]
            params[current] = match[2].strip()
        elif stripped.startswith(":") or not stripped:
            current = None
        elif current is not None:
            params[current] = f"{params[current]} {stripped}"
    return params
