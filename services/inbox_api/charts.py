"""The review analytics as the `/stats` page draws them, computed without I/O: a stacked bar per
day of what reviewers did, a bar per category of the share sent unedited, and the figures as
text.

Charts are geometry for inline SVG that the template draws: rectangles, lines and labels with
plain attributes and a CSS class each (the page's `<style>` carries its nonce), so the page
needs no script, no style attribute and nothing from elsewhere, and the CSP holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from shared.inbox import DecisionType

KINDS: tuple[str, ...] = get_args(DecisionType)  # accept, edit, response, ignore: bottom up
Anchor = Literal["start", "middle", "end"]


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    kind: str  # its CSS class: a decision kind, or "share" / "rest"
    title: str  # shown on hover (the SVG <title>)


@dataclass(frozen=True)
class Label:
    x: float
    y: float
    text: str
    anchor: Anchor = "start"


@dataclass(frozen=True)
class Line:
    x1: float
    y1: float
    x2: float
    y2: float


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    description: str  # what it shows, for screen readers (aria-label)
    bars: list[Bar] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)


def _scale_top(value: int) -> int:
    """A round upper end for an axis reaching `value`: the next multiple of its leading
    power of ten (7 stays 7, 24 becomes 30, 130 becomes 200)."""
    if value <= 1:
        return 1
    power = 10 ** math.floor(math.log10(value))
    return math.ceil(value / power) * power


def days_chart(by_day: list[dict[str, Any]], width: int = 720, height: int = 220) -> Chart:
    """A bar per day, its height the day's decisions, stacked accept, edit, response, ignore."""
    left, right, top, bottom = 40, 8, 10, 24
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = _scale_top(max((int(d["decisions"]) for d in by_day), default=0))
    total = sum(int(d["decisions"]) for d in by_day)
    chart = Chart(
        width,
        height,
        f"Decisions per day, {len(by_day)} days, {total} decisions, by kind",
    )
    base = top + plot_h
    for value in (0, peak // 2, peak) if peak > 1 else (0, peak):
        y = base - plot_h * value / peak
        chart.lines.append(Line(left, y, width - right, y))
        chart.labels.append(Label(left - 6, y + 4, str(value), "end"))
    slot = plot_w / max(1, len(by_day))
    bar_w = max(1.0, slot * 0.7)
    every = max(1, math.ceil(len(by_day) / 8))  # at most about eight date labels
    for n, day in enumerate(by_day):
        x = left + n * slot + (slot - bar_w) / 2
        y = float(base)
        for kind in KINDS:
            count = int(day.get(kind) or 0)
            if not count:
                continue
            h = plot_h * count / peak
            y -= h
            title = f"{day['date']}: {count} {kind} of {day['decisions']}"
            chart.bars.append(Bar(_r(x), _r(y), _r(bar_w), _r(h), kind, title))
        if n % every == 0:
            chart.labels.append(Label(_r(x + bar_w / 2), height - 6, day["date"][5:], "middle"))
    return chart


def shares_chart(by_category: dict[str, dict[str, Any]], width: int = 720) -> Chart:
    """A bar per category: the share of its sent replies that went out unedited (categories
    without a sent reply draft, such as escalations, say so instead)."""
    left, right, row = 150, 56, 28
    plot_w = width - left - right
    height = max(1, len(by_category)) * row + 8
    chart = Chart(width, height, f"Share sent unedited, {len(by_category)} categories")
    for n, (name, figures) in enumerate(sorted(by_category.items())):
        y = 4 + n * row
        chart.labels.append(Label(left - 8, y + 17, _clip(name), "end"))
        share = figures.get("unedited_share")
        if share is None:
            chart.labels.append(Label(left, y + 17, "no reply sent"))
            continue
        sent = int(figures.get("replies_sent") or 0)
        title = f"{name}: {percent(share)} of {sent} sent unedited"
        chart.bars.append(Bar(left, y + 4, plot_w, row - 8, "rest", title))
        chart.bars.append(Bar(left, y + 4, _r(plot_w * share), row - 8, "share", title))
        chart.labels.append(Label(width - right + 6, y + 17, percent(share)))
    return chart


def percent(share: float | None) -> str:
    return "—" if share is None else f"{round(share * 100)} %"


def duration(seconds: float | None) -> str:
    """A time to decision the way a person says it: "40 s", "12 min", "3 h 5 min", "2 d 4 h"."""
    if seconds is None:
        return "—"
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def _clip(text: str, most: int = 20) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def _r(value: float) -> float:
    return round(value, 1)
