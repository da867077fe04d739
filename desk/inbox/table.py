"""`desk inbox list`'s table: one row an item, the summary cut to the terminal's width."""

from __future__ import annotations

import datetime as dt
from typing import Any

from shared import clock

from .text import age, one_line

WIDTH = 100


def render_table(
    items: list[dict[str, Any]], now: dt.datetime | None = None, width: int = WIDTH
) -> str:
    """ID, AGE, STATUS, PRIORITY, CATEGORY, QUEUE (when some item has one), TICKET, SUMMARY;
    the summary of an item
    past or near its target starts with `[past target]` / `[due HH:MM]`, of an overdue one with
    `[overdue since DAY]`; the summary is cut to fit `width` columns."""
    queued = any(item.get("queue") for item in items)  # the QUEUE column only where it says
    header: tuple[str, ...] = (
        "ID",
        "AGE",
        "STATUS",
        "PRIORITY",
        "CATEGORY",
        "QUEUE",
        "TICKET",
        "SUMMARY",
    )
    rows: list[tuple[str, ...]] = [header]
    for item in items:
        overdue = item.get("overdue_since")
        summary = one_line(item.get("summary"))
        level = item.get("service_level") or {}
        if level.get("standing") == "past":
            summary = f"[past target] {summary}"
        elif level.get("standing") == "near":
            summary = f"[due {_clock(level['due_at'])}] {summary}"
        rows.append(
            (
                one_line(item.get("id")),
                age(item.get("created_at"), now),
                one_line(item.get("status"))
                + (f" ({one_line(item['claimed_by'])})" if item.get("claimed_by") else ""),
                one_line(item.get("priority")),
                one_line(item.get("category")),
                one_line(item.get("queue")),
                one_line(item.get("ticket_id")),
                f"[overdue since {one_line(overdue)}] {summary}" if overdue else summary,
            )
        )
    if not queued:
        rows = [row[:5] + row[6:] for row in rows]
        header = rows[0]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    room = max(20, width - sum(widths) - 2 * (len(header) - 1))
    return "\n".join(
        "  ".join(
            [*(c.ljust(w) for c, w in zip(row, widths, strict=False)), _cut(row[-1], room)]
        ).rstrip()
        for row in rows
    )


def _clock(stamp: str) -> str:
    """An ISO timestamp as `14:05 UTC`."""
    try:
        when = clock.parse(stamp)
    except ValueError:
        return one_line(stamp)
    return f"{when.astimezone(dt.UTC):%H:%M} UTC"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
