"""A refund tool behind a person's approval, in a durable session.

Run: python examples/session_approvals.py [DATABASE_URL]

The model (scripted, so this runs offline) calls ``refund`` twice and
``lookup`` once. The lookup runs; the refunds wait: the turn ends with a
question that lists them, and the session is ``awaiting_input``. Nothing
runs until someone decides, here with ``app.approve`` (over HTTP it is
``POST /sessions/{id}/approvals``; in Slack or Linear, a reply "approve" or
"deny"). The decision is recorded before the call runs, so a crash at any
point neither loses it nor runs the refund twice.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile

import turnkit
from turnkit import Approval
from turnkit.testing import ScriptedModel

refunded: list[tuple[str, float]] = []


@turnkit.tool(needs_approval=True)
def refund(order_id: str, amount: float) -> str:
    """Refund part of an order."""
    refunded.append((order_id, amount))
    return f"Refunded {amount:g} on order {order_id}."


@turnkit.tool(idempotent=True)
def lookup(order_id: str) -> str:
    """The status of an order."""
    return f"order {order_id}: delivered"


REPLY = {
    "role": "assistant",
    "content": [
        {"type": "text", "text": "Checking, then refunding."},
        {"type": "tool_use", "id": "l1", "name": "lookup", "input": {"order_id": "42"}},
        {
            "type": "tool_use",
            "id": "r1",
            "name": "refund",
            "input": {"order_id": "42", "amount": 250},
        },
        {
            "type": "tool_use",
            "id": "r2",
            "name": "refund",
            "input": {"order_id": "43", "amount": 900},
        },
    ],
}


async def main(database_url: str) -> None:
    app = turnkit.App(database_url)
    model = ScriptedModel([REPLY, "Order 42 is refunded (200); 43 was refused."])

    @app.agent("support", model=model, tools=[refund, lookup])
    def support() -> str:
        return "Help customers with refunds."

    async with app:
        session = await app.create_session("support")
        receipt = await app.send(session.id, text="Refund orders 42 and 43")
        turn = await app.wait(receipt.turn_id, timeout=30)
        session = await app.get_session(session.id)
        print("turn:", turn.status, "| session:", session.status)
        print("question:", turn.question.text)
        for request in turn.question.approvals:
            print(f"waiting: {request.call_id} {request.tool}({dict(request.input)})")
        print("refunded so far:", refunded)

        receipt = await app.approve(
            session.id,
            {
                "r1": Approval(True, input={"order_id": "42", "amount": 200}),  # approved, edited
                "r2": Approval(False, reason="over the refund limit"),
            },
        )
        turn = await app.wait(receipt.turn_id, timeout=30)
        print("answer value:", turn.input.answer.value)
        print("refunded:", refunded)
        for event in await app.events(session.id):
            if event.type == "approval.decided":
                data = event.data
                print(f"decided: {data['call_id']} approved={data['approved']} ({data['reason']})")
        results = (await app.history(session.id))[2]
        print("the model was sent:")
        print(turnkit.message_text_body(results))
        print("answer:", turn.output)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        asyncio.run(main(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as folder:
            asyncio.run(main(f"sqlite:///{folder}/approvals.db"))
