"""What the run left behind, read back: the stored result events, the items by ticket, the
approvals; and how a line names a few examples."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from shared import ids
from shared.helpdesk.demo import TICKETS as DEMO_TICKETS

from ..facts import Run

Line = tuple[bool, str, str]
DEMO = {t.id for t in DEMO_TICKETS}


@dataclass(frozen=True)
class Result:
    id: str
    type: str
    data: dict[str, Any]

    @property
    def round(self) -> tuple[str, str]:
        return str(self.data.get("ticket_id") or ""), str(self.data.get("round") or "")


def results_of(stored: Iterable[Any]) -> list[Result]:
    """The stored result events (CloudEvents JSON), every copy (a republish may store one twice)."""
    found = []
    for m in stored:
        try:
            event = json.loads(m.data)
            found.append(
                Result(str(event["id"]), str(event["type"]), dict(event.get("data") or {}))
            )
        except (ValueError, KeyError, TypeError):
            found.append(Result("<unreadable>", m.subject.removeprefix("results."), {}))
    return found


def unique(results: list[Result], kind: str) -> list[Result]:
    seen: dict[str, Result] = {}
    for r in results:
        if r.type == kind:
            seen.setdefault(r.id, r)
    return list(seen.values())


def by_ticket(items: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        found[str(item["ticket_id"])].append(item)
    for versions in found.values():
        versions.sort(key=lambda i: i["version"])
    return found


def outbox_key(item: dict[str, Any]) -> str:
    action = str((item.get("action_request") or {}).get("action") or "")
    return ids.outbox(str(item["ticket_id"] or item["thread"]), item.get("round") or "r1", action)


def approvals(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """(the approved items the sender acts on, the ids of approvals a redraft overtook).

    An accept that lands just before a new version of the same round (the drafter answering a
    withdrawn reply's message too) is refused by drafter and sender: the inbox shows it
    superseded, and the reviewer decides the new version."""
    decided = [i for i in items if i.get("decision") in ("accept", "edit")]
    overtaken = [str(i["id"]) for i in decided if i["status"] == "superseded"]
    return [i for i in decided if i["status"] != "superseded"], overtaken


def trigger(item: dict[str, Any]) -> str:
    return str((item.get("trigger") or {}).get("type") or "")


def some(values: Iterable[str], n: int = 6) -> str:
    listed = sorted(values)
    return (" " + ", ".join(listed[:n]) + (" …" if len(listed) > n else "")) if listed else ""


def reminded_demo(run: Run) -> set[str]:
    return {t for scan in run.scans for t in scan.reminded if t in DEMO}
