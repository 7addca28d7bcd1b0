"""One retry policy: each failure is retried by one layer only.

The SDK retries what it can (HTTP 408/409/429/5xx and failures to connect:
the model's ``max_retries``, honouring ``retry-after``); the orchestrator
retries a task only after a retryable failure the SDK did not retry. So a
provider answering 429 forever costs ``1 + max_retries`` calls per task (3
by default), not ``(1 + 2) * (1 + 2) = 9``.
"""

from __future__ import annotations

import pytest

from fakes.models import REMOTES
from turnkit import AgentConfig, Orchestrator, ProviderError, Task, Team
from turnkit.testing import ScriptedModel

from ._support import Progress


@pytest.mark.parametrize("provider", ["anthropic", "openai", "openai-responses", "gemini"])
@pytest.mark.parametrize("sdk_retries", [2, 0])
async def test_a_provider_answering_429_forever_costs_three_calls_per_task(
    provider: str, sdk_retries: int
) -> None:
    remote = REMOTES[provider]
    progress = Progress()
    with remote.fake() as fake:
        for _ in range(12):
            fake.fail(429, "slow down", retry_after_ms="1")
        model = remote.model(fake, max_retries=sdk_retries)
        orch = Orchestrator(model, on_progress=progress, retry_base_delay=0.001)
        done = await orch.run_tasks(Team([AgentConfig("a")]), [Task("T", "Say hi", assignee="a")])
        calls = len(fake.requests)
    # The SDK's retries (sdk_retries=2) or, without them, the orchestrator's
    # (max_retries=2): three calls either way, never both layers at once.
    assert calls == 3
    result = done.task("T")
    assert result.status == "failed" and "slow down" in (result.error or "")
    assert result.attempts == (1 if sdk_retries else 3)
    assert len(progress.of("task_retry")) == (0 if sdk_retries else 2)


async def test_a_failure_the_sdk_did_not_retry_is_retried_by_the_orchestrator() -> None:
    broken = ProviderError("the stream broke", provider="anthropic", retryable=True)
    model = ScriptedModel([_raise(broken), _raise(broken), "hi"])
    orch = Orchestrator(model, retry_base_delay=0.001)
    done = await orch.run_tasks(Team([AgentConfig("a")]), [Task("T", "Say hi", assignee="a")])
    assert done.task("T").output == "hi" and done.task("T").attempts == 3


async def test_a_failure_the_sdk_already_retried_is_not_retried_again() -> None:
    limited = ProviderError("rate limited", provider="openai", status=429, retryable=True)
    limited.retried = True
    model = ScriptedModel([_raise(limited), "never reached"])
    done = await Orchestrator(model).run_tasks(
        Team([AgentConfig("a")]), [Task("T", "Say hi", assignee="a")]
    )
    assert done.task("T").status == "failed" and len(model.requests) == 1


def _raise(error: Exception):  # type: ignore[no-untyped-def]
    def reply(request: object) -> None:
        raise error

    return reply
