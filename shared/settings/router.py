"""The router's settings: where its rules are."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field

from .base import DeskSettings


class RouterSettings(DeskSettings):
    service: ClassVar[str] = "router"
    rules_file: Path | None = Field(
        default=None, description="TOML routing rules; the demo rules when unset"
    )
