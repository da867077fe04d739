"""Configuration a service cannot start with, said so that the operator knows what to fix:
the variable or the file, never the value (it may be secret)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_settings import SettingsError


class ConfigError(ValueError):
    """Configuration a service cannot start with; the message says what and where."""


def read_toml(path: Path, what: str) -> dict[str, Any]:
    """A TOML configuration file, or a `ConfigError` that names it."""
    try:
        return tomllib.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{what} {path}: {exc}") from None


_PARSED_FIELD = re.compile(r'field "([^"]+)"')


def variable(field: str) -> str:
    """The environment variable a setting is read from (`llm_base_url`: DESK_LLM_BASE_URL)."""
    return field if field.isupper() else f"DESK_{field.upper()}"


def setting_error(exc: ValidationError | SettingsError) -> str:
    """`DESK_<NAME>: <what is wrong>` for the first error in the settings, on one line: the
    variable to fix, never its value (it may be secret)."""
    if isinstance(exc, SettingsError):  # a complex setting (a list, a dict) that is not JSON
        found = _PARSED_FIELD.search(str(exc))
        name = variable(found.group(1)) if found else "a DESK_ variable"
        why = f" ({exc.__cause__})" if isinstance(exc.__cause__, ValueError) else ""
        return f"{name}: not valid JSON{why}"
    first = exc.errors()[0]
    what = first["msg"].removeprefix("Value error, ")
    if not first["loc"]:  # a check of several settings: its message names them
        return what
    head, *rest = (str(p) for p in first["loc"])
    name = variable(head) + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in rest)
    return what if what.startswith(variable(head)) else f"{name}: {what}"
