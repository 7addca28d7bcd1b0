"""The ``turnkit`` command line: ``run``, ``chat``, ``models``, ``serve`` and ``worker``.

Exit codes: 0 success; 2 bad usage or invalid input (one clear line, no
traceback); 1 a model or provider failure; 130 interrupted.
"""

from turnkit.cli.main import main

__all__ = ["main"]
