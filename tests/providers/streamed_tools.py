"""One check every streaming provider's fake runs: tool input arrives in pieces."""

from __future__ import annotations

import json
from typing import Any

from fakes import Reply, Text, ToolCall
from turnkit.messages import thaw
from turnkit.providers import ModelRequest


async def check_tool_input_streams_in_pieces(
    fake: Any, model: Any, request: ModelRequest, ids: tuple[str, str]
) -> None:
    """A reply of text and two tool calls: each call's input comes as several
    ``tool_input_delta`` pieces (its id and name, no input) that join to the whole
    call's input, and each whole call follows its pieces."""
    first = {"a": 1, "b": [1, 2, 3], "note": "long enough to arrive in several pieces"}
    calls = [ToolCall("add", first, id=ids[0]), ToolCall("add", {"a": 2}, id=ids[1])]
    fake.script(Reply([Text("Adding."), *calls]))
    events = [e async for e in model.stream(request)]
    kinds = [e.type for i, e in enumerate(events) if i == 0 or e.type != events[i - 1].type]
    assert kinds == ["text_delta", *("tool_input_delta", "tool_use") * 2, "done"]
    finals = [e.tool_call for e in events if e.type == "tool_use"]
    assert [c.id for c in finals] == list(ids)
    for final in finals:
        pieces = [e for e in events if e.type == "tool_input_delta" and e.tool_call.id == final.id]
        assert len(pieces) > 1
        assert all(e.tool_call.name == "add" and not e.tool_call.input for e in pieces)
        assert json.loads("".join(e.text for e in pieces)) == thaw(final.input)
    assert finals == list(events[-1].response.tool_calls)
