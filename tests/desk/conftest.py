"""What the `desk` command tests share."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest


@pytest.fixture
def no_desk_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """None of the machine's DESK_ (and LLM_) settings; the logging a `desk` command run in
    this process configures (`desk.cli.main`) is put back afterwards."""
    for name in [n for n in os.environ if n.startswith(("DESK_", "LLM_"))]:
        monkeypatch.delenv(name)
    loggers = [logging.getLogger(n) for n in ("", "nats", "uvicorn.access", "httpx", "httpcore")]
    saved = [(logger, logger.level, logger.handlers[:]) for logger in loggers]
    yield
    for logger, level, handlers in saved:
        logger.setLevel(level)
        logger.handlers[:] = handlers
