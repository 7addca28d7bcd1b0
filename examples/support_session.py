"""A durable support session: a render function, a tool, live events, history.

Run: python examples/support_session.py [DATABASE_URL]

The session lives in SQLite (a temporary file here; by default
./.turnkit/turnkit.db), so a crash or a restart loses nothing: the next
start resumes unfinished turns. The model is the embedded local one.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile

import turnkit

ORDERS = {"42": "shipped on Monday, arriving Thursday"}


@turnkit.tool(idempotent=True)  # a lookup may safely run again after a crash
def order_status(order_id: str) -> str:
    """The delivery status of an order.

    Args:
        order_id: The order number, digits only.
    """
    digits = "".join(c for c in order_id if c.isdigit())
    return ORDERS.get(digits, f"no order {order_id!r}")


def build(database_url: str) -> turnkit.App:
    app = turnkit.App(database_url)

    @app.agent("support", model="local", tools=[order_status], max_turns=4)
    def support() -> str:
        request = turnkit.use_input()
        data = turnkit.use_session_data()
        data["turns"] = data.get("turns", 0) + 1
        return (
            "You are a customer support agent. Use order_status to look orders up. "
            f"The customer wrote from the {request.source} channel; this is turn {data['turns']}."
        )

    return app


async def main(database_url: str) -> None:
    app = build(database_url)
    async with app:
        session = await app.create_session("support", key="ticket-42")
        receipt = await app.send(session.id, text="What is the status of order 42?")
        async for event in app.follow(session.id):
            print(f"{event.seq:>2} {event.type}")
            if (
                event.turn_id == receipt.turn_id
                and event.type.startswith("turn.")
                and (event.type != "turn.started")
            ):
                break
        turn = await app.wait(receipt.turn_id, timeout=120)
        print("status:", turn.status)
        print("answer:", turn.output or turn.error)
        print("messages in the session:", len(await app.history(session.id)))
        print("session data:", (await app.get_session(session.id)).data)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        asyncio.run(main(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as folder:
            asyncio.run(main(f"sqlite:///{folder}/support.db"))
