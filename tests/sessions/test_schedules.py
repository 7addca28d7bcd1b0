"""Schedules: cron in a time zone across DST, once per instant across restarts and processes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from turnkit.sessions import App, InvalidInputError, UnknownAgentError
from turnkit.sessions.sources.schedules import latest_instant
from turnkit.testing import ScriptedModel

BERLIN = ZoneInfo("Europe/Berlin")
HERE = Path(__file__).parent


def scheduled_app(db_url: str, model: ScriptedModel | None = None, **schedule: object) -> App:
    app = App(db_url, fire_schedules=False)

    @app.agent("digest", model=model or ScriptedModel([lambda r: "done"] * 500))
    def digest() -> str:
        return "Write the digest."

    options = {"cron": "30 2 * * *", "timezone": "Europe/Berlin", "overlap": "allow"}
    options.update(schedule)
    app.schedule("nightly", agent="digest", dispatch={"text": "digest please"}, **options)  # type: ignore[arg-type]
    return app


def minutes(start: datetime, end: datetime) -> list[datetime]:
    out, when = [], start
    while when <= end:
        out.append(when)
        when += timedelta(minutes=1)
    return out


async def fire_each_minute(app: App, start: datetime, end: datetime) -> list[tuple[str, str]]:
    """Call run_schedules at every minute of [start, end]; (called at UTC, scheduled_for)."""
    fired = []
    for when in minutes(start, end):
        for fire in await app.run_schedules(when):
            assert fire.status == "fired"
            fired.append((when.isoformat(), fire.scheduled_for.isoformat()))
    return fired


async def test_berlin_0230_across_both_2026_dst_nights_fires_once_a_night(db_url: str) -> None:
    app = scheduled_app(db_url)
    async with app:
        # the night before spring-forward: a normal 02:30 CET
        before = await fire_each_minute(
            app, datetime(2026, 3, 28, 1, 0, tzinfo=UTC), datetime(2026, 3, 28, 2, 0, tzinfo=UTC)
        )
        assert before == [("2026-03-28T01:30:00+00:00", "2026-03-28T02:30:00+01:00")]
        # 29 March: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist: it fires at 03:00
        spring = await fire_each_minute(
            app, datetime(2026, 3, 28, 23, 0, tzinfo=UTC), datetime(2026, 3, 29, 3, 0, tzinfo=UTC)
        )
        assert spring == [("2026-03-29T01:00:00+00:00", "2026-03-29T03:00:00+02:00")]
        # 25 October: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice, fires once.
        # (The first call comes after months without one: only the latest missed fires.)
        autumn = await fire_each_minute(
            app, datetime(2026, 10, 24, 23, 0, tzinfo=UTC), datetime(2026, 10, 25, 3, 0, tzinfo=UTC)
        )
        assert autumn == [
            ("2026-10-24T23:00:00+00:00", "2026-10-24T02:30:00+02:00"),
            ("2026-10-25T00:30:00+00:00", "2026-10-25T02:30:00+02:00"),
        ]
        after = await fire_each_minute(
            app, datetime(2026, 10, 26, 1, 0, tzinfo=UTC), datetime(2026, 10, 26, 2, 0, tzinfo=UTC)
        )
        assert after == [("2026-10-26T01:30:00+00:00", "2026-10-26T02:30:00+01:00")]
        session = await app.create_session("digest", key="schedule:nightly")
        events = await app.events(session.id)
        inputs = [e for e in events if e.type == "input.received"]
        assert len(inputs) == 5 and all(e.data["source"] == "schedule" for e in inputs)
        turns = [e.turn_id for e in inputs]
        info = (await app.input(turns[1])).schedule
        assert info.id == "nightly"
        assert info.scheduled_for == datetime(2026, 3, 29, 3, 0, tzinfo=BERLIN)
        assert (await app.wait(turns[-1], timeout=10)).status == "completed"


def test_the_latest_instant_is_the_same_wherever_the_search_starts() -> None:
    app = scheduled_app("sqlite:////nonexistent/unused.db")
    defn = app._schedules["nightly"]
    first = datetime(2026, 10, 25, 0, 30, tzinfo=UTC).timestamp()
    # started inside the repeated hour (second pass), after the first 02:30 fired
    for minute in range(31, 120):
        now = first + 60 * minute - 30 * 60
        assert latest_instant(defn, first, now) is None
    assert latest_instant(defn, first - 1, first + 3600).timestamp() == first


async def test_a_restart_between_fires_neither_repeats_nor_loses_one(db_url: str) -> None:
    daily = {"cron": "0 9 * * *", "timezone": "UTC"}
    day = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
    async with scheduled_app(db_url, **daily) as app:
        assert [f.status for f in await app.run_schedules(day)] == ["fired"]
        assert await app.run_schedules(day + timedelta(seconds=40)) == []
    async with scheduled_app(db_url, **daily) as app:  # a new process on the same database
        assert await app.run_schedules(day + timedelta(minutes=1)) == []
        next_day = await app.run_schedules(day + timedelta(days=1))
        assert [f.scheduled_for for f in next_day] == [day + timedelta(days=1)]
        # down for three days: only the latest missed instant fires
        late = await app.run_schedules(day + timedelta(days=4, hours=5))
        assert [f.scheduled_for for f in late] == [day + timedelta(days=4)]
        assert await app.run_schedules(day + timedelta(days=4, hours=6)) == []
        statuses = await app.schedules(day + timedelta(days=4, hours=6))
        assert statuses[0].next_fire_at == day + timedelta(days=5)
        assert statuses[0].last_fired_for == day + timedelta(days=4)
        session = await app.create_session("digest", key="schedule:nightly")
        inputs = [e for e in await app.events(session.id) if e.type == "input.received"]
        assert len(inputs) == 3


async def test_a_new_schedule_does_not_fire_instants_before_it_was_first_seen(db_url: str) -> None:
    async with scheduled_app(db_url, cron="0 9 * * *", timezone="UTC") as app:
        assert await app.run_schedules(datetime(2026, 5, 4, 9, 5, tzinfo=UTC)) == []
        fires = await app.run_schedules(datetime(2026, 5, 5, 9, 0, 20, tzinfo=UTC))
        assert [f.scheduled_for.day for f in fires] == [5]


async def test_overlap_skip_records_schedule_skipped_while_the_previous_turn_runs(
    db_url: str,
) -> None:
    release, started = threading.Event(), threading.Event()

    def slow(request: object) -> str:
        started.set()
        assert release.wait(20)
        return "done"

    model = ScriptedModel([slow, *[lambda r: "done"] * 10])
    start = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
    app = scheduled_app(db_url, model, cron="* * * * *", timezone="UTC", overlap="skip")
    async with app:
        (first,) = await app.run_schedules(start)
        assert started.wait(10)
        (second,) = await app.run_schedules(start + timedelta(minutes=1))
        assert second.status == "skipped" and second.turn_id is None
        release.set()
        assert (await app.wait(first.turn_id, timeout=10)).status == "completed"
        (third,) = await app.run_schedules(start + timedelta(minutes=2))
        assert third.status == "fired"
        skipped = [e for e in await app.events(first.session_id) if e.type == "schedule.skipped"]
        assert [e.data for e in skipped] == [
            {"schedule_id": "nightly", "scheduled_for": "2026-05-04T09:01:00+00:00"}
        ]


async def test_a_fire_interrupted_after_its_claim_is_stored_once_by_the_next_call(
    db_url: str,
) -> None:
    from turnkit.sessions.db import schedules as rows
    from turnkit.sessions.sources import schedules

    app = scheduled_app(db_url, cron="0 * * * *", timezone="UTC")
    async with app:
        due = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
        await app.run_schedules(due - timedelta(minutes=30))  # first sight
        defn = app._schedules["nightly"]
        session_id = schedules._session_for(app.runtime, defn, due)
        claimed = rows.claim_instant(app.runtime.store, defn.id, defn.overlap, due, session_id)
        assert claimed is False  # then "crash"
        fires = await app.run_schedules(due)  # the next call stores the claimed fire...
        assert [(f.status, f.scheduled_for) for f in fires] == [("fired", due)]
        assert await app.run_schedules(due + timedelta(minutes=5)) == []  # ...once
        inputs = [e for e in await app.events(session_id) if e.type == "input.received"]
        assert len(inputs) == 1


def test_two_processes_running_the_same_minutes_fire_each_instant_once(any_db_url: str) -> None:
    db_url = any_db_url
    procs = []
    try:
        for _ in range(2):  # started one after the other: both then fire the same minutes
            proc = subprocess.Popen(
                [sys.executable, str(HERE / "schedule_proc.py"), db_url],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            procs.append(proc)
            assert proc.stdout.readline().strip() == "ready"
        for proc in procs:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = [json.loads(proc.stdout.readline()) for proc in procs]
    finally:
        for proc in procs:
            proc.stdin.close()
            proc.wait(timeout=30)
    fired = sorted(when for result in results for when in result)
    assert len(fired) == 30 and len(set(fired)) == 30
    import sqlalchemy as sa

    engine = sa.create_engine(db_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT source, details FROM turnkit_inputs")).all()
    engine.dispose()
    assert len(stored) == 30 and {row.source for row in stored} == {"schedule"}
    assert sorted(json.loads(row.details)["schedule"]["scheduled_for"] for row in stored) == fired


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"cron": "0 9 * *"}, "five fields"),
        ({"cron": "0 9 * * * *"}, "five fields"),
        ({"cron": "61 9 * * *"}, "Bad minute"),
        ({"timezone": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
        ({"overlap": "queue"}, "overlap must be 'skip' or 'allow'"),
        ({"dispatch": {"payload": "x" * (32 * 1024)}}, "dispatch.payload: is 32770 bytes"),
        ({"dispatch": {}}, "needs a text or a payload"),
        ({"dispatch": {"text": "a", "extra": 1}}, "only 'text' and 'payload'"),
        ({"id": "no spaces"}, "the id must be"),
    ],
)
def test_bad_schedule_definitions_are_refused_naming_the_problem(
    options: dict[str, object], problem: str
) -> None:
    app = App("sqlite:////nonexistent/unused.db")
    app.agent("digest", model=ScriptedModel(["x"]))(lambda: "x")
    args: dict[str, object] = {"id": "s", "cron": "0 9 * * *", "agent": "digest"}
    args["dispatch"] = {"text": "go"}
    args.update(options)
    with pytest.raises(ValueError, match=r"app\.schedule") as caught:
        app.schedule(**args)  # type: ignore[arg-type]
    assert problem in str(caught.value)
    with pytest.raises(UnknownAgentError):
        app.schedule("s", "0 9 * * *", "nobody", dispatch={"text": "go"})


async def test_run_schedules_wants_an_aware_time(db_url: str) -> None:
    async with scheduled_app(db_url) as app:
        with pytest.raises(InvalidInputError, match=r"now: must be a timezone-aware datetime"):
            await app.run_schedules(datetime(2026, 5, 4, 9, 0))


async def test_a_started_app_fires_what_is_due_by_itself(db_url: str) -> None:
    app = App(db_url)  # fire_schedules defaults to True: the engine calls run_schedules

    @app.agent("digest", model=ScriptedModel([lambda r: "done"] * 5))
    def digest() -> str:
        return "Write the digest."

    app.schedule("every", "* * * * *", "digest", dispatch={"text": "tick"})
    async with app:
        session = await app.create_session("digest", key="schedule:every")
        async with asyncio.timeout(30):
            async for event in app.follow(session.id):
                if event.type == "turn.completed":
                    break
        turn = await app.get_turn(event.turn_id)
        assert turn.input.source == "schedule" and turn.input.text == "tick"
        assert turn.input.schedule.scheduled_for <= datetime.now(UTC)
        (status,) = await app.schedules()
        assert status.last_fired_for == turn.input.schedule.scheduled_for
        assert status.next_fire_at == status.last_fired_for + timedelta(minutes=1)


async def test_a_schedule_whose_session_ended_stores_nothing_and_moves_on(db_url: str) -> None:
    start = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
    async with scheduled_app(db_url, cron="0 * * * *", timezone="UTC") as app:
        (first,) = await app.run_schedules(start)
        await app.end_session(first.session_id)
        (second,) = await app.run_schedules(start + timedelta(hours=1))
        assert (second.status, second.turn_id) == ("session_ended", None)
        assert await app.run_schedules(start + timedelta(hours=1, minutes=5)) == []
        inputs = [e for e in await app.events(first.session_id) if e.type == "input.received"]
        assert len(inputs) == 1


def test_a_bad_schedule_session_key_names_every_accepted_form() -> None:
    app = App("sqlite:////nonexistent/unused.db")
    app.agent("digest", model=ScriptedModel(["x"]))(lambda: "x")

    def schedule(id: str, key: object) -> None:
        app.schedule(id, "0 9 * * *", "digest", dispatch={"text": "go"}, session_key=key)  # type: ignore[arg-type]

    for bad in (42, b"nightly", ["nightly"]):
        with pytest.raises(ValueError) as caught:
            schedule("s", bad)
        assert str(caught.value) == (
            "app.schedule('s'): session_key must be a string (one session for every fire), "
            "a function of the ScheduleInfo that returns the session's key, or None "
            f"(the schedule's own session); got {type(bad).__name__}"
        )
    with pytest.raises(ValueError, match=r"app\.schedule\('s'\): session_key: must be a non-empty"):
        schedule("s", "")
    schedule("s", "nightly")
    schedule("t", lambda info: "k")
