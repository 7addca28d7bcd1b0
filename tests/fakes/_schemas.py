"""Structured-output request checks the fakes share, with the providers' texts.

- OpenAI (Chat ``response_format`` and Responses ``text.format``): a
  ``json_schema`` format needs a ``name`` (``^[a-zA-Z0-9_-]{1,64}$``) and a
  ``schema``; with ``strict: true`` every object must set
  ``additionalProperties: false`` and list every property in ``required``:
  "Invalid schema for response_format 'X': In context=(...), 'additionalProperties'
  is required to be supplied and to be false." (moeru-ai/xsai#202,
  google/adk-python#4039); the ``required`` text follows the same pattern.
- Anthropic ``output_config.format``: ``{"type": "json_schema", "schema"}``,
  every object closed: "output_config.format.schema: For 'object' type,
  'additionalProperties' must be explicitly set to false"
  (veryfront/veryfront-code#3921, ax-llm/ax#458).
- Gemini: ``responseJsonSchema`` needs ``responseMimeType`` "application/json";
  before Gemini 3, JSON output next to function declarations is refused:
  "Function calling with a response mime type: 'application/json' is
  unsupported" (reconstructed from reports; wording not seen verbatim).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def objects(schema: Any, context: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], dict]]:
    """Every object schema inside ``schema`` with its context path."""
    if isinstance(schema, list):
        for index, item in enumerate(schema):
            yield from objects(item, (*context, str(index)))
        return
    if not isinstance(schema, dict):
        return
    if schema.get("type") == "object" or "properties" in schema:
        yield context, schema
    for key, value in schema.items():
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            for name, inner in value.items():
                yield from objects(inner, (*context, key, name))
        elif key in ("items", "anyOf", "allOf", "oneOf", "additionalProperties"):
            yield from objects(value, (*context, key))


def strict_problem(schema: Any) -> str | None:
    """What OpenAI's strict mode refuses in ``schema``, or None."""
    for context, node in objects(schema):
        where = f"In context={context!r}"
        if node.get("additionalProperties") is not False:
            return f"{where}, 'additionalProperties' is required to be supplied and to be false."
        missing = [p for p in node.get("properties") or {} if p not in (node.get("required") or [])]
        if missing:
            return (
                f"{where}, 'required' is required to be supplied and to be an array including "
                f"every key in properties. Missing '{missing[0]}'."
            )
    return None


def openai_format_problem(fmt: Any, where: str) -> tuple[str, str] | None:
    """(message, param) for a bad json_schema format, or None."""
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema"):
        kind = fmt.get("type") if isinstance(fmt, dict) else fmt
        return (
            f"Invalid value: '{kind}'. Supported values are: 'text', 'json_object', and "
            "'json_schema'.",
            f"{where}.type",
        )
    if fmt["type"] != "json_schema":
        return None
    name = fmt.get("name")
    if name is None:
        return f"Missing required parameter: '{where}.name'.", f"{where}.name"
    if not isinstance(name, str) or not NAME.match(name):
        return (
            f"Invalid '{where}.name': string does not match pattern. Expected a string that "
            "matches the pattern '^[a-zA-Z0-9_-]+$'.",
            f"{where}.name",
        )
    if not isinstance(fmt.get("schema"), dict):
        return f"Missing required parameter: '{where}.schema'.", f"{where}.schema"
    if fmt.get("strict") and (problem := strict_problem(fmt["schema"])):
        return f"Invalid schema for response_format '{name}': {problem}", f"{where}.schema"
    return None


def anthropic_format_problem(config: Any) -> str | None:
    """The refusal text for a bad ``output_config``, or None."""
    fmt = config.get("format") if isinstance(config, dict) else None
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return "output_config.format.type: Input should be 'json_schema'"
    if not isinstance(fmt.get("schema"), dict):
        return "output_config.format.schema: Field required"
    for _, node in objects(fmt["schema"]):
        if node.get("additionalProperties") is not False:
            return (
                "output_config.format.schema: For 'object' type, 'additionalProperties' must be "
                "explicitly set to false"
            )
    return None


def gemini_format_problem(body: dict[str, Any], model: str) -> str | None:
    """The refusal text for a bad JSON-output generation config, or None."""
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema", config.get("response_json_schema"))
    mime = config.get("responseMimeType", config.get("response_mime_type"))
    if schema is not None and mime != "application/json":
        return (
            "* GenerateContentRequest.generation_config.response_mime_type: "
            "response_json_schema requires response_mime_type to be application/json.\n"
        )
    if mime == "application/json" and body.get("tools") and "gemini-3" not in model:
        return "Function calling with a response mime type: 'application/json' is unsupported"
    return None
