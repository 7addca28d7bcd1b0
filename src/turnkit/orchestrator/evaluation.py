"""Online evaluation: score a sample of real runs in the background.

>>> def non_empty(input, result):
...     return bool(result.output.strip())
>>> evaluation = OnlineEvaluation([non_empty], sample=0.1, store_payloads="redacted")
>>> # Orchestrator(evaluation=evaluation); later: await orch.drain(); evaluation.sink.records

A scorer is a sync or async callable ``scorer(input, result)``: ``input`` is
the run's input (the string, or the run's own copy of the messages as wire
dicts), ``result`` its :class:`~turnkit.RunResult`. It returns a score (a
number or a bool), or ``(score, reason)``. Sync scorers run in a worker
thread. A scorer that raises or returns something else is recorded as an
error in the :class:`EvaluationRecord`, never raised.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from typing import Any, Literal, Protocol, TypeAlias

__all__ = [
    "EvaluationRecord",
    "EvaluationSink",
    "EvaluationStats",
    "JsonlSink",
    "MemorySink",
    "OnlineEvaluation",
    "PayloadMode",
    "ScoreResult",
    "Scorer",
]

PayloadMode: TypeAlias = Literal["none", "redacted", "full"]

Scorer: TypeAlias = Callable[[Any, Any], "float | bool | tuple[Any, Any] | Awaitable[Any]"]


@dataclass(frozen=True, slots=True)
class ScoreResult:
    """One scorer's verdict on one run: a score and reason, or an error."""

    scorer: str
    score: float | None = None
    reason: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class EvaluationRecord:
    """What online evaluation keeps of one sampled run.

    ``input``/``output`` are JSON text (redacted or full, each cut to
    ``max_payload_bytes``, ``truncated`` when either was cut), or None when
    payloads are not stored.
    """

    id: str
    created_at: str
    agent: str
    task: str | None
    success: bool
    input_tokens: int
    output_tokens: int
    scores: tuple[ScoreResult, ...]
    payloads: PayloadMode = "none"
    input: str | None = None
    output: str | None = None
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A plain dict, as one JSONL line holds it."""
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["scores"] = [
            {key: getattr(s, key) for key in s.__dataclass_fields__} for s in self.scores
        ]
        return out


@dataclass(frozen=True, slots=True)
class EvaluationStats:
    """Counts of online evaluation so far.

    ``sampled``: runs accepted for scoring; ``not_sampled``: runs left out by
    ``sample``; ``dropped``: sampled runs dropped because the queue was full;
    ``completed``: runs scored and written; ``scorer_errors``: scorer calls
    that failed; ``sink_errors``: records the sink failed to write.
    """

    sampled: int = 0
    not_sampled: int = 0
    dropped: int = 0
    completed: int = 0
    scorer_errors: int = 0
    sink_errors: int = 0


class EvaluationSink(Protocol):
    """Where records go: ``write(record)``, sync or async."""

    def write(self, record: EvaluationRecord) -> Awaitable[None] | None: ...


class MemorySink:
    """Keeps records in ``records``, a list, in the order they were written."""

    def __init__(self) -> None:
        self.records: list[EvaluationRecord] = []

    def write(self, record: EvaluationRecord) -> None:
        self.records.append(record)

    def __repr__(self) -> str:
        return f"<MemorySink {len(self.records)} records>"


class JsonlSink:
    """Appends each record as one JSON line to ``path`` (created if missing)."""

    def __init__(self, path: str | PathLike[str]) -> None:
        import threading  # here, not at the top: keeps `import turnkit` fast
        from pathlib import Path

        self.path = Path(path)
        self._lock = threading.Lock()

    def write(self, record: EvaluationRecord) -> None:
        line = json.dumps(record.to_dict(), ensure_ascii=False)
        with self._lock, self.path.open("a", encoding="utf-8") as file:
            file.write(line + "\n")

    def __repr__(self) -> str:
        return f"<JsonlSink {str(self.path)!r}>"


@dataclass(frozen=True, slots=True)
class OnlineEvaluation:
    """How an orchestrator scores its runs in the background.

    - ``scorers``: a list of scorers (named after their functions), or a
      mapping of name to scorer.
    - ``sample``: the probability (0 to 1) that a run is scored.
    - ``store_payloads``: ``none`` keeps no content; ``redacted`` keeps the
      input and output as JSON with secrets, emails and binary data masked;
      ``full`` keeps them as they are; both cut to ``max_payload_bytes``.
    - ``max_concurrent``: runs scored at once; ``max_queue``: runs waiting
      beyond those. A sampled run that finds the queue full is dropped and
      counted (:class:`EvaluationStats`).
    - ``sink``: where records go, a :class:`MemorySink` (the default) or a
      :class:`JsonlSink`, or any object with ``write(record)``.

    Scoring never changes or delays a run's result: it runs on a background
    thread; ``await orchestrator.drain()`` waits for what is pending.
    """

    scorers: Sequence[Scorer] | Mapping[str, Scorer]
    sample: float = 1.0
    store_payloads: PayloadMode = "none"
    max_payload_bytes: int = 8192
    max_concurrent: int = 1
    max_queue: int = 100
    sink: EvaluationSink | None = None
    named: tuple[tuple[str, Scorer], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "named", _named_scorers(self.scorers))
        if self.sink is None:
            object.__setattr__(self, "sink", MemorySink())
        elif not callable(getattr(self.sink, "write", None)):
            raise TypeError(
                f"OnlineEvaluation.sink must have a write(record) method: {self.sink!r}"
            )
        sample = self.sample
        if isinstance(sample, bool) or not isinstance(sample, (int, float)) or not 0 <= sample <= 1:
            raise ValueError(f"OnlineEvaluation.sample must be between 0 and 1, got {sample!r}")
        if self.store_payloads not in ("none", "redacted", "full"):
            raise ValueError(
                "OnlineEvaluation.store_payloads must be 'none', 'redacted' or 'full', "
                f"got {self.store_payloads!r}"
            )
        for name, least in (("max_payload_bytes", 0), ("max_concurrent", 1), ("max_queue", 0)):
            value = getattr(self, name)
            if type(value) is not int or value < least:
                raise ValueError(f"OnlineEvaluation.{name} must be an int >= {least}: {value!r}")


def _named_scorers(scorers: object) -> tuple[tuple[str, Scorer], ...]:
    if isinstance(scorers, Mapping):
        pairs = [(str(name), fn) for name, fn in scorers.items()]
    elif isinstance(scorers, (list, tuple)):
        pairs = [(_name_of(fn), fn) for fn in scorers]
    else:
        raise TypeError(f"OnlineEvaluation.scorers must be a list or a dict, got {scorers!r}")
    seen: dict[str, int] = {}
    named = []
    for name, fn in pairs:
        if not callable(fn):
            raise TypeError(f"OnlineEvaluation.scorers: {fn!r} is not callable")
        seen[name] = seen.get(name, 0) + 1
        named.append((name if seen[name] == 1 else f"{name}#{seen[name]}", fn))
    return tuple(named)


def _name_of(fn: object) -> str:
    return str(getattr(fn, "__name__", None) or type(fn).__name__)
