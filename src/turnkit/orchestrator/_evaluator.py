"""The background side of online evaluation: a bounded queue, scorers, a sink.

Scoring runs on an event loop of its own (a :class:`LoopThread`) started on
the first sampled run, so it neither delays a run's result nor depends on the
caller's loop (the ``_sync`` twins close theirs when they return). What is
handed over is immutable (the validated messages, the RunResult); each
scorer builds its own copy of the input from it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import random
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from turnkit._loop_thread import LoopThread
from turnkit._sync import call_sync_or_async, maybe_await
from turnkit.agent import RunResult
from turnkit.messages import Message
from turnkit.orchestrator._payloads import stored_payload
from turnkit.orchestrator.evaluation import (
    EvaluationRecord,
    EvaluationStats,
    OnlineEvaluation,
    Scorer,
    ScoreResult,
)

__all__ = ["Evaluator", "RunSample"]

logger = logging.getLogger("turnkit.orchestrator")


@dataclass(frozen=True, slots=True)
class RunSample:
    """A finished run, as handed to evaluation: a prompt or messages, and the result."""

    agent: str
    task: str | None
    input: str | tuple[Message, ...]
    result: RunResult

    def input_copy(self) -> str | list[dict[str, Any]]:
        """The input as a scorer gets it: the string, or new wire dicts."""
        if isinstance(self.input, str):
            return self.input
        return [message.to_dict() for message in self.input]


class Evaluator:
    """Samples finished runs and scores them on a background loop."""

    def __init__(self, config: OnlineEvaluation, chance: Callable[[], float] = random.random):
        self.config = config
        self._chance = chance
        self._lock = threading.Lock()
        self._pending: set[concurrent.futures.Future[None]] = set()
        self._stats = EvaluationStats()
        self._thread: LoopThread | None = None
        self._slots = asyncio.Semaphore(config.max_concurrent)  # renewed with each loop

    @property
    def stats(self) -> EvaluationStats:
        with self._lock:
            return self._stats

    def offer(self, sample: RunSample) -> bool:
        """Queue ``sample`` for scoring if it is sampled and there is room."""
        sampled = self._chance() < self.config.sample
        with self._lock:
            if not sampled:
                self._count(not_sampled=1)
                return False
            if len(self._pending) >= self.config.max_queue + self.config.max_concurrent:
                self._count(dropped=1)
                logger.warning(
                    "online evaluation queue is full; a run of %r was dropped", sample.agent
                )
                return False
            self._count(sampled=1)
            future = self._started().submit(self._evaluate(sample))
            self._pending.add(future)
        future.add_done_callback(self._finished)
        return True

    async def drain(self, timeout: float | None = None) -> None:
        """Wait until every queued run is scored and written (TimeoutError after ``timeout``)."""
        async with asyncio.timeout(timeout):
            while True:
                with self._lock:
                    pending = list(self._pending)
                if not pending:
                    return
                await asyncio.wait([asyncio.wrap_future(future) for future in pending])

    async def aclose(self, timeout: float | None = None) -> None:
        """Drain, then stop the background loop and its thread."""
        await self.drain(timeout)
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            await thread.stop()

    # -- internals (the background loop) --------------------------------------

    def _started(self) -> LoopThread:
        """The background loop, started on first use (call with the lock held)."""
        if self._thread is None:
            self._thread = LoopThread("turnkit-evaluation")
            self._slots = asyncio.Semaphore(self.config.max_concurrent)
        return self._thread

    def _count(self, **deltas: int) -> None:
        stats = self._stats
        self._stats = replace(stats, **{k: getattr(stats, k) + v for k, v in deltas.items()})

    def _finished(self, future: concurrent.futures.Future[None]) -> None:
        with self._lock:
            self._pending.discard(future)
        if not future.cancelled() and future.exception() is not None:
            logger.error("online evaluation failed", exc_info=future.exception())

    async def _evaluate(self, sample: RunSample) -> None:
        async with self._slots:
            scores = [await self._score(name, fn, sample) for name, fn in self.config.named]
            errors = sum(score.error is not None for score in scores)
            record = self._record(sample, tuple(scores))
            try:
                await maybe_await(self.config.sink.write(record))  # type: ignore[union-attr]
            except Exception:
                logger.exception("online evaluation sink %r failed", self.config.sink)
                with self._lock:
                    self._count(completed=1, scorer_errors=errors, sink_errors=1)
                return
            with self._lock:
                self._count(completed=1, scorer_errors=errors)

    async def _score(self, name: str, scorer: Scorer, sample: RunSample) -> ScoreResult:
        try:
            value = await call_sync_or_async(scorer, sample.input_copy(), sample.result)
            return _score_result(name, value)
        except Exception as err:
            logger.warning("scorer %r failed: %s: %s", name, type(err).__name__, err)
            return ScoreResult(name, error=f"{type(err).__name__}: {err}")

    def _record(self, sample: RunSample, scores: tuple[ScoreResult, ...]) -> EvaluationRecord:
        config, result = self.config, sample.result
        mode, limit = config.store_payloads, config.max_payload_bytes
        input_text, input_cut = stored_payload(sample.input_copy(), mode, limit)
        output = {"text": result.output, "error": result.error}
        output_text, output_cut = stored_payload(output, mode, limit)
        return EvaluationRecord(
            id=uuid.uuid4().hex,
            created_at=datetime.now(UTC).isoformat(),
            agent=sample.agent,
            task=sample.task,
            success=result.success,
            input_tokens=result.usage.input_tokens,
            output_tokens=result.usage.output_tokens,
            scores=scores,
            payloads=mode,
            input=input_text,
            output=output_text,
            truncated=input_cut or output_cut,
        )


def _score_result(name: str, value: object) -> ScoreResult:
    """A scorer's return value as a ScoreResult (an error when it is not a score)."""
    reason = None
    if isinstance(value, tuple) and len(value) == 2:
        value, reason = value
        reason = None if reason is None else str(reason)
    if isinstance(value, bool):
        return ScoreResult(name, 1.0 if value else 0.0, reason)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return ScoreResult(name, float(value), reason)
    problem = f"returned {value!r}; expected a number, a bool or (score, reason)"
    return ScoreResult(name, reason=reason, error=problem)
