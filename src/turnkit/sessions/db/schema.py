"""turnkit's tables (SQLAlchemy Core), in the same database as DBOS's own.

Every table turnkit writes is here, the channels' outbox included, so there
is one schema version and one migration path; sessions code never reads the
channel tables (``turnkit.channels`` owns them).

The schema carries a version in ``turnkit_meta``. :func:`migrate` creates the
tables on an empty database and runs each step of :data:`MIGRATIONS` whose
version is above the stored one, in one transaction; a database written by a
newer turnkit is refused rather than guessed at. To change the schema in a
later release: add a function to ``MIGRATIONS`` under the next version and
bump :data:`SCHEMA_VERSION`.

JSON lives in TEXT columns (portable across SQLite and Postgres, written
with one ``json.dumps`` policy). Times are UNIX seconds (float, UTC).
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate", "tables"]

SCHEMA_VERSION = 10

metadata = sa.MetaData()

sessions = sa.Table(
    "turnkit_sessions",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("agent", sa.String(200), nullable=False),
    sa.Column("key", sa.String(500)),
    sa.Column("ended", sa.Boolean, nullable=False, default=False),
    sa.Column("question", sa.Text),
    sa.Column("data", sa.Text, nullable=False),
    sa.Column("parent_id", sa.String(64)),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("ended_at", sa.Float),
    # When its latest event was appended (created_at before any): set by the
    # statement that bumps event_seq, so it is never a write of its own.
    sa.Column("last_activity_at", sa.Float, nullable=False),
    # Counters, bumped in the transaction that uses them: gapless per session.
    sa.Column("event_seq", sa.Integer, nullable=False, default=0),
    sa.Column("input_seq", sa.Integer, nullable=False, default=0),
    sa.Column("turn_seq", sa.Integer, nullable=False, default=0),
    sa.Column("message_seq", sa.Integer, nullable=False, default=0),
    sa.Column("runner_seq", sa.Integer, nullable=False, default=0),
    # The workflow that runs this session's turns, one at a time (None: none does).
    sa.Column("runner", sa.String(100)),
    sa.Column("forked_from", sa.Text),  # JSON {session_id, at} of a fork, else None
    sa.UniqueConstraint("agent", "key", name="uq_turnkit_sessions_agent_key"),
    sa.Index("ix_turnkit_sessions_created", "created_at", "id"),  # newest first, paged
)

inputs = sa.Table(
    "turnkit_inputs",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("session_id", sa.String(64), nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("source", sa.String(20), nullable=False),
    sa.Column("text", sa.Text),
    sa.Column("payload", sa.Text),  # JSON, "null" when there is none
    sa.Column("details", sa.Text, nullable=False),  # JSON: channel, answers, event, ...
    sa.Column("idempotency_key", sa.String(500)),
    sa.Column("answers", sa.String(64)),  # the question this input names as answered
    sa.Column("received_at", sa.Float, nullable=False),
    sa.Column("held", sa.Boolean, nullable=False, default=False),  # waited for an answer
    sa.Column("turn_id", sa.String(64)),  # the turn that runs it
    sa.Column("steering_of", sa.String(64)),  # the answer's turn it was delivered with
    sa.UniqueConstraint("session_id", "seq", name="uq_turnkit_inputs_seq"),
    sa.UniqueConstraint("session_id", "idempotency_key", name="uq_turnkit_inputs_idem"),
    # Each turn asks which inputs were steered into it: without this, a scan of all.
    sa.Index("ix_turnkit_inputs_steering", "steering_of"),
)

turns = sa.Table(
    "turnkit_turns",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("session_id", sa.String(64), nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("input_id", sa.String(64), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("input", sa.Text, nullable=False),  # the AgentInput, as JSON
    sa.Column("resume", sa.Text),  # an answer's turn: the ask call it answers, held results
    sa.Column("output", sa.Text),
    sa.Column("output_data", sa.Text),  # structured output, as JSON
    sa.Column("question", sa.Text),
    sa.Column("error", sa.Text),
    sa.Column("reason", sa.String(64)),
    sa.Column("usage", sa.Text),
    sa.Column("queued_at", sa.Float, nullable=False),
    sa.Column("started_at", sa.Float),
    sa.Column("ended_at", sa.Float),
    sa.Column("workflow_id", sa.String(100)),  # the DBOS workflow that claimed it
    sa.Column("cancel_reason", sa.String(64)),
    sa.UniqueConstraint("session_id", "seq", name="uq_turnkit_turns_seq"),
    sa.Index("ix_turnkit_turns_pending", "session_id", "status", "seq"),
    sa.Index("ix_turnkit_turns_workflow", "workflow_id"),
)

messages = sa.Table(
    "turnkit_messages",
    metadata,
    sa.Column("session_id", sa.String(64), primary_key=True),
    sa.Column("position", sa.Integer, primary_key=True),
    sa.Column("turn_id", sa.String(64), nullable=False),
    sa.Column("turn_index", sa.Integer, nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    # A compaction message stands in its place: right before this position
    # (see db/conversation.py); None for every other message.
    sa.Column("before_position", sa.Integer),
    sa.UniqueConstraint("turn_id", "turn_index", name="uq_turnkit_messages_turn"),
)

steps = sa.Table(
    "turnkit_steps",
    metadata,
    sa.Column("turn_id", sa.String(64), primary_key=True),
    sa.Column("key", sa.String(300), primary_key=True),  # "model:3", "tool:<call id>"
    sa.Column("status", sa.String(16), nullable=False),  # started | done
    sa.Column("result", sa.Text),
)

events = sa.Table(
    "turnkit_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("session_id", sa.String(64), nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("turn_id", sa.String(64)),
    sa.Column("type", sa.String(32), nullable=False),
    sa.Column("timestamp", sa.Float, nullable=False),
    sa.Column("data", sa.Text, nullable=False),
    sa.UniqueConstraint("session_id", "seq", name="uq_turnkit_events_seq"),
)

subscriptions = sa.Table(
    "turnkit_subscriptions",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("subscriber_id", sa.String(64), nullable=False),
    sa.Column("to_session", sa.String(64)),
    sa.Column("to_agent", sa.String(200)),
    sa.Column("created_at", sa.Float, nullable=False),
    # Not enough alone: one of to_session and to_agent is always NULL, and NULLs differ.
    sa.UniqueConstraint("subscriber_id", "to_session", "to_agent", name="uq_turnkit_subs"),
    sa.Index("ix_turnkit_subs_session", "to_session"),
    sa.Index("ix_turnkit_subs_agent", "to_agent"),
)

# One subscription per (subscriber, watched session) and per (subscriber, watched agent).
_SUBSCRIPTION_KEYS = [
    sa.Index(
        f"uq_turnkit_subs_{column}",
        subscriptions.c.subscriber_id,
        subscriptions.c[column],
        unique=True,
        sqlite_where=subscriptions.c[column].is_not(None),
        postgresql_where=subscriptions.c[column].is_not(None),
    )
    for column in ("to_session", "to_agent")
]

# Which session a webhook delivery went to, by its webhook-id: a replay goes to the
# same session whatever its body, before session_key routes it.
webhook_deliveries = sa.Table(
    "turnkit_webhook_deliveries",
    metadata,
    sa.Column("webhook_id", sa.String(100), primary_key=True),
    sa.Column("message_id", sa.String(200), primary_key=True),
    sa.Column("session_id", sa.String(64), nullable=False),
    sa.Column("received_at", sa.Float, nullable=False),
)

schedules = sa.Table(
    "turnkit_schedules",
    metadata,
    sa.Column("id", sa.String(200), primary_key=True),
    sa.Column("since", sa.Float, nullable=False),  # first seen: instants from this minute on
    sa.Column("fired_for", sa.Float),  # the latest instant claimed (fired or skipped)
    sa.Column("pending", sa.Boolean, nullable=False, default=False),  # claimed, not yet stored
    sa.Column("session_id", sa.String(64)),  # where the claimed fire goes
    sa.Column("turn_id", sa.String(64)),  # the turn of the latest fire
    sa.Column("updated_at", sa.Float, nullable=False),
)

channel_links = sa.Table(
    "turnkit_channel_links",
    metadata,
    sa.Column("session_id", sa.String(64), primary_key=True),
    sa.Column("provider", sa.String(16), nullable=False),  # slack | linear
    sa.Column("address", sa.Text, nullable=False),  # JSON: where replies go, read at start
    sa.Column("created_at", sa.Float, nullable=False),
)

# Replies owed to a channel, written in the transaction that ends the turn.
channel_outbox = sa.Table(
    "turnkit_channel_outbox",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("session_id", sa.String(64), nullable=False),
    sa.Column("turn_id", sa.String(64)),
    sa.Column("provider", sa.String(16), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),  # outcome | notice
    sa.Column("content", sa.Text, nullable=False),  # JSON
    sa.Column("dedupe_key", sa.String(300)),
    sa.Column("status", sa.String(16), nullable=False),  # pending | sent | failed
    sa.Column("done", sa.Integer, nullable=False, default=0),  # posts already made
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("next_at", sa.Float, nullable=False),
    sa.Column("lease_until", sa.Float),
    sa.Column("lease_owner", sa.String(64)),  # the delivery task holding the lease
    sa.Column("last_error", sa.Text),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.UniqueConstraint("dedupe_key", name="uq_turnkit_outbox_dedupe"),
    sa.Index("ix_turnkit_outbox_pending", "status", "id"),
)

# One row per executor id: which process holds it, and until when (see db/executors.py).
executors = sa.Table(
    "turnkit_executors",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("holder", sa.String(64), nullable=False),  # one process's incarnation
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("runs_turns", sa.Boolean, nullable=False),
    sa.Column("max_running", sa.Integer, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),  # live | released | taking | taken
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("renewed_at", sa.Float, nullable=False),
    sa.Column("lease_until", sa.Float, nullable=False),
    sa.Column("taken_by", sa.String(64)),  # the executor that took over its turns
    sa.Column("taken_at", sa.Float),
)

# Runners named for a session but not started by any process yet: the queue of
# work for whichever process that runs turns has a free slot (see
# runtime/dispatch.py). A row is taken, and deleted, by the process that starts it.
waiting_runners = sa.Table(
    "turnkit_waiting_runners",
    metadata,
    sa.Column("runner_id", sa.String(100), primary_key=True),
    sa.Column("session_id", sa.String(64), nullable=False),
    sa.Column("since", sa.Float, nullable=False),
    sa.Index("ix_turnkit_waiting_runners_since", "since"),
)

# The deltas of model calls still streaming (live output, not the event log):
# a follower that joins mid-message reads them. When the reply is recorded they
# are marked done (a follower about to give the reply reads any it has not been
# handed yet) and deleted a little later.
live = sa.Table(
    "turnkit_live",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("session_id", sa.String(64), nullable=False),
    sa.Column("turn_id", sa.String(64), nullable=False),
    sa.Column("step", sa.String(40), nullable=False),  # the model call's step key
    sa.Column("stream", sa.String(32), nullable=False),  # one attempt at that call
    sa.Column("idx", sa.Integer, nullable=False),
    sa.Column("after_seq", sa.Integer, nullable=False),
    sa.Column("type", sa.String(20), nullable=False),
    sa.Column("data", sa.Text, nullable=False),  # JSON
    sa.Column("done_at", sa.Float),  # when the call's reply (or the turn's end) was recorded
    sa.Index("ix_turnkit_live_session", "session_id", "id"),
    sa.Index("ix_turnkit_live_turn", "turn_id", "step"),
    sa.Index("ix_turnkit_live_done", "done_at"),  # the sweep of old rows
)

meta = sa.Table(
    "turnkit_meta",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

tables = metadata

Migration = Callable[[sa.Connection], None]

_MIGRATION_LOCK = 0x7475726E6B6974  # "turnkit": the advisory lock key of migrations


def _session_runners(conn: sa.Connection) -> None:
    """Version 2: a session's turns run in one workflow at a time, named on its row."""
    conn.execute(
        sa.text("ALTER TABLE turnkit_sessions ADD COLUMN runner_seq INTEGER NOT NULL DEFAULT 0")
    )
    conn.execute(sa.text("ALTER TABLE turnkit_sessions ADD COLUMN runner VARCHAR(100)"))


