"""Public errors of turnkit.

Every error that a caller can act on lives here, so ``except turnkit.X`` works
without knowing which room of the package raised it.
"""

from __future__ import annotations

__all__ = [
    "BudgetExceededError",
    "CostBudgetExceededError",
    "HopLimitError",
    "ImagePolicyError",
    "InvalidInputError",
    "InvalidMessageError",
    "MCPServerError",
    "MCPToolError",
    "ModelNotFoundError",
    "NoApprovalOpenError",
    "OutputValidationError",
    "PlanError",
    "ProviderError",
    "SessionEndedError",
    "SessionNotFoundError",
    "SlowFollowerError",
    "TaskGraphError",
    "TokenBudgetExceededError",
    "ToolInputError",
    "TurnNotFoundError",
    "TurnkitError",
    "UnknownAgentError",
    "UnsupportedContentError",
    "WebhookNotFoundError",
    "WebhookSignatureError",
]


class TurnkitError(Exception):
    """Base class of turnkit's own errors."""


class InvalidMessageError(TurnkitError, ValueError):
    """A message, block or list of them is not valid turnkit input.

    ``path`` names where the first problem is, in the caller's terms
    (``messages[1].content[0].source.data``); ``str(err)`` starts with it.
    Raised at the API boundary, before anything else happens.

    >>> err = InvalidMessageError("messages[0].role", "unknown role 'bot'")
    >>> str(err)
    "messages[0].role: unknown role 'bot'"
    """

    code = "INVALID_MESSAGE"

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}" if path else problem)

    def within(self, prefix: str) -> InvalidMessageError:
        """The same problem, with ``prefix`` put in front of its path."""
        if not prefix:
            return self
        if not self.path:
            path = prefix
        elif self.path.startswith("["):
            path = prefix + self.path
        else:
            path = f"{prefix}.{self.path}"
        return InvalidMessageError(path, self.problem)

    def __reduce__(self) -> tuple[type[InvalidMessageError], tuple[str, str]]:
        return (type(self), (self.path, self.problem))


class ProviderError(TurnkitError):
    """A model provider refused or failed a request.

    ``status`` is the HTTP status when there was one, ``message`` the
    provider's own text, and ``retryable`` whether trying again can help
    (rate limits, overload, 5xx and connection failures). ``retried`` says
    that the provider's SDK already retried it (its ``max_retries``, with
    backoff honouring ``retry_after``), so the orchestrator does not retry
    it again: each failure is retried by one layer only.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        retried: bool = False,
    ) -> None:
        self.message = message
        self.provider = provider
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.retried = retried
        where = f"{provider} {status}" if status is not None else provider
        super().__init__(f"{where}: {message}")

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only fields: pickled as state (durable steps and process
        # boundaries carry errors), for this class and its subclasses.
        return (_rebuild_with_state, (type(self), self.args, dict(vars(self))))


class UnsupportedContentError(ProviderError):
    """A block that this provider or model cannot take (never dropped silently)."""

    def __init__(self, message: str, *, provider: str) -> None:
        super().__init__(message, provider=provider, status=None, retryable=False)


class ImagePolicyError(TurnkitError, ValueError):
    """An image refused by the :class:`~turnkit.providers.ImagePolicy` in force."""


class ToolInputError(TurnkitError, ValueError):
    """A tool's input did not match its schema; the message is shown to the model."""


class OutputValidationError(TurnkitError, ValueError):
    """A model's answer did not match ``AgentConfig.output_type``, even after
    being told what was wrong ``output_retries`` times; ``str(err)`` says why."""


class MCPServerError(TurnkitError):
    """An MCP server could not be started or reached, stopped while a call
    was running, or did not answer in time. The message names the server."""


class MCPToolError(TurnkitError):
    """An MCP tool answered with an error result; the model gets its text as an
    error tool_result (this error is never raised to the caller of a run)."""


class ModelNotFoundError(TurnkitError, ValueError):
    """A model string that names no known provider, or a provider not installed."""


class BudgetExceededError(TurnkitError):
    """A model call refused because an orchestrator budget is spent.

    ``spent`` is what had been used when the call was refused and ``limit``
    the budget (tokens, or USD for :class:`CostBudgetExceededError`).
    """

    def __init__(self, message: str, *, spent: float, limit: float) -> None:
        self.spent = spent
        self.limit = limit
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_budget_error, (type(self), str(self), self.spent, self.limit))


class ContextTooLongError(TurnkitError):
    """A conversation too long for its model, and compaction could not shorten it.

    Raised before a model call when the conversation is estimated over
    ``compaction.max_tokens``, the summariser failed or returned nothing, and
    the estimate is over the model's ``context_window`` too. ``tokens`` is
    the estimate, ``context_window`` the model's window, and ``cause`` says
    why the summary did not happen. Durable sessions end such a turn with
    ``reason="context_too_long"``.
    """

    def __init__(self, message: str, *, tokens: int, context_window: int, cause: str) -> None:
        self.tokens = tokens
        self.context_window = context_window
        self.cause = cause
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_with_state, (type(self), self.args, dict(vars(self))))


