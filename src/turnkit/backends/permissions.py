"""Answers to an ACP agent's permission requests: deny unless a policy allows."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from turnkit._sync import maybe_await

__all__ = [
    "PermissionDecision",
    "PermissionOption",
    "PermissionPolicy",
    "PermissionRequest",
    "check_permission_policy",
    "decide_permission",
]


@dataclass(frozen=True, slots=True)
class PermissionOption:
    """One answer the agent offers: ``kind`` is allow_once, allow_always,
    reject_once or reject_always."""

    option_id: str
    name: str
    kind: str


@dataclass(frozen=True, slots=True)
class PermissionRequest:
    """What an ACP agent asks permission for: a tool call, and the answers it offers."""

    session_id: str
    tool_call_id: str
    title: str | None
    kind: str | None
    input: Any
    options: tuple[PermissionOption, ...]


PermissionDecision: TypeAlias = bool | str | None
"""True: allow; False or None: deny; a str: the ``option_id`` to select."""

PermissionPolicy: TypeAlias = (
    Literal["deny", "allow"]
    | Callable[[PermissionRequest], PermissionDecision | Awaitable[PermissionDecision]]
)
"""``"deny"`` (the default), ``"allow"``, or a function (sync or async) that decides."""

_ALLOW = ("allow_once", "allow_always")
_REJECT = ("reject_once", "reject_always")


def check_permission_policy(policy: object) -> PermissionPolicy:
    """``policy`` if it is "deny", "allow" or callable; ValueError otherwise."""
    if policy in ("deny", "allow") or callable(policy):
        return policy  # type: ignore[return-value]
    raise ValueError(f"permission_policy must be 'deny', 'allow' or a function, got {policy!r}")


async def decide_permission(policy: PermissionPolicy, request: PermissionRequest) -> str | None:
    """The option to select for ``request``, or None to refuse without one.

    Allowing picks the first allow_once option, else allow_always; denying
    the first reject_once, else reject_always (None when none is offered).
    Allowing when no allow option is offered denies. Raises what a policy
    function raises, and ValueError for an option id that was not offered.
    """
    if policy == "deny":
        return _pick(request.options, _REJECT)
    if policy == "allow":
        return _pick(request.options, _ALLOW) or _pick(request.options, _REJECT)
    assert callable(policy)
    decision = await maybe_await(policy(request))
    if decision is True:
        return _pick(request.options, _ALLOW) or _pick(request.options, _REJECT)
    if decision is False or decision is None:
        return _pick(request.options, _REJECT)
    if isinstance(decision, str):
        offered = [option.option_id for option in request.options]
        if decision in offered:
            return decision
        if decision in ("allow", "deny"):
            return await decide_permission(decision, request)
        raise ValueError(f"permission_policy chose {decision!r}, not one of the options {offered}")
    raise TypeError(f"permission_policy must return a bool, None or an option id, got {decision!r}")


def _pick(options: Sequence[PermissionOption], kinds: tuple[str, ...]) -> str | None:
    for kind in kinds:
        for option in options:
            if option.kind == kind:
                return option.option_id
    return None