def _long_sessions(conn: sa.Connection) -> None:
    """Version 3: forks name their source; compaction messages stand in their place;
    sessions are listed newest first."""
    conn.execute(sa.text("ALTER TABLE turnkit_sessions ADD COLUMN forked_from TEXT"))
    conn.execute(sa.text("ALTER TABLE turnkit_messages ADD COLUMN before_position INTEGER"))
    conn.execute(
        sa.text("CREATE INDEX ix_turnkit_sessions_created ON turnkit_sessions (created_at, id)")
    )


def _unique_deliveries_and_subscriptions(conn: sa.Connection) -> None:
    """Version 4: webhook deliveries recorded by webhook-id; subscriptions made unique
    (duplicates that concurrent subscribes made are removed, the first kept)."""
    metadata.create_all(conn, tables=[webhook_deliveries])
    c = subscriptions.c
    first = sa.select(sa.func.min(c.id)).group_by(c.subscriber_id, c.to_session, c.to_agent)
    conn.execute(subscriptions.delete().where(c.id.not_in(first)))
    for index in _SUBSCRIPTION_KEYS:
        index.create(conn, checkfirst=True)


def _executor_leases(conn: sa.Connection) -> None:
    """Version 5: every process's executor id is leased, so a lapsed one's turns are
    taken over by a live process."""
    metadata.create_all(conn, tables=[executors])


