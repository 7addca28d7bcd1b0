"""Public errors of turnkit.

Every error that a caller can act on lives here, so ``except turnkit.X`` works
without knowing which room of the package raised it.
"""

from __future__ import annotations

__all__ = ["InvalidMessageError", "TurnkitError"]


class TurnkitError(Exception):
    """Base class of turnkit's own errors."""


class InvalidMessageError(TurnkitError, ValueError):
    """A message, block or list of them is not valid turnkit input.

    ``path`` names where the first problem is, in the caller's terms
    (``messages[1].content[0].source.data``); ``str(err)`` starts with it.
    Raised at the API boundary, before anything else happens.

    >>> err = InvalidMessageError("messages[0].role", "unknown role 'bot'")
    >>> str(err)
    "messages[0].role: unknown role 'bot'"
    """

    code = "INVALID_MESSAGE"

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}" if path else problem)

    def within(self, prefix: str) -> InvalidMessageError:
        """The same problem, with ``prefix`` put in front of its path."""
        if not prefix:
            return self
        if not self.path:
            path = prefix
        elif self.path.startswith("["):
            path = prefix + self.path
        else:
            path = f"{prefix}.{self.path}"
        return InvalidMessageError(path, self.problem)

    def __reduce__(self) -> tuple[type[InvalidMessageError], tuple[str, str]]:
        return (type(self), (self.path, self.problem))
