"""Hold tool calls for a person's approval, then approve, edit or deny them.

A refund over 100 needs approval: the run runs the reply's other calls,
stops with ``stop_reason="approval_required"`` and lists the held calls;
``continue_run(approvals=...)`` decides them and the loop goes on. The model
is scripted, so this runs offline.

Run: python examples/approvals.py
"""

from __future__ import annotations

import turnkit
from turnkit import Approval, Message, ToolUseBlock, message_text_body
from turnkit.testing import ScriptedModel

refunded: list[tuple[str, float]] = []


@turnkit.tool(needs_approval=lambda input: input["amount"] > 100)
def refund(order_id: str, amount: float) -> str:
    """Refund part of an order."""
    refunded.append((order_id, amount))
    return f"Refunded {amount:g} on order {order_id}."


reply = Message.assistant(
    "Refunding the three orders.",
    ToolUseBlock("r1", "refund", {"order_id": "7", "amount": 20}),
    ToolUseBlock("r2", "refund", {"order_id": "42", "amount": 250}),
    ToolUseBlock("r3", "refund", {"order_id": "43", "amount": 900}),
)
model = ScriptedModel([reply, "Order 7 and 42 are refunded; 43 was refused."])
agent = turnkit.Agent(turnkit.AgentConfig("clerk", model=model, tools=[refund]))

result = agent.prompt_sync("Refund orders 7, 42 and 43")
print("stop_reason:", result.stop_reason, "| success:", result.success)
for request in result.approvals:
    print(f"waiting: {request.call_id} {request.tool}({dict(request.input)})")
print("refunded so far:", refunded)

result = agent.continue_run_sync(
    approvals={
        "r2": Approval(True, input={"order_id": "42", "amount": 200}),  # approved, edited
        "r3": Approval(False, reason="over the refund limit"),
    }
)
print("refunded:", refunded)
print("the model was sent:")
print(message_text_body(model.requests[-1].messages[-1]))
print("answer:", result.output)
