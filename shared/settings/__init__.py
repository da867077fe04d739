"""Settings, read once from `DESK_*` environment variables (or a `.env` file) and passed down.

Only a service's `main.py` (and the `desk` CLI) build settings; library code takes arguments.

`DeskSettings` (`base`) is what every service shares; each service's settings extend it in a
module of their own (`ingress`, `router`, `drafter`, `inbox_api`, `sender`, `reconciler`, and
`stack` for `desk up`), those that read the helpdesk through `HelpdeskSettings` (`helpdesk`).
`errors` says what is wrong with a configuration; `values` holds checks the settings share.
"""

from .base import ARCHIVE_MIN_DAYS, DeskSettings
from .drafter import DrafterSettings, RetrieverName
from .errors import ConfigError, read_toml, setting_error, variable
from .helpdesk import HelpdeskSettings
from .inbox_api import InboxApiSettings, ReviewerConfig
from .ingress import ImapSettings, IngressSettings
from .reconciler import ReconcilerSettings
from .router import RouterSettings
from .sender import SenderSettings
from .stack import StackSettings

__all__ = [
    "ARCHIVE_MIN_DAYS",
    "ConfigError",
    "DeskSettings",
    "DrafterSettings",
    "HelpdeskSettings",
    "ImapSettings",
    "InboxApiSettings",
    "IngressSettings",
    "ReconcilerSettings",
    "RetrieverName",
    "ReviewerConfig",
    "RouterSettings",
    "SenderSettings",
    "StackSettings",
    "read_toml",
    "setting_error",
    "variable",
]
