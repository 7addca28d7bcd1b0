"""A process that delivers Slack replies until it is killed (by a test, mid-post).

Run as ``python delivery_child.py DB_URL API_URL TOKEN EXECUTOR_ID``: it starts
an App under ``EXECUTOR_ID``, delivers one mention in thread ``1.000100``,
prints the session id and waits to be killed.
"""

from __future__ import annotations

import asyncio
import sys

from channels._support import BOT, SLACK_SECRET, mention, slack_event, slack_request
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

THREAD = "1.000100"
REPLY = "the reply in flight"


def build(db_url: str, api_url: str, token: str, executor_id: str, replies: list[str]) -> App:
    app = App(db_url, executor_id=executor_id, fire_schedules=False)

    @app.agent("helper", model=ScriptedModel(replies))
    def helper() -> str:
        return "Help."

    app.slack("helper", SLACK_SECRET, token, api_url=api_url)
    return app


async def main(db_url: str, api_url: str, token: str, executor_id: str) -> None:
    async with build(db_url, api_url, token, executor_id, [REPLY]) as app:
        headers, body = slack_request(slack_event(mention(f"<@{BOT}> hi", THREAD)))
        answer = await app.handle_channel("slack", headers, body)
        print(answer.body["session_id"], flush=True)
        await asyncio.Event().wait()  # until killed


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
