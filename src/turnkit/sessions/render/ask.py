"""The built-in ``ask`` tool: the agent asks a question and its turn ends.

The question is session state in the database, not a coroutine waiting in
memory: it survives restarts, and whichever process gets the answer resumes
the conversation. The answer reaches the model as the ``ask`` call's result,
in the first message of the turn that answers it.
"""

from __future__ import annotations

import hashlib
from typing import Any

from turnkit.messages import ToolUseBlock
from turnkit.sessions.model.records import Question, QuestionOption
from turnkit.tools import Tool

__all__ = ["ASK", "answer_value", "ask_tool", "question_for"]

ASK = "ask"

_SCHEMA = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "minLength": 1, "description": "The question to ask."},
        "options": {
            "type": "array",
            "description": "Choices to offer, if the answer is one of a few.",
            "items": {
                "type": "object",
                "properties": {
                    "label": {"type": "string", "description": "What the person sees."},
                    "value": {"type": "string", "description": "What the choice means."},
                },
                "required": ["label", "value"],
            },
        },
    },
    "required": ["question"],
}


def _outside_sessions(**_: Any) -> str:
    raise RuntimeError("the ask tool works only in an App session, which ends the turn to wait")


_TOOL = Tool(
    ASK,
    "Ask the person you are working with a question and wait for the answer. Your turn "
    "ends here; the answer comes back as this call's result.",
    _SCHEMA,
    _outside_sessions,
)


def ask_tool() -> Tool:
    """The ``ask`` tool (offer it with ``use_tool("ask")``)."""
    return _TOOL


def question_for(turn_id: str, call: ToolUseBlock, arguments: Any) -> Question:
    """The question an ``ask`` call asks; its id is the same on every replay of the call."""
    digest = hashlib.sha256(f"{turn_id}\0{call.id}".encode()).hexdigest()[:24]
    options = tuple(
        QuestionOption(str(o["label"]), o["value"]) for o in arguments.get("options") or ()
    )
    return Question(f"q_{digest}", str(arguments["question"]), options, turn_id)


def answer_value(question: Question, text: str | None) -> Any:
    """The value of the option whose value or label equals ``text`` (trimmed, any case)."""
    if text is None:
        return None
    wanted = text.strip().casefold()
    for option in question.options:
        if str(option.value).strip().casefold() == wanted:
            return option.value
    for option in question.options:
        if option.label.strip().casefold() == wanted:
            return option.value
    return None
