"""External agents behind the :class:`~turnkit.Agent` API (SPEC section 6).

Set a backend as ``AgentConfig.backend`` and the agent's runs go to an
external agent instead of a model:

- :class:`ProcessBackend`: a command, one fresh process per turn, the
  prompt on stdin (or as the last argument), stdout as the reply.
- :class:`AcpBackend`: an Agent Client Protocol agent over stdio, streaming
  message, thought and tool-call updates; ``prompt()`` keeps one session.

Both take text only. Structured input (a list of messages to ``run`` or
``stream``, a list of blocks to ``prompt``, even one text block) raises
:class:`~turnkit.InvalidMessageError` before any process starts; the
agent's history is never sent; ``before_run`` may rewrite the prompt but not
the messages ("cannot be forwarded without loss"); ``after_run`` applies as
usual. Model settings (``tools``, ``system``, ``temperature``, ...) cannot
be combined with a backend (ValueError when the Agent is built); ``model``
is ignored.
"""

from turnkit.backends._base import Backend, Conversation
from turnkit.backends.acp import AcpBackend
from turnkit.backends.permissions import (
    PermissionDecision,
    PermissionOption,
    PermissionPolicy,
    PermissionRequest,
)
from turnkit.backends.process import ProcessBackend

__all__ = [
    "AcpBackend",
    "Backend",
    "Conversation",
    "PermissionDecision",
    "PermissionOption",
    "PermissionPolicy",
    "PermissionRequest",
    "ProcessBackend",
]
