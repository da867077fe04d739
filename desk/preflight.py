"""`desk up`'s look at every service's settings before it starts anything.

Each supervised service's settings class (`shared.catalog`) is built from the very environment
that service will be started with (`Supervisor.child_env`): a mistake in it is one line naming
the variable and what is wrong, and `desk up` exits 2, instead of a service that restarts with
back-off while the reason is only in its log. A DESK_ variable no service reads (a misspelt
one: DESK_INBOX_PORT) is named too, with the setting it may have meant; the stack still starts.
"""

from __future__ import annotations

import contextlib
import difflib
import os
from collections.abc import Iterator, Mapping

from pydantic import AliasChoices, ValidationError
from pydantic_settings import SettingsError

from shared.catalog import SERVICE_SETTINGS
from shared.settings import (
    ConfigError,
    DeskSettings,
    ImapSettings,
    StackSettings,
    setting_error,
    variable,
)

from .supervisor import Supervisor


def check_settings(supervisor: Supervisor) -> dict[str, DeskSettings]:
    """The settings of every service `supervisor` has placed, each loaded as its process will
    load them; `ConfigError` for the first that does not load."""
    loaded: dict[str, DeskSettings] = {}
    for name, child in supervisor.children.items():
        with _environment(supervisor.child_env(child)):
            try:
                loaded[name] = SERVICE_SETTINGS[name]()
            except (ValidationError, SettingsError) as exc:
                raise ConfigError(f"{setting_error(exc)} (the {name} service)") from None
    return loaded


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    """This process's environment is `env` for the block (settings read `os.environ`); called
    before `desk up` starts any thread or child."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


# DESK_ variables read outside the settings: `desk inbox`'s token, `make check`'s audit
ELSEWHERE = frozenset({"DESK_TOKEN", "DESK_AUDIT_REQUIRED"})


def unknown_variables(env: Mapping[str, str]) -> list[str]:
    """What to say of each DESK_ variable in `env` that no setting is read from."""
    known = set(ELSEWHERE)
    classes: list[type[DeskSettings]] = [StackSettings, ImapSettings, *SERVICE_SETTINGS.values()]
    for cls in classes:
        for field, info in cls.model_fields.items():
            alias = info.validation_alias
            choices = alias.choices if isinstance(alias, AliasChoices) else [variable(field)]
            known.update(str(c).upper() for c in choices)
    bare = {k.removeprefix("DESK_"): k for k in known}  # the prefix says nothing alike
    found = []
    for name in sorted(n for n in env if n.upper().startswith("DESK_")):
        if name.upper() in known:
            continue
        close = difflib.get_close_matches(name.upper().removeprefix("DESK_"), bare, n=1)
        meant = f"; did you mean {bare[close[0]]}?" if close else ""
        found.append(f"{name} is no setting of any service (ignored){meant}")
    return found
