"""The `/stats` page's charts and texts, computed without I/O."""

from __future__ import annotations

from typing import Any

import pytest

from services.inbox_api.charts import days_chart, duration, percent, shares_chart


def day(date: str, **counts: int) -> dict[str, Any]:
    kinds = {k: counts.get(k, 0) for k in ("accept", "edit", "response", "ignore")}
    return {"date": date, "decisions": sum(kinds.values()), **kinds}


def test_a_day_s_bar_stacks_its_kinds_and_the_busiest_day_fills_the_plot() -> None:
    chart = days_chart(
        [
            day("2026-12-01", accept=6, edit=3, ignore=1),
            day("2026-12-02"),
            day("2026-12-03", edit=5),
        ],
        width=340,
        height=220,
    )
    plot_height = 220 - 10 - 24  # the chart's top and bottom margins
    first = [b for b in chart.bars if b.title.startswith("2026-12-01")]
    assert [b.kind for b in first] == ["accept", "edit", "ignore"]  # bottom to top, none empty
    assert sum(b.height for b in first) == pytest.approx(plot_height, abs=0.2)
    assert first[0].height == pytest.approx(2 * first[1].height, abs=0.2)
    assert first[0].y == pytest.approx(first[1].y + first[1].height, abs=0.1)  # stacked, no gap
    assert not [b for b in chart.bars if b.title.startswith("2026-12-02")]
    assert [b.kind for b in chart.bars if b.title.startswith("2026-12-03")] == ["edit"]
    assert all(0 <= b.x and b.x + b.width <= 340 and b.y >= 0 for b in chart.bars)
    assert {label.text for label in chart.labels} >= {"0", "5", "10", "12-01", "12-03"}


def test_an_empty_window_draws_axes_and_no_bars() -> None:
    chart = days_chart([day("2026-12-01"), day("2026-12-02")])
    assert chart.bars == [] and chart.lines
    assert "0 decisions" in chart.description


def test_a_category_s_bar_is_its_unedited_share_and_escalations_say_no_reply_was_sent() -> None:
    chart = shares_chart(
        {
            # 4 accepts and an edit, one accept withdrawn before it went out: 3 of the 4 sent
            "refund": {"unedited_share": 0.75, "accept": 4, "edit": 1, "replies_sent": 4},
            "escalation": {"unedited_share": None, "accept": 0, "edit": 0, "replies_sent": 0},
        },
        width=720,
    )
    [whole] = [b for b in chart.bars if b.kind == "rest"]
    [share] = [b for b in chart.bars if b.kind == "share"]
    assert share.width == pytest.approx(0.75 * whole.width, abs=0.1)
    assert share.title == "refund: 75 % of 4 sent unedited"
    texts = [label.text for label in chart.labels]
    assert texts == ["escalation", "no reply sent", "refund", "75 %"]


def test_figures_read_as_people_say_them() -> None:
    assert (percent(None), percent(0.6667), percent(0.0)) == ("—", "67 %", "0 %")
    assert duration(None) == "—"
    assert [duration(s) for s in (42, 720, 3 * 3600 + 300, 2 * 86400 + 4 * 3600)] == [
        "42 s",
        "12 min",
        "3 h 5 min",
        "2 d 4 h",
    ]
