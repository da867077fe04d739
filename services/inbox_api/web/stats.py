"""The review analytics page (`/stats`, `?days=N`): what reviewers did with the drafts, overall
and per category, in a table and two charts the server draws as inline SVG. Viewers may read
it; it decides nothing."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .. import store
from ..charts import KINDS, days_chart, duration, percent, shares_chart
from ..core import inbox_of
from .cookies import session_of
from .responses import error_page, page, to_login

WINDOWS = (7, 30, 90, 365)  # the windows the page offers (any 1..365 works in the link)


def row(name: str, figures: dict[str, Any]) -> dict[str, Any]:
    """One line of the table: the counts, and the figures as text."""
    waited = figures["time_to_decision_seconds"]
    return {
        "name": name,
        "decisions": figures["decisions"],
        "kinds": [
            (kind, figures[kind], percent(figures["rates"][kind]) if figures["decisions"] else "")
            for kind in KINDS
        ],
        "unedited": percent(figures["unedited_share"]),
        "edit_ratio": _number(figures["edit_ratio"], ".2f"),
        "changed_chars": _number(figures["changed_chars"], ".1f"),
        "median": duration(waited["median"]),
        "p90": duration(waited["p90"]),
    }


def _number(value: float | None, form: str) -> str:
    return "—" if value is None else format(value, form)


async def stats_page(request: Request) -> Response:
    session = await session_of(request)
    if session is None:
        return to_login(request)
    try:
        days = store.review_days(request.query_params.get("days"))
    except store.Invalid as exc:
        return error_page(request, 422, "Unknown window", f"{exc}.", back="/stats")
    review = await asyncio.to_thread(store.review, inbox_of(request).engine, days)
    context = {
        "review": review,
        "days": days,
        "windows": sorted({*WINDOWS, days}),
        "kinds": KINDS,
        "overall": row("all categories", review["overall"]),
        "categories": [row(name, f) for name, f in review["by_category"].items()],
        "days_chart": days_chart(review["by_day"]),
        "shares_chart": shares_chart(review["by_category"]),
        "active_days": [row(d["date"], d) for d in reversed(review["by_day"]) if d["decisions"]],
    }
    return page(request, "stats.html", context)
