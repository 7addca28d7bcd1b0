"""The durable record of a running turn: its claim, steps, messages and end.

Each model reply and each tool call is a step recorded under the turn
(``model:<n>``, ``tool:<call id>``); a turn replayed after a crash reads its
steps back instead of calling the model or the tool again. Messages are
keyed by their place in the turn, so a replay never stores one twice. Every
write here goes with its event, in one transaction; status changes go
through :mod:`.turns`.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from turnkit._values import dumps
from turnkit.messages import Message, ToolResultBlock, ToolUseBlock
from turnkit.sessions.db import busy, live, turns
from turnkit.sessions.db import schema as t
from turnkit.sessions.db.conversation import Conversation, Conversations
from turnkit.sessions.db.prepared import Prepared
from turnkit.sessions.db.store import Store, Tx
from turnkit.sessions.model.events import (
    HistoryCompacted,
    MessageAdded,
    ToolFinished,
    ToolStarted,
)
from turnkit.sessions.model.inputs import AgentInput
from turnkit.sessions.model.records import Question
from turnkit.sessions.model.status import TurnState
from turnkit.sessions.render.present import input_message, steered_message

__all__ = [
    "Claim",
    "Journal",
    "PendingWrites",
    "Step",
    "compaction_key",
    "steering_key",
    "tool_step_key",
]

_KEY_LIMIT = 300  # the steps table's key column

# The statements of every turn, built once.
_STEP = Prepared(
    sa.select(t.steps.c.status, t.steps.c.result).where(
        t.steps.c.turn_id == sa.bindparam("tid"), t.steps.c.key == sa.bindparam("key")
    )
)
_EVENT_SEQ = Prepared(
    sa.select(t.sessions.c.event_seq).where(t.sessions.c.id == sa.bindparam("sid"))
)
_MESSAGE_AT = Prepared(
    sa.select(t.messages.c.position).where(
        t.messages.c.turn_id == sa.bindparam("tid"),
        t.messages.c.turn_index == sa.bindparam("index"),
    )
)
_TURN_STATUS = Prepared(sa.select(t.turns.c.status).where(t.turns.c.id == sa.bindparam("tid")))


def tool_step_key(call_id: str) -> str:
    """The step key of a tool call: ``tool:<id>``, or a digest of an id too long for
    the column (providers bound their ids; a model's own need not be)."""
    key = f"tool:{call_id}"
    if len(key) <= _KEY_LIMIT and "\x00" not in call_id:
        return key
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"tool#{digest}"


@dataclass(frozen=True, slots=True)
class Claim:
    """A turn a runner is running: what it needs to (re)start the agent loop."""

    turn_id: str
    session_id: str
    agent: str
    input: AgentInput
    history: tuple[Message, ...]  # the conversation up to and including this turn's input
    data: dict[str, Any]
    resumed: bool  # claimed before (a replay after a crash): its steps may be recorded
    runner_id: str  # the session's runner running it
    resume: dict[str, Any] | None = None  # an answer's turn: what the question left for it
    data_json: str | None = None  # ``data`` as the session's row had it (unchanged: not written)


_INSERT_NEW_STEP = {
    "sqlite": Prepared(sqlite_insert(t.steps).on_conflict_do_nothing()),
    "postgresql": postgresql_insert(t.steps).on_conflict_do_nothing(),
}
_INSERT_MESSAGE = Prepared(t.messages.insert())


class PendingWrites:
    """What a running turn has produced and not yet written: written with its next write.

    Batching keeps a turn to a few transactions: a model reply is written
    with the ``tool.started`` of its first call, or with the turn's end.
    """

    __slots__ = ("messages", "steps")

    def __init__(self) -> None:
        self.steps: list[tuple[str, Any]] = []  # (key, result)
        self.messages: list[tuple[int, Message]] = []  # (index in the turn, message)

    def take(self) -> PendingWrites:
        """The buffered writes, leaving this buffer empty."""
        taken = PendingWrites()
        taken.steps, self.steps = self.steps, []
        taken.messages, self.messages = self.messages, []
        return taken


@dataclass(frozen=True, slots=True)
class Step:
    status: str  # "started" | "done"
    result: Any


@dataclass(frozen=True, slots=True)
class Ending:
    """How a turn ends (what :meth:`Journal.finish` writes)."""

    status: TurnState
    output: str | None = None
    error: str | None = None
    reason: str | None = None
    usage: dict[str, int] | None = None
    output_data_json: str | None = None
    data_json: str | None = None  # the session data to save, if any


class Journal:
    """Writes and reads the record of turns, on a :class:`Store`."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.conversations = Conversations()  # what a turn reads of its session's messages
        # Whether a runner that ends a turn and finds nothing queued keeps its
        # session (it waits a moment for the next input: runtime/lingering.py).
        self.keep_sessions: Callable[[Tx, str, str], bool] = lambda tx, runner, session: False

    def claim(self, session_id: str, runner_id: str, keep: bool = False) -> Claim | None:
        """The turn runner ``runner_id`` is to run next (see :func:`.turns.claim_next`)."""
        with self.store.turn_write() as tx:
            return self._claim_next(tx, session_id, runner_id, keep)

    def claim_in(self, tx: Tx, session_id: str, runner_id: str) -> Claim | None:
        """:meth:`claim` inside ``tx`` (the runner keeps the session if nothing is queued)."""
        return self._claim_next(tx, session_id, runner_id, True)

    def _claim_next(
        self, tx: Tx, session_id: str, runner_id: str, keep: bool | None = None
    ) -> Claim | None:
        # Asked only when nothing is queued (a lingering runner registers then).
        decide = functools.partial(self.keep_sessions, tx, runner_id, session_id)
        claimed = turns.claim_next(tx, session_id, runner_id, decide if keep is None else keep)
        if claimed is None:
            return None
        row = claimed.row
        resume = None if row.resume is None else json.loads(row.resume)
        # A turn that decides held tool calls starts from their reply: its first
        # message is the answer to that reply's calls, which the run makes.
        if not claimed.resumed and not (resume and resume.get("approvals")):
            message = input_message(AgentInput.from_dict(json.loads(row.input)), row.id, resume)
            self._add_message(tx, session_id, row.id, 0, message)
        return self._claim(tx, claimed, runner_id, resume)

    def _claim(
        self, tx: Tx, claimed: turns.Claimed, runner_id: str, resume: dict[str, Any] | None
    ) -> Claim:
        row, resumed, session = claimed.row, claimed.resumed, claimed.session
        stored = self.conversations.read(tx, row.session_id)
        if not resumed and stored.entries and stored.entries[-1].turn_id == row.id:
            history = stored.messages  # a fresh turn: its input, just stored, is last
        else:
            # The loop replays this turn's own replies and compactions from its
            # steps: start with what came before it, and its input.
            history = tuple(
                [s.message for s in stored.entries if s.turn_id != row.id]
                + [s.message for s in stored.entries if s.turn_id == row.id and s.turn_index == 0]
            )
        return Claim(
            row.id,
            row.session_id,
            session.agent,
            AgentInput.from_dict(json.loads(row.input)),
            history,
            json.loads(session.data),
            resumed,
            runner_id,
            resume,
            session.data,
        )

    # -- steps ---------------------------------------------------------------

    def step(self, turn_id: str, key: str) -> Step | None:
        with self.store.read() as conn:
            row = _STEP.run(conn, {"tid": turn_id, "key": key}).first()
        if row is None:
            return None
        return Step(row.status, None if row.result is None else json.loads(row.result))

    def flush(self, session_id: str, turn_id: str, pending: PendingWrites) -> int:
        """Write what the turn buffered (if anything); the session's last event seq
        (where the live deltas of the model call about to stream stand)."""
        seq = {"sid": session_id}
        if not pending.steps and not pending.messages:
            with self.store.read() as conn:
                return int(_EVENT_SEQ.run(conn, seq).scalar_one())
        with self.store.turn_write() as tx:
            self._write(tx, session_id, turn_id, pending)
            return int(tx.execute(_EVENT_SEQ, seq).scalar_one())

    def _write(
        self, tx: Tx, session_id: str, turn_id: str, pending: PendingWrites, ending: bool = False
    ) -> None:
        """Store what the turn buffered (``ending``: in the transaction that ends it,
        which marks all its live deltas done itself)."""
        for key, result in pending.steps:
            if key.startswith("model:") and not ending:  # its reply is in: its deltas are done
                live.mark_done(tx, turn_id, key)
            row = {"turn_id": turn_id, "key": key, "status": "done", "result": dumps(result)}
            tx.execute(_INSERT_NEW_STEP[tx.conn.dialect.name], row)  # a replay wrote it already
        for index, message in pending.messages:
            self._add_message(tx, session_id, turn_id, index, message)

    def start_tool(
        self, session_id: str, turn_id: str, call: ToolUseBlock, pending: PendingWrites
    ) -> None:
        with self.store.turn_write() as tx:
            self._write(tx, session_id, turn_id, pending)
            tx.execute(
                t.steps.insert().values(
                    turn_id=turn_id, key=tool_step_key(call.id), status="started"
                )
            )
            tx.emit(session_id, ToolStarted(call.id, call.name), turn_id)

    def finish_tool(
        self, session_id: str, turn_id: str, call: ToolUseBlock, block: ToolResultBlock
    ) -> None:
        with self.store.turn_write() as tx:
            done = t.steps.update().where(
                t.steps.c.turn_id == turn_id,
                t.steps.c.key == tool_step_key(call.id),
                t.steps.c.status == "started",
            )
            updated = tx.execute(done.values(status="done", result=dumps(block.to_dict())))
            if updated.rowcount:
                tx.emit(session_id, ToolFinished(call.id, call.name, block.is_error), turn_id)

    # -- messages and the end ------------------------------------------------

    def _add_message(
        self,
        tx: Tx,
        session_id: str,
        turn_id: str,
        index: int,
        message: Message,
        before: int | None = None,
    ) -> None:
        exists = tx.execute(_MESSAGE_AT, {"tid": turn_id, "index": index}).first()
        if exists is not None:
            return
        wire = message.to_dict()
        row = {
            "session_id": session_id,
            "position": tx.bump(session_id, "message_seq"),
            "turn_id": turn_id,
            "turn_index": index,
            "message": dumps(wire),
            "before_position": before,
        }
        tx.execute(_INSERT_MESSAGE, row)
        tx.emit(session_id, MessageAdded(wire), turn_id)

    # -- compactions -----------------------------------------------------------

    def record_compaction(
        self,
        claim: Claim,
        number: int,
        summary: dict[str, Any],
        base: int,
        message: Message,
        pending: PendingWrites,
    ) -> None:
        """Store the turn's compaction ``number`` (its step, its message, its events)
        in one transaction, with what the turn had buffered.

        ``summary`` is what the summariser answered (the step a replay reads
        instead of summarising again). ``base`` is the index, in the turn's
        conversation (the claim's history, then what the turn added), of the
        first message the summary keeps: the compaction message stands right
        before it. Its ``turn_index`` is ``-1 - number``, apart from the
        messages the loop produces.
        """
        with self.store.turn_write() as tx:
            if not _still_running(tx, claim):
                return  # ended meanwhile (cancelled, the session ended): nothing more to store
            self._write(tx, claim.session_id, claim.turn_id, pending)
            key = compaction_key(number)
            step = t.steps.c
            if tx.execute(
                sa.select(step.key).where(step.turn_id == claim.turn_id, step.key == key)
            ).first():
                return
            values = {"turn_id": claim.turn_id, "key": key, "status": "done"}
            tx.execute(t.steps.insert().values(**values, result=dumps(summary)))
            before = _position_of(self.conversations.read(tx, claim.session_id), claim, base)
            self._add_message(
                tx, claim.session_id, claim.turn_id, -1 - number, message, before=before
            )
            metadata = message.metadata
            event = HistoryCompacted(
                metadata["replaced"], metadata["tokens_before"], metadata["tokens_after"]
            )
            tx.emit(claim.session_id, event, claim.turn_id)

    # -- steered inputs (db/busy.py) ----------------------------------------------

    def has_steered(self, claim: Claim) -> bool:
        """Whether inputs wait to join the running turn (a read before a model call)."""
        with self.store.read() as conn:
            return busy.has_steered(conn, claim.turn_id)

    def deliver_steered(
        self, claim: Claim, number: int, index: int, pending: PendingWrites
    ) -> Message | None:
        """Take what was steered into the turn, as the user message ``index`` of the
        turn, read by model call ``number``: its step, message and events in one
        transaction, with what the turn had buffered (written first, so the message
        comes after the latest tool results). None, writing nothing, when nothing
        waits or the turn has ended."""
        with self.store.turn_write() as tx:
            if not _still_running(tx, claim):
                return None
            taken = busy.take_steered(tx, claim.session_id, claim.turn_id)
            if not taken:
                return None
            self._write(tx, claim.session_id, claim.turn_id, pending)
            message = steered_message([item for _, item in taken], claim.turn_id)
            step = busy.steering_step(message, [input_id for input_id, _ in taken])
            values = {"turn_id": claim.turn_id, "key": steering_key(number), "status": "done"}
            tx.execute(t.steps.insert().values(**values, result=dumps(step)))
            self._add_message(tx, claim.session_id, claim.turn_id, index, message)
            return message

    def finish(
        self,
        claim: Claim,
        ending: Ending,
        pending: PendingWrites | None = None,
        claim_next: bool = True,
    ) -> Claim | None:
        """End the turn with what it produced (once), and claim the runner's next turn
        in the same transaction: that claim, or None when the runner is done (or
        ``claim_next`` is False: a last-resort end that writes nothing else)."""
        with self.store.turn_write() as tx:
            live.mark_done(tx, claim.turn_id)
            if _still_running(tx, claim):
                if pending is not None:
                    self._write(tx, claim.session_id, claim.turn_id, pending, ending=True)
                if ending.data_json not in (None, claim.data_json):
                    statement = t.sessions.update().where(t.sessions.c.id == claim.session_id)
                    tx.execute(statement.values(data=ending.data_json))
                turns.end_turn(
                    tx,
                    claim.session_id,
                    claim.turn_id,
                    ending.status,
                    agent=claim.agent,
                    output=ending.output,
                    error=ending.error,
                    reason=ending.reason,
                    usage=ending.usage,
                    output_data_json=ending.output_data_json,
                )
            if not claim_next:
                return None
            return self._claim_next(tx, claim.session_id, claim.runner_id)

    def finish_asking(
        self,
        claim: Claim,
        question: Question,
        resume: dict[str, Any],
        data_json: str,
        pending: PendingWrites,
    ) -> Claim | None:
        """End the turn as asking ``question`` (see :func:`.turns.end_asking`); the
        runner's next claim, as :meth:`finish`."""
        with self.store.turn_write() as tx:
            live.mark_done(tx, claim.turn_id)
            if _still_running(tx, claim):
                self._write(tx, claim.session_id, claim.turn_id, pending, ending=True)
                turns.end_asking(tx, claim.session_id, claim.turn_id, question, resume, data_json)
            return self._claim_next(tx, claim.session_id, claim.runner_id)


def steering_key(number: int) -> str:
    """The step of what was steered into a turn before its model call ``number``."""
    return f"steer:{number}"


def compaction_key(number: int) -> str:
    """The step of a turn's compaction ``number`` (from 0): what its summariser said."""
    return f"compaction:{number}"


def _position_of(stored: Conversation, claim: Claim, base: int) -> int:
    """The position of message ``base`` of the turn's conversation: of the messages
    before the turn (as the claim has them) or of those the turn stored."""
    earlier = [s for s in stored.entries if s.turn_id != claim.turn_id]
    own_start = len(earlier)  # the turn's first message (its input): its turn_index 0
    if base < own_start:
        return earlier[base].position
    index = base - own_start
    for entry in stored.entries:
        if entry.turn_id == claim.turn_id and entry.turn_index == index:
            return entry.position
    raise RuntimeError(f"message {index} of turn {claim.turn_id} is not stored")


def _still_running(tx: Tx, claim: Claim) -> bool:
    """Lock the session (every writer of its turns does so first), then look at the turn."""
    tx.lock_session(claim.session_id)
    status = tx.execute(_TURN_STATUS, {"tid": claim.turn_id})
    return status.scalar() == TurnState.RUNNING
