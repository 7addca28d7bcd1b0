"""AgentConfig: everything an :class:`~turnkit.Agent` is built from."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from turnkit.agent.compaction import Compaction
from turnkit.messages import Message
from turnkit.providers.base import Model
from turnkit.providers.images import ImagePolicy
from turnkit.providers.registry import resolve_model

if TYPE_CHECKING:
    from turnkit.agent.context import RunContext
    from turnkit.agent.results import RunResult
    from turnkit.tools import Tool

__all__ = ["AfterRun", "AgentConfig", "BeforeRun", "ConvertToLlm", "TransformContext"]

BeforeRun: TypeAlias = Callable[
    ["RunContext"], "RunContext | Mapping[str, Any] | Awaitable[Any] | None"
]
AfterRun: TypeAlias = Callable[["RunContext", "RunResult"], "RunResult | Awaitable[Any] | None"]
TransformContext: TypeAlias = Callable[[list[Message]], "Sequence[Any] | Awaitable[Sequence[Any]]"]
ConvertToLlm: TypeAlias = Callable[[list[Message]], "Sequence[Any] | Awaitable[Sequence[Any]]"]

DEFAULT_MODEL = "local"


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """How an agent talks to its model.

    - ``model``: a model string (``"anthropic:claude-sonnet-4-5"``) or a
      :class:`~turnkit.providers.Model`; None means the default model.
    - ``system``: the system prompt.
    - ``tools``: :class:`~turnkit.Tool` objects, or plain typed functions
      (made into tools as ``@turnkit.tool`` would).
    - ``history``: messages (dicts or objects) to start from; validated and
      copied when the Agent is built.
    - ``max_turns``: model calls one run may make before it stops unfinished.
    - ``max_output_tokens``, ``temperature``, ``thinking``: model settings.
    - ``before_run(ctx)`` / ``after_run(ctx, result)``: hooks, sync or async
      (see :class:`~turnkit.RunContext`).
    - ``transform_context(messages)`` then ``convert_to_llm(messages)`` shape
      the messages of every model request (sync or async);
      ``convert_to_llm`` defaults to
      :func:`~turnkit.default_convert_to_llm`.
    - ``thinking_replay``: what happens to thinking the model cannot verify
      (another provider's or model's, or unsigned): ``"drop"`` (default) or
      ``"text"`` (sent as plain ``<thinking>`` text).
    - ``image_policy``: an :class:`~turnkit.providers.ImagePolicy` for the
      images of every request (default: ``ImagePolicy()``).
    - ``output_type``: a Pydantic model class, a dataclass, a TypedDict
      (``typing`` or ``typing_extensions``) or a JSON schema dict (an
      object): the final answer must match it, and
      ``RunResult.output_data`` holds the validated value. Providers with a
      native mechanism constrain the answer; other models get a
      ``final_result`` tool. An answer that does not validate is sent back
      with the error, at most ``output_retries`` times, then the run fails
      with :class:`~turnkit.OutputValidationError`.
    - ``compaction``: a :class:`~turnkit.Compaction`: before a model call
      whose conversation is estimated over ``compaction.max_tokens``, the
      older messages are summarised into one ``compaction`` message and the
      model sees that summary and the latest messages. ``prompt()`` keeps
      every message in the history, each compaction message at its place;
      in ``run()`` it shortens what that run sends.
    - ``backend``: an external agent (:class:`~turnkit.backends.ProcessBackend`,
      :class:`~turnkit.backends.AcpBackend`) that runs the turns instead of
      ``model``; text only (SPEC section 6).
    """

    name: str
    model: str | Model | None = None
    system: str | None = None
    tools: Sequence[Tool | Callable[..., Any]] = ()
    history: Sequence[Message | Mapping[str, Any]] = ()
    max_turns: int = 10
    max_output_tokens: int | None = None
    temperature: float | None = None
    thinking: bool | int | Literal["low", "medium", "high"] | None = None
    before_run: BeforeRun | None = None
    after_run: AfterRun | None = None
    transform_context: TransformContext | None = None
    convert_to_llm: ConvertToLlm | None = None
    backend: Any = None
    thinking_replay: Literal["drop", "text"] = "drop"
    image_policy: ImagePolicy | None = None
    output_type: Any = None
    output_retries: int = 1
    compaction: Compaction | None = None


def resolve_agent_model(model: str | Model | None, default: str | Model | None = None) -> Model:
    """The model an agent uses: its own, else ``default``, else ``"local"``.

    The one place where the default is chosen (an orchestrator passes its
    ``default_model``).
    """
    if model is None:
        model = DEFAULT_MODEL if default is None else default
    return resolve_model(model)
