"""An agent people talk to in Slack and in Linear's agent sessions.

Serve it: turnkit serve examples/channels_app.py:app --port 8000
(then give Slack https://YOUR-HOST/channels/slack/events and Linear
https://YOUR-HOST/channels/linear/webhook; see the README's Channels section).

Environment (a channel is on when its two secrets are set):

    SLACK_SIGNING_SECRET, SLACK_BOT_TOKEN      Slack app credentials
    SLACK_API_URL                              optional: Web API base (tests: a fake)
    LINEAR_WEBHOOK_SECRET, LINEAR_ACCESS_TOKEN Linear app credentials (OAuth token)
    LINEAR_API_URL                             optional: GraphQL endpoint (tests: a fake)
    CHANNELS_MODEL                             the model, default "local"
    TURNKIT_DATABASE_URL                       where sessions live (default ./.turnkit)
"""

from __future__ import annotations

import os

import turnkit
from turnkit.channels import LinearInputPayload


@turnkit.tool
def runbook(topic: str) -> str:
    """The team's runbook entry for a topic.

    Args:
        topic: What the runbook entry is about, e.g. "deploys" or "refunds".
    """
    entries = {"deploys": "Deploys go out Tuesdays; roll back with `make rollback`."}
    return entries.get(topic.lower().strip(), f"no runbook entry for {topic!r}")


def build() -> turnkit.App:
    app = turnkit.App()

    @app.agent("helper", model=os.environ.get("CHANNELS_MODEL", "local"), tools=[runbook])
    def helper() -> str:
        request = turnkit.use_input()
        turnkit.use_tool("ask")  # a question goes back as a thread message / an elicitation
        where = request.channel.provider if request.channel else request.source
        text = f"You help the team in {where}. Answer briefly; use the runbook when it helps."
        if where == "linear":
            issue = LinearInputPayload.from_payload(request.payload).issue or {}
            text += f" You are working on {issue.get('identifier')}: {issue.get('title')}."
        return text

    slack = (os.environ.get("SLACK_SIGNING_SECRET"), os.environ.get("SLACK_BOT_TOKEN"))
    if all(slack):
        app.slack("helper", *slack, api_url=os.environ.get("SLACK_API_URL"))  # type: ignore[arg-type]
    linear = (os.environ.get("LINEAR_WEBHOOK_SECRET"), os.environ.get("LINEAR_ACCESS_TOKEN"))
    if all(linear):
        app.linear("helper", *linear, api_url=os.environ.get("LINEAR_API_URL"))  # type: ignore[arg-type]
    return app


app = build()

if __name__ == "__main__":
    print(f"channels: {', '.join(app.channels) or 'none'}")
    print("serve with: turnkit serve examples/channels_app.py:app")