def _live_output(conn: sa.Connection) -> None:
    """Version 6: the deltas of model calls still streaming (``turnkit_live``)."""
    metadata.create_all(conn, tables=[live])


def _add_column(conn: sa.Connection, table: str, column: str, definition: str) -> bool:
    """Add ``column`` unless the table has it (a table an earlier step made as it is
    now); whether it was added."""
    if column in {found["name"] for found in sa.inspect(conn).get_columns(table)}:
        return False
    conn.execute(sa.text(f"ALTER TABLE {table} ADD COLUMN {column} {definition}"))
    return True


def _live_done(conn: sa.Connection) -> None:
    """Version 7: a model call's deltas outlive its reply briefly (``done_at``), so a
    follower in another process that has not read them yet still can."""
    _add_column(conn, "turnkit_live", "done_at", "FLOAT")


def _last_activity(conn: sa.Connection) -> None:
    """Version 8: a session says when it was last active, for the sessions list: its
    latest event's time, else when it was created."""
    _add_column(conn, "turnkit_sessions", "last_activity_at", "FLOAT NOT NULL DEFAULT 0")
    conn.execute(
        sa.text(
            "UPDATE turnkit_sessions SET last_activity_at = COALESCE("
            "(SELECT MAX(e.timestamp) FROM turnkit_events e"
            " WHERE e.session_id = turnkit_sessions.id), created_at)"
        )
    )


