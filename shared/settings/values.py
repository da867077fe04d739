"""Checks and readings of setting values that several services' settings share."""

from __future__ import annotations

import re

from pydantic import SecretStr


def http_url(value: str | None, name: str) -> str | None:
    """`value` if it is an http:// or https:// URL with a host (or unset: None or empty, as a
    manifest leaves an optional URL)."""
    if value and not re.match(r"https?://[^/?#\s]", value):
        raise ValueError(f"{name} must be an http:// or https:// URL (it has no scheme or host)")
    return value


def secret_text(value: SecretStr | None) -> str | None:
    return None if value is None else value.get_secret_value()
