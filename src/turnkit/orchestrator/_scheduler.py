"""Runs a checked task graph: each task as soon as its dependencies are done.

At most ``max_concurrency`` tasks run at once. A retryable failure (a
:class:`~turnkit.errors.ProviderError` with ``retryable``) is tried again
after an exponential backoff with jitter. A task that does not complete
skips its dependants, transitively. A budget refusal fails its task and
skips every task that has not started.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence

from turnkit.errors import BudgetExceededError
from turnkit.orchestrator._attempts import Attempt, RetryPolicy, is_retryable, usage_data
from turnkit.orchestrator.events import ProgressEvent
from turnkit.orchestrator.tasks import Task, TaskResult
from turnkit.providers.base import Usage

__all__ = ["GraphRun"]


RunAttempt = Callable[[Task, str, Mapping[str, TaskResult]], Awaitable[Attempt]]
Emit = Callable[[ProgressEvent], Awaitable[None]]


class GraphRun:
    """One run of a checked task graph."""

    def __init__(
        self,
        tasks: Sequence[Task],
        assignment: Mapping[str, str],
        run_attempt: RunAttempt,
        emit: Emit,
        max_concurrency: int,
        retry: RetryPolicy,
    ) -> None:
        self.tasks = tuple(tasks)
        self.assignment = assignment
        self.run_attempt = run_attempt
        self.emit = emit
        self.retry = retry
        self.results: dict[str, TaskResult] = {}
        self.halted: str | None = None  # why tasks not yet started are skipped
        self._causes: dict[str, str | None] = {}
        self._done = {task.title: asyncio.Event() for task in tasks}
        self._slots = asyncio.Semaphore(max_concurrency)

    async def run(self) -> tuple[TaskResult, ...]:
        """Run every task; their results in task-list order."""
        async with asyncio.TaskGroup() as group:
            for task in self.tasks:
                group.create_task(self._run_task(task))
        return tuple(self.results[task.title] for task in self.tasks)

    async def _run_task(self, task: Task) -> None:
        try:
            for dep in task.depends_on:
                await self._done[dep].wait()
            if not await self._skipped_for_deps(task):
                async with self._slots:
                    if self.halted is not None:
                        await self._skip(task, self.halted, None)
                    else:
                        self.results[task.title] = await self._attempts(task)
        finally:
            self._done[task.title].set()

    async def _skipped_for_deps(self, task: Task) -> bool:
        for dep in task.depends_on:
            found = self.results[dep]
            if found.status != "completed":
                which = "failed" if found.status == "failed" else "was skipped"
                cause = dep if found.status == "failed" else self._causes.get(dep)
                await self._skip(task, f"depends on {dep!r}, which {which}", cause)
                return True
        if self.halted is not None:
            await self._skip(task, self.halted, None)
            return True
        return False

    async def _skip(self, task: Task, reason: str, cause: str | None) -> None:
        agent = self.assignment[task.title]
        self.results[task.title] = TaskResult(task.title, "skipped", agent, error=reason)
        self._causes[task.title] = cause
        data = {"reason": reason, "cause": cause}
        await self.emit(ProgressEvent("task_skipped", agent, task.title, data))

    async def _attempts(self, task: Task) -> TaskResult:
        agent, title = self.assignment[task.title], task.title
        deps = {dep: self.results[dep] for dep in task.depends_on}
        await self.emit(
            ProgressEvent("task_start", agent, title, {"depends_on": list(task.depends_on)})
        )
        usage, cost, attempt = Usage(), 0.0, 0
        while True:
            attempt += 1
            outcome: Attempt | None = None
            try:
                outcome = await self.run_attempt(task, agent, deps)
                usage, cost = usage + outcome.result.usage, cost + outcome.cost_usd
                error = outcome.error
            except Exception as err:
                error = err
            if isinstance(error, BudgetExceededError):
                self.halted = f"the budget ran out: {error}"
            if outcome is not None and outcome.result.success:
                return await self._finish(task, agent, outcome, usage, cost, attempt)
            if not is_retryable(error) or attempt > self.retry.max_retries:
                return await self._finish(task, agent, outcome, usage, cost, attempt, error)
            delay = self.retry.delay(attempt, error)
            data = {"attempt": attempt, "error": _describe(error, outcome), "delay_s": delay}
            await self.emit(ProgressEvent("task_retry", agent, title, data))
            await asyncio.sleep(delay)

    async def _finish(
        self,
        task: Task,
        agent: str,
        outcome: Attempt | None,
        usage: Usage,
        cost: float,
        attempts: int,
        error: BaseException | None = None,
    ) -> TaskResult:
        result = outcome.result if outcome is not None else None
        if result is not None and result.success:
            status, text = "completed", None
        else:
            status, text = "failed", _describe(error, outcome)
        done = TaskResult(
            task.title,
            status,
            agent,
            result.output if result is not None else "",
            usage,
            cost,
            attempts,
            text,
            result,
        )
        data = {
            "status": status,
            "output": done.output,
            "usage": usage_data(usage),
            "attempts": attempts,
            "error": text,
        }
        await self.emit(ProgressEvent("task_complete", agent, task.title, data))
        if status == "failed":
            kind = type(error).__name__ if error is not None else "RunFailed"
            data = {"error": text, "type": kind}
            await self.emit(ProgressEvent("error", agent, task.title, data))
        return done


def _describe(error: BaseException | None, outcome: Attempt | None) -> str:
    if outcome is not None and outcome.result.error:
        return outcome.result.error
    if error is not None:
        return f"{type(error).__name__}: {error}"
    return "the run failed"
