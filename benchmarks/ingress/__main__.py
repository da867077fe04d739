"""`python -m benchmarks.ingress`: measure, print the table, write the JSON."""

from __future__ import annotations

import argparse
from pathlib import Path

from .broker import BROKER_IN_FLIGHT
from .measure import ROUNDS
from .mode import MODES
from .report import DEFAULT_JSON, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.ingress", description="Ingress throughput against its ceilings."
    )
    parser.add_argument("--requests", type=int, default=20_000, help="distinct webhooks (20000)")
    parser.add_argument("--connections", type=int, default=64, help="keep-alive connections")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write JSON")
    parser.add_argument("--mode", choices=MODES, action="append", help="only this mode")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="interleaved rounds (10)")
    parser.add_argument(
        "--broker-in-flight", type=int, default=BROKER_IN_FLIGHT, help="broker reference window"
    )
    parser.add_argument(
        "--profile", action="store_true", help="sample ingress with py-spy (when installed)"
    )
    args = parser.parse_args(argv)
    report = run(
        args.requests,
        args.connections,
        args.json,
        tuple(args.mode or MODES),
        args.rounds,
        args.broker_in_flight,
        args.profile,
    )
    # Exit 1 only when exactly-once fails: a missed speed target is a finding, not a crash.
    return 0 if all(m["exactly_once"]["ok"] for m in report["modes"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
