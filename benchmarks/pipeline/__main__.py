"""`python -m benchmarks.pipeline`: run, print the table, write the JSON."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __doc__ as overview  # the package docstring: --help's description
from .measure import DEFAULT_JSON, run
from .report import table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pipeline", description=overview)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--latency-events", type=int, default=300)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--drafters", type=int, default=1, help="drafter processes sharing its consumers"
    )
    args = parser.parse_args(argv)
    report = run(args.events, args.latency_events, args.rate, args.json, args.keep, args.drafters)
    print(table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