class TokenBudgetExceededError(BudgetExceededError):
    """The tokens spent reached ``Budget.max_tokens``; the next model call is refused."""


class CostBudgetExceededError(BudgetExceededError):
    """The cost spent reached ``Budget.max_cost_usd``; the next model call is refused."""


def _rebuild_with_state(
    kind: type[Exception], args: tuple[object, ...], state: dict[str, object]
) -> Exception:
    error = kind.__new__(kind)
    error.args = args
    vars(error).update(state)
    return error


def _rebuild_budget_error(
    kind: type[BudgetExceededError], message: str, spent: float, limit: float
) -> BudgetExceededError:
    return kind(message, spent=spent, limit=limit)


class TaskGraphError(TurnkitError, ValueError):
    """Tasks that cannot run as a graph: duplicate titles, unknown assignees or
    dependencies, or a cycle. ``problems`` lists each one; nothing has run."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("invalid task graph: " + "; ".join(problems))


class PlanError(TurnkitError):
    """The coordinator of a team run gave no usable plan, even after being told
    what was wrong. ``problems`` lists what was wrong with its last reply."""

    def __init__(self, message: str, problems: list[str] | tuple[str, ...] = ()) -> None:
        self.problems = tuple(problems)
        super().__init__(message)


class SessionNotFoundError(TurnkitError, LookupError):
    """No session has this id (``session_id`` says which)."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"session {session_id!r} not found")


class HopLimitError(TurnkitError):
    """An input was not created: the chain of turn outcomes and sub-agent tasks it
    would continue is already ``limit`` hops long (``App(max_hops=...)``)."""

    def __init__(self, what: str, hops: int, limit: int) -> None:
        self.hops, self.limit = hops, limit
        super().__init__(
            f"{what} was not started: it would be {hops} hops (turn outcomes and "
            f"sub-agent tasks) from an outside input, past the App's max_hops={limit}"
        )


class SessionEndedError(TurnkitError):
    """The session was ended (``App.end_session``): it takes no more input."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"session {session_id!r} has ended; it takes no more input")


class SlowFollowerError(TurnkitError):
    """A ``follow(live=True)`` that did not read fast enough was dropped.

    Live deltas are not buffered without limit: follow again from
    ``after=last_seq`` (the seq of the last durable event it gave) to go on.
    """

    def __init__(self, session_id: str, last_seq: int) -> None:
        self.session_id, self.last_seq = session_id, last_seq
        super().__init__(
            f"the live follower of session {session_id!r} fell too far behind and was "
            f"dropped; follow again from after={last_seq}"
        )


class TurnNotFoundError(TurnkitError, LookupError):
    """No turn has this id (``turn_id`` says which)."""

    def __init__(self, turn_id: str) -> None:
        self.turn_id = turn_id
        super().__init__(f"turn {turn_id!r} not found")


class UnknownAgentError(TurnkitError, LookupError):
    """No agent of this name is defined on the App (``@app.agent``)."""

    def __init__(self, name: object, known: tuple[str, ...] = ()) -> None:
        self.name = name
        listed = ", ".join(repr(n) for n in known) or "none"
        super().__init__(f"unknown agent {name!r}; the app defines: {listed}")


class InvalidInputError(TurnkitError, ValueError):
    """An input to a session that cannot be accepted; nothing was stored.

    ``field`` names the argument that was wrong (``payload``, ``text``,
    ``payload.items[2]``); ``str(err)`` starts with it.
    """

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")

    def __reduce__(self) -> tuple[type[InvalidInputError], tuple[str, str]]:
        return (type(self), (self.field, self.problem))


class NoApprovalOpenError(InvalidInputError):
    """``approve`` on a session with no tool calls waiting for a decision (HTTP 409).

    Nothing was stored. The session may have no open question, or one from
    ``ask`` (answer it with ``send``), or the calls were decided already.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(
            "session_id",
            f"session {session_id!r} has no tool calls waiting for a decision "
            "(no open question with approvals)",
        )

    def __reduce__(self) -> tuple[type[NoApprovalOpenError], tuple[str]]:  # type: ignore[override]
        return (type(self), (self.session_id,))


class WebhookNotFoundError(TurnkitError, LookupError):
    """No webhook of this id is defined on the App (``app.webhook``)."""

    def __init__(self, webhook_id: str) -> None:
        self.webhook_id = webhook_id
        super().__init__(f"no webhook {webhook_id!r} is defined")


class WebhookSignatureError(TurnkitError):
    """A webhook delivery whose Standard Webhooks signature does not verify; nothing was stored.

    ``reason`` says what was wrong (a missing header, a timestamp outside the
    tolerance, no matching ``v1`` signature).
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"webhook signature refused: {reason}")
