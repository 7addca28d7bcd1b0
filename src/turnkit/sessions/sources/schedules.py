"""Schedules: five-field cron in an IANA time zone, each instant fired at most once.

Instants come from cronsim (on a daylight-saving night a repeated hour fires
a fixed-time job once and a skipped time fires at the next valid minute, as
Vixie cron does; croniter fires twice) evaluated in a ``zoneinfo`` zone.

Firing is claimed in the database, so restarts and several processes fire
each instant at most once. A schedule's row holds the latest instant claimed
(``fired_for``). :func:`run_schedules` computes the latest instant due at
``now`` after it, then claims it in a write transaction that re-reads the
row: the one process whose claim moves ``fired_for`` forward fires (or
records ``schedule.skipped``); the others see it claimed. A claimed fire is
``pending`` until its input is stored; the input carries an idempotency key
made of the schedule and the instant, so a fire that a crash interrupted is
completed by the next call and stored once. After downtime only the latest
missed instant fires, and a schedule first seen at ``now`` fires from that
minute on (no backfill).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from turnkit._values import cut_utf8, describe_error, storable
from turnkit._values import now as wall_now
from turnkit.errors import InvalidInputError, SessionEndedError, UnknownAgentError
from turnkit.sessions.db import schedules as rows
from turnkit.sessions.db.inputs import NewInput
from turnkit.sessions.db.turns import MAX_ERROR_BYTES
from turnkit.sessions.model import checks as check
from turnkit.sessions.model.inputs import ScheduleInfo

if TYPE_CHECKING:
    from turnkit.sessions.runtime.runtime import Runtime

__all__ = [
    "MAX_SCHEDULE_PAYLOAD_BYTES",
    "ScheduleDef",
    "ScheduleFire",
    "ScheduleStatus",
    "define_schedule",
    "latest_instant",
    "next_instant",
    "run_schedules",
    "schedule_statuses",
]

MAX_SCHEDULE_PAYLOAD_BYTES = 32 * 1024
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}")
log = logging.getLogger("turnkit.schedules")


@dataclasses.dataclass(frozen=True, slots=True)
class ScheduleDef:
    """A schedule of an App, as checked by ``app.schedule``."""

    id: str
    cron: str
    agent: str
    timezone: str
    zone: ZoneInfo
    text: str | None
    payload_json: str
    overlap: Literal["skip", "allow"]
    session_key: Callable[[ScheduleInfo], str] | str | None


@dataclasses.dataclass(frozen=True, slots=True)
class ScheduleFire:
    """What :func:`run_schedules` did for one schedule at one instant.

    ``status``: ``fired`` (an input was stored: ``input_id``, ``turn_id``),
    ``skipped`` (``overlap="skip"`` and the previous fire's turn was queued or
    running: a ``schedule.skipped`` event was written), ``session_ended``
    (the schedule's session was ended; nothing was stored) or ``failed``
    (its ``session_key`` raised or returned a bad key: a ``schedule.failed``
    event in the schedule's own session ``schedule:<id>`` says why, and the
    instant counts as done).
    """

    schedule_id: str
    scheduled_for: datetime
    status: Literal["fired", "skipped", "session_ended", "failed"]
    session_id: str
    input_id: str | None = None
    turn_id: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ScheduleStatus:
    """A schedule as ``GET /schedules`` lists it."""

    id: str
    cron: str
    timezone: str
    agent: str
    overlap: str
    next_fire_at: datetime
    last_fired_for: datetime | None


def define_schedule(
    agents: dict[str, Any],
    schedule_id: object,
    cron: object,
    agent: object,
    timezone: object,
    dispatch: object,
    overlap: object,
    session_key: object,
) -> ScheduleDef:
    """A checked :class:`ScheduleDef`; ``ValueError`` naming the bad argument otherwise."""
    where = f"app.schedule({schedule_id!r})"
    if type(schedule_id) is not str or not _ID.fullmatch(schedule_id):
        raise ValueError(
            f"{where}: the id must be 1-200 characters of letters, digits and _ . : - "
            "(starting with a letter or digit)"
        )
    if not isinstance(agent, str) or agent not in agents:
        raise UnknownAgentError(agent, tuple(agents))
    zone = _zone(timezone, where)
    _check_cron(cron, zone, where)
    text, payload_json = _dispatch(dispatch, where)
    if overlap not in ("skip", "allow"):
        raise ValueError(f"{where}: overlap must be 'skip' or 'allow', got {overlap!r}")
    check.check_session_key_setting(
        session_key, where, "fire", "the ScheduleInfo", " (the schedule's own session)"
    )
    return ScheduleDef(
        schedule_id,
        cron,  # type: ignore[arg-type]
        agent,
        timezone,  # type: ignore[arg-type]
        zone,
        text,
        payload_json,
        overlap,  # type: ignore[arg-type]
        session_key,  # type: ignore[arg-type]
    )


def _zone(timezone: object, where: str) -> ZoneInfo:
    if not isinstance(timezone, str) or not timezone:
        raise ValueError(f"{where}: timezone must be an IANA zone name such as 'Europe/Berlin'")
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{where}: unknown time zone {timezone!r}") from None


def _check_cron(cron: object, zone: ZoneInfo, where: str) -> None:
    from cronsim import CronSim, CronSimError

    if not isinstance(cron, str) or len(cron.split()) != 5:
        raise ValueError(
            f"{where}: cron must have five fields (minute hour day-of-month month "
            f"day-of-week), got {cron!r}"
        )
    try:
        CronSim(cron, datetime.now(zone))
    except CronSimError as err:
        raise ValueError(f"{where}: bad cron expression {cron!r}: {err}") from None


def _dispatch(dispatch: object, where: str) -> tuple[str | None, str]:
    if dispatch is None:
        dispatch = {}
    if not isinstance(dispatch, dict):
        raise ValueError(f"{where}: dispatch must be a dict with 'text' and/or 'payload'")
    unknown = sorted(set(dispatch) - {"text", "payload"})
    if unknown:
        raise ValueError(f"{where}: dispatch takes only 'text' and 'payload', not {unknown}")
    try:
        text = check.check_text(dispatch.get("text"), "dispatch.text")
        payload_json = check.check_payload(
            dispatch.get("payload"), MAX_SCHEDULE_PAYLOAD_BYTES, "dispatch.payload"
        )
    except InvalidInputError as err:
        raise ValueError(f"{where}: {err}") from None
    if not text and payload_json == "null":
        raise ValueError(f"{where}: dispatch needs a text or a payload; both are empty")
    return text, payload_json


# -- instants ------------------------------------------------------------------


def latest_instant(defn: ScheduleDef, lower: float, now: float) -> datetime | None:
    """The latest instant of ``defn`` in (``lower``, ``now``] (UNIX seconds), in its zone."""
    from cronsim import CronSim

    window = 3600.0
    while True:
        start = max(lower, now - window)
        best: datetime | None = None
        for when in CronSim(defn.cron, datetime.fromtimestamp(start, defn.zone)):
            stamp = when.timestamp()
            if stamp > now:
                break
            # cronsim started inside a repeated hour may first give an earlier instant
            if stamp > lower and (best is None or stamp > best.timestamp()):
                best = when
        if best is not None or start <= lower:
            return best
        window *= 4


def next_instant(defn: ScheduleDef, after: float) -> datetime:
    """The first instant of ``defn`` after ``after`` (UNIX seconds), in its zone."""
    from cronsim import CronSim

    for when in CronSim(defn.cron, datetime.fromtimestamp(after, defn.zone)):
        if when.timestamp() > after:
            return when
    raise AssertionError("unreachable: cron expressions repeat")  # pragma: no cover


def stamp_of(now: object) -> float:
    if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise InvalidInputError("now", f"must be a timezone-aware datetime, got {now!r}")
    return now.timestamp()


# -- firing --------------------------------------------------------------------


async def run_schedules(
    runtime: Runtime, schedules: Iterable[ScheduleDef], now: datetime
) -> list[ScheduleFire]:
    """Fire every schedule that is due at ``now``; what was done.

    One schedule that fails (its ``session_key`` raises, its session's
    database write fails) is logged and does not stop the others.
    """
    stamp = stamp_of(now)
    fires: list[ScheduleFire] = []
    for defn in list(schedules):
        try:
            fires.extend(await asyncio.to_thread(_run_one, runtime, defn, stamp))
        except Exception:
            log.exception("schedule %r failed at %s; the others still fire", defn.id, now)
    return fires


def _run_one(runtime: Runtime, defn: ScheduleDef, now: float) -> list[ScheduleFire]:
    """A fire that a crash left pending, completed; then the instant due at ``now``."""
    store = runtime.store
    fires: list[ScheduleFire | None] = []
    row = rows.schedule_row(store, defn.id, now)
    if row.pending:
        fires.append(_complete(runtime, defn, row.session_id, row.fired_for))
        row = rows.schedule_row(store, defn.id, now)
    lower = row.fired_for if row.fired_for is not None else row.since - 1.0
    due = latest_instant(defn, lower, now)
    if due is None:
        return [fire for fire in fires if fire is not None]
    try:
        session_id = _session_for(runtime, defn, due)
    except Exception as err:  # the user's session_key: its failure is this schedule's alone
        fires.append(_failed(runtime, defn, due, err))
        return [fire for fire in fires if fire is not None]
    skipped = rows.claim_instant(store, defn.id, defn.overlap, due, session_id)
    if skipped is None:
        return [fire for fire in fires if fire is not None]  # another process claimed it
    if skipped:
        fires.append(ScheduleFire(defn.id, due, "skipped", session_id))
    else:
        fires.append(_complete(runtime, defn, session_id, due.timestamp()))
    return [fire for fire in fires if fire is not None]


def _session_for(runtime: Runtime, defn: ScheduleDef, due: datetime) -> str:
    key = defn.session_key
    if key is None:
        key = f"schedule:{defn.id}"
    elif callable(key):
        key = check.check_key(key(ScheduleInfo(defn.id, due)), "session_key")
        if key is None:
            raise InvalidInputError("session_key", "returned None; return the session's key")
    session, _ = runtime.open_session(defn.agent, key, {})
    return session.id


def _failed(
    runtime: Runtime, defn: ScheduleDef, due: datetime, err: Exception
) -> ScheduleFire | None:
    """Record that ``due`` could not fire, in the schedule's own session; None when
    another process claimed the instant first."""
    log.warning("schedule %r could not fire for %s: %s", defn.id, due, err)
    error, _ = cut_utf8(storable(describe_error(err)) or "", MAX_ERROR_BYTES)
    session, _ = runtime.open_session(defn.agent, f"schedule:{defn.id}", {})
    if not rows.fail_instant(runtime.store, defn.id, due, session.id, error):
        return None
    return ScheduleFire(defn.id, due, "failed", session.id)


def _complete(
    runtime: Runtime, defn: ScheduleDef, session_id: str, stamp: float
) -> ScheduleFire | None:
    """Store the claimed fire's input (once, whoever calls), then clear ``pending``.

    None when another process stored it first.
    """
    due = datetime.fromtimestamp(stamp, defn.zone)
    new = NewInput(
        "schedule",
        defn.text,
        defn.payload_json,
        {"schedule": {"id": defn.id, "scheduled_for": due.isoformat()}},
        f"schedule:{defn.id}:{int(stamp)}",
    )
    try:
        receipt = runtime.accept(session_id, new)
    except SessionEndedError:
        log.warning("schedule %r: its session %s has ended; not fired", defn.id, session_id)
        rows.settle(runtime.store, defn.id, stamp, None)
        return ScheduleFire(defn.id, due, "session_ended", session_id)
    rows.settle(runtime.store, defn.id, stamp, receipt.turn_id)
    if receipt.duplicate:
        return None
    return ScheduleFire(defn.id, due, "fired", session_id, receipt.input_id, receipt.turn_id)


# -- listing -------------------------------------------------------------------


def schedule_statuses(
    runtime: Runtime, schedules: Iterable[ScheduleDef], now: float
) -> list[ScheduleStatus]:
    """Every schedule with its next fire time after ``now``."""
    fired_for = rows.fired_instants(runtime.store)
    statuses = []
    for defn in schedules:
        fired = fired_for.get(defn.id)
        after = now if fired is None else max(now, fired)
        statuses.append(
            ScheduleStatus(
                defn.id,
                defn.cron,
                defn.timezone,
                defn.agent,
                defn.overlap,
                next_instant(defn, after),
                None if fired is None else datetime.fromtimestamp(fired, defn.zone),
            )
        )
    return statuses


def utc_now() -> datetime:
    """The real time, as an aware UTC datetime."""
    return datetime.now(UTC)


# -- the engine's clock --------------------------------------------------------


class ScheduleTicker:
    """Calls ``fire(now)`` with the real time at start and each minute after.

    It runs on its own loop thread, so it lives as long as the App whatever
    loop started it (``with app:`` runs start and stop on short-lived loops).
    ``any_defined()`` says whether there is anything to fire.
    """

    def __init__(
        self,
        fire: Callable[[datetime], Awaitable[Any]],
        any_defined: Callable[[], bool],
    ) -> None:
        from turnkit._loop_thread import LoopThread

        self._fire, self._any_defined = fire, any_defined
        self._thread = LoopThread("turnkit-schedules")
        self._future = self._thread.submit(self._tick())

    async def _tick(self) -> None:
        while True:
            if self._any_defined():
                try:
                    await self._fire(datetime.now(UTC))
                except Exception:
                    log.exception("run_schedules failed; trying again at the next minute")
            # a little past the minute, so the instant of this minute is due
            await asyncio.sleep(60.0 - wall_now() % 60.0 + 0.05)

    async def stop(self) -> None:
        self._future.cancel()
        await self._thread.stop()
