"""Fixtures of the backend tests."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator

import pytest

from backends.support import Reports


@pytest.fixture
async def reports() -> AsyncIterator[Reports]:
    # A short directory: Unix socket paths are limited to about 100 bytes.
    directory = tempfile.mkdtemp(prefix="tk-")
    reports = Reports(os.path.join(directory, "r.sock"))
    await reports.start()
    try:
        yield reports
    finally:
        await reports.close()
        shutil.rmtree(directory, ignore_errors=True)
