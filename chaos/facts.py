"""What the chaos harness's threads share: the run's facts, and the one log line format."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# inbox item statuses (services/inbox_api/store.STATUSES): a reviewer's or the system's turn, or
# final
OPEN = ("waiting", "redrafting", "sending")
TERMINAL = ("sent", "failed", "withdrawn", "ignored", "superseded")


def log(text: str) -> None:
    stamp = time.strftime("%H:%M:%S")
    print(f"[chaos {stamp}] {text}", file=sys.stderr, flush=True)


@dataclass
class Run:
    seed: int
    events: int
    deadline: float
    var: Path
    cluster: bool = False
    database_url: str | None = None  # PostgreSQL (the --postgres variant); None: SQLite files
    admin_url: str = ""
    ingress: str = ""
    inbox: str = ""
    secret: str = ""
    token: str = ""
    helpdesk_url: str = ""
    stop: threading.Event = field(default_factory=threading.Event)
    sending_done: threading.Event = field(default_factory=threading.Event)
    faults_done: threading.Event = field(default_factory=threading.Event)
    conversations_done: threading.Event = field(default_factory=threading.Event)
    scans_done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # workload facts
    valid_tickets: set[str] = field(default_factory=set)  # every existing ticket we made
    webhook_tickets: set[str] = field(default_factory=set)
    silent_tickets: set[str] = field(default_factory=set)
    missing_tickets: set[str] = field(default_factory=set)
    pair_tickets: set[str] = field(default_factory=set)
    lawyer_tickets: set[str] = field(default_factory=set)
    stale_tickets: set[str] = field(default_factory=set)  # made old for the stale scans
    sends: int = 0  # webhook sends answered 202 (planned ones)
    conversation_sends: int = 0  # of which message / close webhooks and stale tickets' events
    http_attempts: int = 0
    planned_dups: int = 0
    dup_answers: int = 0  # planned duplicates answered duplicate:true
    dup_wrong: list[str] = field(default_factory=list)  # planned duplicates answered false
    first_dup: int = 0  # first sends answered duplicate:true (a retried send)
    send_errors: Counter[str] = field(default_factory=Counter)
    # reviewer facts
    decisions: Counter[str] = field(default_factory=Counter)
    decision_conflicts: int = 0
    decision_errors: Counter[str] = field(default_factory=Counter)
    responded: set[str] = field(default_factory=set)
    held: set[str] = field(default_factory=set)  # tickets whose items the reviewer leaves alone
    # conversations and stale scans (chaos/conversations.py, chaos/stale.py)
    tasks: list[Any] = field(default_factory=list)
    scans: list[Any] = field(default_factory=list)
    scans_wanted: int = 0  # the injector asks for stale scan N by setting this to N
    scans_run: int = 0  # ...and waits until this is N
    conversation_problems: list[str] = field(default_factory=list)
    # faults
    faults: list[str] = field(default_factory=list)
    fault_problems: list[str] = field(default_factory=list)
    peak_redelivered: int = 0

    def hold(self, ticket: str) -> None:
        with self.lock:
            self.held.add(ticket)

    def release(self, ticket: str) -> None:
        with self.lock:
            self.held.discard(ticket)

    def is_held(self, ticket: str | None) -> bool:
        with self.lock:
            return ticket in self.held
