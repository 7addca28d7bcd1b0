"""An App to serve over HTTP: a support agent, a signed webhook and a nightly schedule.

Run: turnkit serve examples/server_app.py
Then: curl -s localhost:8000/sessions -H 'Content-Type: application/json' -d '{"agent": "support"}'

The model is the embedded local one unless TURNKIT_MODEL names another
("openai:gpt-5", or any model string turnkit knows).
"""

from __future__ import annotations

import os

import turnkit

app = turnkit.App()


@turnkit.tool
def order_status(order: str) -> str:
    """Look up where an order is."""
    return f"Order {order} left the warehouse yesterday."


@app.agent("support", model=os.environ.get("TURNKIT_MODEL", "local"), tools=[order_status])
def support() -> str:
    request = turnkit.use_input()
    if request.source == "webhook":
        return "A system sent the event below. Summarise it in one sentence."
    if request.source == "schedule":
        return "Write a one-line status note for the support team."
    return "You help customers with their orders. Answer in one or two sentences."


app.webhook(
    "orders",
    agent="support",
    secret=os.environ.get("ORDERS_WEBHOOK_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
    session_key=lambda payload: f"order-{payload.get('order', 'unknown')}",
)
app.schedule(
    "nightly-note",
    "30 2 * * *",
    agent="support",
    timezone="Europe/Berlin",
    dispatch={"text": "Nightly status note, please."},
)
