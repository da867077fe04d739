"""The run: start the stand-ins and the stack, run the workload, the reviewer, the conversation
steps, the stale scans and the faults side by side, wait until quiescent, report, clean up."""

from __future__ import annotations

import argparse
import faulthandler
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

from desk.helpdesk import ensure_demo
from standins.channel import FakeChannel
from standins.llm import FakeLLM

from .. import conversations, postgres, stale
from ..facts import Run, log
from . import __doc__ as overview  # the package docstring: its first line is --help's
from .faults import injector
from .observation import wait_quiescent
from .plan import plan
from .report import report
from .reviewer import reviewer
from .stack import start_stack, tear_down
from .workload import workload


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m chaos", description=(overview or "").split("\n")[0]
    )
    parser.add_argument("--events", type=int, default=2000, help="webhook sends (default 2000)")
    parser.add_argument("--seed", type=int, default=1, help="workload and fault seed")
    parser.add_argument("--deadline", type=float, default=1800, help="seconds before giving up")
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="a three-node JetStream cluster with R3 streams instead of one nats-server",
    )
    parser.add_argument(
        "--postgres",
        nargs="?",
        const=postgres.SERVER_URL,
        metavar="URL",
        help="keep every service's state in a fresh database on this PostgreSQL server "
        f"(default {postgres.SERVER_URL}) and add an outage of it to the faults",
    )
    parser.add_argument("--keep", action="store_true", help="keep the var dir even on success")
    args = parser.parse_args(argv)
    if args.postgres:
        why = postgres.answers(args.postgres)
        if why is not None:
            print(f"chaos: no PostgreSQL at {args.postgres}: {why}", file=sys.stderr)
            return 2
        with postgres.fresh_database(args.postgres, prefix="desk_chaos") as url:
            return _main(args, url)
    return _main(args, None)


def _main(args: argparse.Namespace, database_url: str | None) -> int:
    started = time.monotonic()
    # a run that overstays its deadline (a hung report or teardown) says where every thread is
    faulthandler.dump_traceback_later(args.deadline + 60, exit=False, file=sys.stderr)
    var = Path(tempfile.mkdtemp(prefix="desk-chaos-"))
    rng = random.Random(args.seed)
    ops = plan(args.events, rng)
    steps = conversations.assign(ops, args.seed)
    run = Run(
        args.seed, args.events, args.deadline, var, cluster=args.cluster, database_url=database_url
    )
    log(f"var dir {var}; {len(ops)} workload steps, seed {args.seed}")
    llm = FakeLLM().start()
    channel = FakeChannel().start()
    stack = None
    ok = False
    try:
        stack, state, creds = start_stack(
            var,
            llm.url,
            channel.url,
            3 if args.cluster else 1,
            {
                "DESK_STALE_DAYS": str(stale.STALE_DAYS),
                "DESK_STALE_CRON": stale.NEVER,
                **({"DESK_DATABASE_URL": database_url} if database_url else {}),
            },
        )
        run.ingress = state["services"]["ingress"]["url"]
        run.inbox = state["services"]["inbox_api"]["url"]
        run.secret = creds["webhook_secrets"]["helpdesk"]
        run.token = creds["reviewer_token"]
        run.helpdesk_url = f"sqlite:///{var.resolve() / 'helpdesk.sqlite'}"
        ensure_demo(run.helpdesk_url)
        admin_url = run.admin_url = state["nats_admin_url"]
        log(f"stack up (supervisor pid {stack.pid}) in {time.monotonic() - started:.1f}s")

        threads = [
            threading.Thread(target=workload, args=(run, ops, rng, steps), daemon=True),
            threading.Thread(target=reviewer, args=(run,), daemon=True),
            threading.Thread(target=conversations.conversations, args=(run,), daemon=True),
            threading.Thread(target=stale.scanner, args=(run,), daemon=True),
            threading.Thread(target=injector, args=(run, llm, channel, args.seed), daemon=True),
        ]
        for t in threads:
            t.start()

        quiescent = wait_quiescent(run, admin_url, started)
        run.stop.set()
        for t in threads:
            t.join(15)
        ok = report(run, admin_url, channel, quiescent, started)
    except Exception as exc:
        log(f"harness error: {exc.__class__.__name__}: {exc}")
        print(f"FAIL harness: {exc.__class__.__name__}: {exc}", flush=True)
    finally:
        run.stop.set()
        tear_down(stack, channel, llm, var, keep=args.keep or not ok)
    faulthandler.cancel_dump_traceback_later()
    print("chaos: OK" if ok else "chaos: FAILED", flush=True)
    return 0 if ok else 1
