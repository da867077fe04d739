"""`make bench`: every benchmark in one run, each printed as a table and written as JSON, then
the headline line.

    python -m benchmarks [--quick] [--skip ingress,pipeline,model,inbox,scaleout,cost]

Results go to var/bench/*.json; the summary to var/bench/summary.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from . import cost, inbox, ingress, model, pipeline, scaleout
from .processes import ROOT

SUMMARY = ROOT / "var" / "bench" / "summary.json"
PARTS = ("ingress", "pipeline", "model", "inbox", "scaleout", "cost")


def say(text: str) -> None:
    print(text, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, to try the harness")
    parser.add_argument("--skip", default="", help=f"comma-separated parts of {','.join(PARTS)}")
    args = parser.parse_args(argv)
    skip = {p.strip() for p in args.skip.split(",") if p.strip()}
    unknown = skip - set(PARTS)
    if unknown:
        parser.error(f"unknown part(s): {', '.join(sorted(unknown))}")
    q = args.quick
    started = time.monotonic()
    summary: dict[str, Any] = {"cores": os.cpu_count(), "quick": q}
    headline: dict[str, Any] = {}
    known: dict[str, dict[int, dict[str, Any]]] = {"ingress": {}, "pipeline": {}}
    # The pipeline sizes keep its part to a few minutes at this machine's 35-45 events/s.
    n_ingress, n_pipeline = (2000, 300) if q else (20_000, 2000)

    if "ingress" not in skip:
        report = ingress.run(requests=n_ingress)  # prints its own table
        relaxed = report["modes"]["relaxed"]["ingress"]
        known["ingress"][n_ingress] = {
            "n": n_ingress,
            "per_s": round(relaxed["rps"]),
            "p99_ms": round(relaxed["p99_ms"], 1),
        }
        summary["ingress"] = report["headline"]
        headline.update(report["headline"])
    if "pipeline" not in skip:
        report = pipeline.run(events=n_pipeline, latency_events=100 if q else 300)
        known["pipeline"][n_pipeline] = {
            "n": n_pipeline,
            "per_s": report["throughput"]["events_per_s"],
            "p99_ms": report["throughput"]["p99_ms"],
        }
        say("")
        say(pipeline.table(report))
        headline["pipeline_eps"] = report["throughput"]["events_per_s"]
        headline["pipeline_p99_ms"] = report["latency"]["p99_ms"]
        summary["pipeline"] = {
            "events_per_s": report["throughput"]["events_per_s"],
            "graph_alone_per_s": report["graph_alone"]["events_per_s"],
            "pipeline/graph": report["pipeline_vs_graph"],
            "p99_ms_at_offered_rate": report["latency"]["p99_ms"],
            "decisions_per_s": report["decisions"]["decisions_per_s"],
            "slowest_stage": report["slowest_stage"],
        }
    if "model" not in skip:
        # quick: the shortest delay only; full: L = 1 s and 5 s, C up to 64 (about 3 minutes)
        report = model.run((8, 32) if q else (8, 32, 64), (1.0,) if q else (1.0, 5.0), 5)
        say("")
        say(model.table(report))
        summary["model"] = report
        headline.update(report["headline"])
    if "inbox" not in skip:
        # a year's volume: a million items on each database (seeding takes ~2.5 min per database)
        report = inbox.run(50_000 if q else 1_000_000, 30 if q else 100, ("sqlite", "postgresql"))
        say("")
        say(inbox.table(report))
        summary["inbox"] = report
        headline.update(report["headline"])
    if "scaleout" not in skip:
        report = scaleout.run(events=100 if q else 300)
        say("")
        say(scaleout.table(report))
        summary["scaleout"] = report["rows"]
    if "cost" not in skip:
        ingress_sizes = (500, 1000, 2000) if q else (1000, 5000, 20_000)
        pipeline_sizes = (100, 300) if q else (500, 1000, 2000)
        report = cost.run(ingress_sizes, pipeline_sizes, known=known)
        say("")
        say(cost.table(report))
        summary["cost"] = report
    summary["headline"] = headline
    summary["wall_seconds"] = round(time.monotonic() - started, 1)
    SUMMARY.parent.mkdir(parents=True, exist_ok=True)
    SUMMARY.write_text(json.dumps(summary, indent=2))
    say("")
    wall, cores = summary["wall_seconds"], summary["cores"]
    say(f"bench: {wall:.0f}s on {cores} cores; JSON in {SUMMARY.parent}")
    say(" ".join(f"{k}={v}" for k, v in headline.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