def _waiting_runners(conn: sa.Connection) -> None:
    """Version 9: runners no process could start at once wait in turnkit's own table
    (``turnkit_waiting_runners``), not on a DBOS queue that every process polls."""
    metadata.create_all(conn, tables=[waiting_runners])


def _lookup_indexes(conn: sa.Connection) -> None:
    """Version 10: indexes for two lookups every turn makes (the inputs steered into
    it, the live rows old enough to delete), which scanned their whole table."""
    for index in (*inputs.indexes, *live.indexes):
        if index.name in ("ix_turnkit_inputs_steering", "ix_turnkit_live_done"):
            index.create(conn, checkfirst=True)


# version -> the step that brings a database from version - 1 to it.
MIGRATIONS: dict[int, Migration] = {
    2: _session_runners,
    3: _long_sessions,
    4: _unique_deliveries_and_subscriptions,
    5: _executor_leases,
    6: _live_output,
    7: _live_done,
    8: _last_activity,
    9: _waiting_runners,
    10: _lookup_indexes,
}


def migrate(engine: sa.Engine) -> int:
    """Create or upgrade turnkit's tables; the schema version in force after.

    One process at a time: SQLite's write lock (the engine begins with
    ``BEGIN IMMEDIATE``), or a transaction-scoped advisory lock on Postgres.
    """
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
        metadata.create_all(conn, tables=[meta])
        row = conn.execute(sa.select(meta.c.value).where(meta.c.key == "schema_version")).first()
        if row is None:
            metadata.create_all(conn)
            conn.execute(meta.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
            return SCHEMA_VERSION
        found = int(row[0])
        if found > SCHEMA_VERSION:
            raise RuntimeError(
                f"the database has turnkit schema version {found}, newer than this turnkit "
                f"({SCHEMA_VERSION}); upgrade turnkit to use it"
            )
        for version in range(found + 1, SCHEMA_VERSION + 1):
            MIGRATIONS[version](conn)
        if found != SCHEMA_VERSION:
            conn.execute(
                meta.update()
                .where(meta.c.key == "schema_version")
                .values(value=str(SCHEMA_VERSION))
            )
        return SCHEMA_VERSION
