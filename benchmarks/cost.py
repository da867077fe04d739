"""The cost curve: throughput and p99 at growing N must stay flat per event (linear total cost).

Ingress (relaxed durability, the same generator and 64 connections) and the pipeline (events to
items visible in the inbox API) at each size; a size already measured by the main benchmarks is
taken from their results instead of being run again. Per-event cost is reported relative to
the smallest size: 1.00 is linear, above 1.25 is called out as worse than linear.

    python -m benchmarks.cost [--ingress 1000,5000,20000] [--pipeline 1000,5000,20000]
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path
from typing import Any

from . import ingress, pipeline
from .processes import ROOT

DEFAULT_JSON = ROOT / "var" / "bench" / "cost.json"
LINEAR_SLACK = 1.25  # per-event cost at the largest size over the smallest, allowed


def ingress_point(n: int) -> dict[str, Any]:
    report = ingress.run(requests=n, modes=("relaxed",), json_path=None, echo=False)
    figures = report["modes"]["relaxed"]["ingress"]
    return {"n": n, "per_s": round(figures["rps"]), "p99_ms": round(figures["p99_ms"], 1)}


def pipeline_point(n: int) -> dict[str, Any]:
    report = pipeline.run_with_stack(functools.partial(pipeline.throughput_only, events=n))
    return {"n": n, "per_s": report["events_per_s"], "p99_ms": report["p99_ms"]}


def curve(points: list[dict[str, Any]]) -> dict[str, Any]:
    points = sorted(points, key=lambda p: p["n"])
    base = points[0]["per_s"]
    for p in points:
        p["cost_vs_smallest"] = round(base / p["per_s"], 2) if p["per_s"] else None
    worst = max((p["cost_vs_smallest"] or 0.0) for p in points)
    return {"points": points, "linear": worst <= LINEAR_SLACK}


def run(
    ingress_sizes: tuple[int, ...] = (1000, 5000, 20_000),
    pipeline_sizes: tuple[int, ...] = (1000, 5000, 20_000),
    known: dict[str, dict[int, dict[str, Any]]] | None = None,
    json_path: Path | None = DEFAULT_JSON,
) -> dict[str, Any]:
    """`known`: {"ingress"|"pipeline": {n: point}} measured already in this run."""
    known = known or {}
    report: dict[str, Any] = {}
    for name, sizes, measure in (
        ("ingress", ingress_sizes, ingress_point),
        ("pipeline", pipeline_sizes, pipeline_point),
    ):
        if not sizes:
            continue
        have = known.get(name, {})
        points = []
        for n in sizes:
            if n not in have:
                pipeline.log(f"cost curve: {name} at {n:,}")
            points.append(have.get(n) or measure(n))
        report[name] = curve(points)
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=2))
    return report


def table(report: dict[str, Any]) -> str:
    lines = ["cost curve (per-event cost relative to the smallest N; 1.00 = linear)"]
    for name, c in report.items():
        for p in c["points"]:
            lines.append(
                f"  {name:<9} N={p['n']:>6,} {p['per_s']:>9,}/s  p99 {p['p99_ms']:>8} ms  "
                f"cost ×{p['cost_vs_smallest']}"
            )
        lines.append(f"  {name:<9} {'linear' if c['linear'] else 'WORSE THAN LINEAR'}")
    return "\n".join(lines)


def _sizes(text: str) -> tuple[int, ...]:
    return tuple(int(s) for s in text.split(",") if s.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cost", description=__doc__)
    parser.add_argument("--ingress", default="1000,5000,20000")
    parser.add_argument("--pipeline", default="1000,5000,20000")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = parser.parse_args(argv)
    print(table(run(_sizes(args.ingress), _sizes(args.pipeline), json_path=args.json)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
