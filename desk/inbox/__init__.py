"""`desk inbox`: the review inbox from a terminal, over the inbox API (HTTP, bearer token).

desk inbox list [--status S | --all] [--priority P] [--category C] [--source S] [--text T]
                [--queue Q] [--mine] [--sort oldest|newest|priority] [--limit N] [--cursor C]
                                    a table of items (default: waiting; overdue and those
                                    near or past their target first, then oldest first)
desk inbox show ID                  the item: the customer, the ticket, status and priority,
                                    the conversation (what the draft answers marked), the
                                    draft, earlier versions with their feedback, decisions
desk inbox accept ID                send the draft as it is
desk inbox edit ID TEXT             send TEXT instead of the drafted reply ("-": read stdin)
desk inbox respond ID TEXT          ask for a new draft with TEXT as feedback ("-": stdin)
desk inbox ignore ID                close the item, send nothing

Every sub-command takes `--url` (default: env `DESK_INBOX_URL`, else the running stack's
inbox_api from `var/stack.json`) and `--token` (default: env `DESK_TOKEN`, else the running
stack's development reviewer token). A decision first reads the item to learn the version it
decides on, so it never decides on a draft newer than the one the reviewer could have seen.

Exit status: 0 done; 1 the API refused (its status and error text on stderr) or could not be
reached; 2 no URL or token could be found.

The parts: `arguments` (the sub-commands and their options), `endpoint` (which URL and token),
`client` (the API calls), `command` (each sub-command run), `table` and `item` (what is
printed), `text` (terminal-safe text), `errors`.
"""

from .arguments import add_arguments
from .client import Client
from .command import main
from .endpoint import connection, defaults
from .errors import InboxError
from .item import render_item
from .table import render_table
from .text import age

__all__ = [
    "Client",
    "InboxError",
    "add_arguments",
    "age",
    "connection",
    "defaults",
    "main",
    "render_item",
    "render_table",
]
