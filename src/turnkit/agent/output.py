"""Structured output: ``AgentConfig(output_type=...)`` and how the answer is checked.

An output type is a Pydantic model class, a dataclass, a TypedDict
(``typing`` or ``typing_extensions``; all validated by pydantic, which makes
the value: a model or dataclass instance, or a dict) or a JSON schema dict
for an object (validated with ``jsonschema``; the value is the parsed JSON).
:class:`OutputType` gives the schema models are told
(:class:`~turnkit.providers.OutputSchema`), the tool offered instead to
models without a native mechanism, and the validation.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any

from turnkit.errors import OutputValidationError
from turnkit.messages import thaw
from turnkit.providers.base import OutputSchema, ToolSpec

__all__ = [
    "OUTPUT_TOOL",
    "OutputProgress",
    "OutputType",
    "check_answer",
    "close_schema",
    "request_with_output",
    "take_output_call",
]

OUTPUT_TOOL = "final_result"
"""The tool that carries the answer for models without native structured output."""

_NAME = re.compile(r"[^A-Za-z0-9_-]")


class OutputType:
    """What ``AgentConfig.output_type`` asks for, checked when the Agent is built."""

    def __init__(self, output_type: Any) -> None:
        self.output_type = output_type
        if isinstance(output_type, Mapping):
            schema = _checked_schema(output_type)
            self._adapter: Any = None
            self._validator: Any = _json_validator(schema)
            title = schema.get("title")
            name = title if isinstance(title, str) and title else "output"
        elif isinstance(output_type, type) and (
            _is_pydantic_model(output_type)
            or dataclasses.is_dataclass(output_type)
            or _is_typeddict(output_type)
        ):
            from pydantic import TypeAdapter

            self._adapter = TypeAdapter(_for_pydantic(output_type))
            self._validator = None
            schema = self._adapter.json_schema()
            name = output_type.__name__
        else:
            raise TypeError(
                "AgentConfig.output_type must be a Pydantic model class, a dataclass, a "
                f"TypedDict or a JSON schema dict, got {output_type!r}"
            )
        closed, strict = close_schema(schema)
        description = schema.get("description")
        description = description if isinstance(description, str) else ""
        self.schema = OutputSchema(_NAME.sub("_", name)[:64], closed, strict, description)

    @property
    def tool(self) -> ToolSpec:
        """The tool a model without native structured output answers with."""
        return ToolSpec(
            OUTPUT_TOOL,
            "Give your final answer by calling this tool once, when you are done; its "
            "input is the answer.",
            self.schema.schema,
        )

    def validate_text(self, text: str) -> Any:
        """The value of a JSON answer; raises OutputValidationError."""
        try:
            data = json.loads(text)
        except ValueError as err:
            raise OutputValidationError(f"the answer is not valid JSON ({err})") from None
        return self.validate_data(data)

    def validate_data(self, data: Any) -> Any:
        """The value of parsed JSON data; raises OutputValidationError."""
        data = thaw(data)
        if self._adapter is not None:
            from pydantic import ValidationError

            try:
                return self._adapter.validate_python(data)
            except ValidationError as err:
                raise OutputValidationError(_pydantic_problems(err)) from None
        problems = [
            f"{'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
            for e in self._validator.iter_errors(data)
        ]
        if problems:
            raise OutputValidationError("; ".join(sorted(problems)))
        return data


def _for_pydantic(kind: type) -> Any:
    """``kind``, or for a ``typing.TypedDict`` on Python < 3.12 (which pydantic
    refuses) the same TypedDict rebuilt with ``typing_extensions``."""
    import sys

    if sys.version_info >= (3, 12) or type(kind).__module__ != "typing" or not _is_typeddict(kind):
        return kind
    from typing import NotRequired

    from typing_extensions import TypedDict, get_type_hints

    required = kind.__required_keys__  # type: ignore[attr-defined]
    hints = get_type_hints(kind)
    fields = {k: v if k in required else NotRequired[v] for k, v in hints.items()}
    return TypedDict(kind.__name__, fields)  # type: ignore[operator]


def _is_typeddict(kind: type) -> bool:
    """A ``typing.TypedDict`` or a ``typing_extensions.TypedDict`` (what pydantic
    asks for on Python < 3.12, and which ``typing.is_typeddict`` does not know there)."""
    from typing_extensions import is_typeddict  # a dependency of pydantic

    return is_typeddict(kind)


def _is_pydantic_model(kind: type) -> bool:
    return any(
        base.__module__.startswith("pydantic") and base.__name__ == "BaseModel"
        for base in kind.__mro__
    )


def _checked_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    plain = thaw(schema) if not isinstance(schema, dict) else schema
    try:
        json.dumps(plain)
    except (TypeError, ValueError) as err:
        raise ValueError(f"AgentConfig.output_type: the schema is not plain JSON ({err})") from None
    if plain.get("type") != "object":
        raise ValueError(
            "AgentConfig.output_type: the JSON schema must describe an object "
            f'("type": "object"), got type {plain.get("type")!r}'
        )
    return json.loads(json.dumps(plain))  # a private copy


def _json_validator(schema: dict[str, Any]) -> Any:
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as err:
        problem = f"not a valid JSON schema: {err.message}"
        raise ValueError(f"AgentConfig.output_type: {problem}") from None
    return cls(schema)


def _pydantic_problems(err: Any) -> str:
    parts = []
    for problem in err.errors(include_url=False):
        where = ".".join(str(p) for p in problem["loc"]) or "(root)"
        parts.append(f"{where}: {problem['msg']}")
    return "; ".join(parts)


def close_schema(schema: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """A copy with ``additionalProperties: false`` on every object that left it
    open, and whether it meets OpenAI's strict rules (every property required,
    no open objects)."""
    strict = True

    def walk(node: Any) -> Any:
        nonlocal strict
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, Mapping):
            return node
        out = {key: walk(value) for key, value in node.items()}
        if out.get("type") == "object" or "properties" in out:
            out.setdefault("additionalProperties", False)
            properties = out.get("properties") or {}
            optional = set(properties) - set(out.get("required") or ())
            if out["additionalProperties"] is not False or optional:
                strict = False
        return out

    return walk(schema), strict


@dataclasses.dataclass(slots=True)
class OutputProgress:
    """Where one run stands with its structured answer."""

    via_tool: bool = False  # this model answers through the output tool
    accepted: bool = False
    value: Any = None
    text: str | None = None  # the answer's JSON text, when it came as a tool call
    failures: int = 0
    error: OutputValidationError | None = None  # the latest rejection, not yet counted


def request_with_output(
    output: OutputType, model: Any, request: Any, progress: OutputProgress
) -> Any:
    """``request`` asking for the answer natively, or with the output tool offered."""
    progress.via_tool = not model.takes_output_schema(bool(request.tools))
    if progress.via_tool:
        return dataclasses.replace(request, tools=(*request.tools, output.tool))
    return dataclasses.replace(request, output=output.schema)


def check_answer(output: OutputType, text: str, progress: OutputProgress) -> str | None:
    """Accept a text answer, or return what to tell the model (the error is kept)."""
    try:
        progress.value = output.validate_text(text)
    except OutputValidationError as err:
        progress.error = err
        if progress.via_tool:
            return (
                f"Give your final answer by calling the {OUTPUT_TOOL} tool with input that "
                f"matches its schema. Your answer was not accepted: {err}"
            )
        return (
            f"Your answer did not match the required JSON schema: {err}\n"
            "Reply again with only JSON that matches the schema."
        )
    progress.accepted = True
    return None


def take_output_call(output: OutputType, call: Any, progress: OutputProgress) -> Any:
    """The result of an output-tool call: accepted, or an error telling what was wrong."""
    from turnkit.messages import ToolResultBlock

    try:
        progress.value = output.validate_data(call.input)
    except OutputValidationError as err:
        progress.error = err
        problem = f"The final result did not match the schema: {err}. Call {OUTPUT_TOOL} again."
        return ToolResultBlock(call.id, problem, is_error=True)
    progress.accepted = True
    progress.text = json.dumps(thaw(call.input), ensure_ascii=False)
    return ToolResultBlock(call.id, "Final result accepted.")
