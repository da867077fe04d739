"""The run: the insider group on its own secured broker; then start the stack, drive both
campaigns, watch the broker, report, clean up."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from pathlib import Path

from standins.channel import FakeChannel
from standins.llm import FakeLLM
from standins.obedient import obedient_responder

from ..facts import log
from ..harness.stack import SERVICES, service_pid, start_stack, tear_down
from . import __doc__ as overview  # the package docstring: its first line is --help's
from .campaign import Campaign
from .claims import claims_campaign
from .inbox import inbox_campaign, waiting_items
from .ingress import ingress_campaign
from .insiders import run_insiders
from .mail import mail_replies
from .observation import broker_pids, drained, stored_counts, wait_for
from .prompts import prompt_campaign, start_eval
from .report import report, report_insiders
from .webforms import webforms_campaign


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m chaos.badinput", description=(overview or "").split("\n\n")[0]
    )
    parser.add_argument(
        "--examples",
        type=int,
        default=1500,
        help="examples per ingress input group (default 1500); an inbox API operation gets N/4",
    )
    parser.add_argument("--seed", type=int, default=1, help="hypothesis seed")
    parser.add_argument("--keep", action="store_true", help="keep the var dir even on success")
    parser.add_argument(
        "--only",
        choices=["insiders"],
        help="run one group alone; insiders: every NATS user tries what its declaration does "
        "not give it, on its own secured nats-server (no stack; a few seconds)",
    )
    args = parser.parse_args(argv)
    if args.examples < 4:
        raise SystemExit("--examples must be at least 4")
    if args.only == "insiders":
        return insiders_only(keep=args.keep)

    started = time.monotonic()
    var = Path(tempfile.mkdtemp(prefix="desk-badinput-"))
    log(f"var dir {var}; {args.examples} examples per group, seed {args.seed}")
    llm = FakeLLM().start()
    llm.responder = obedient_responder  # a model that does what the ticket says (prompt group)
    channel = FakeChannel().start()
    stack = None
    ok = False
    evaluation = start_eval(var)  # auto-send's evidence, while the stack starts
    try:
        insiders = run_insiders(var / "insiders")
        log(f"insider group done in {insiders.seconds:.1f}s")
        stack, state, creds = start_stack(
            var,
            llm.url,
            channel.url,
            extra={
                "DESK_AUTH_BURST": "1000000",  # many bad tokens on purpose
                "DESK_ADMINS": '["reviewer"]',  # the prompt group turns auto-send on
                "DESK_AUTOSEND_EVIDENCE": "1",  # after one approved round per category
            },
        )
        admin_url = state["nats_admin_url"]
        pids = {name: service_pid(var, name) for name in SERVICES}
        brokers = broker_pids(var)
        log(f"stack up (supervisor pid {stack.pid}) in {time.monotonic() - started:.1f}s")
        c = Campaign(
            state["services"]["ingress"]["url"],
            state["services"]["inbox_api"]["url"],
            creds,
            args.seed,
        )
        before = asyncio.run(stored_counts(admin_url))
        ingress_campaign(c, args.examples)
        prompts = prompt_campaign(c, var, llm, args.examples, evaluation)
        after_ingress = asyncio.run(stored_counts(admin_url))
        webforms_campaign(c, waiting_items(c), args.examples)
        inbox_campaign(c, args.examples)
        claims = claims_campaign(c, state, creds, prompts.evidence)
        decisions_seen = wait_for(
            lambda: (
                asyncio.run(stored_counts(admin_url))["decisions"] - before["decisions"]
                >= c.tally.decisions
            ),
            timeout=30,
        )
        after = asyncio.run(stored_counts(admin_url))
        quiet = wait_for(lambda: drained(admin_url), timeout=90, every=1.0)
        c.tally.unexpected += mail_replies(channel.requests)  # one line, one address, its author
        ok = report(
            c,
            var,
            state,
            stack.poll() is None,
            pids,
            bool(brokers) and brokers == broker_pids(var),
            before,
            after_ingress,
            after,
            decisions_seen,
            quiet,
            started,
            insiders,
            prompts,
            claims,
        )
    except Exception as exc:
        log(f"campaign error: {exc.__class__.__name__}: {exc}")
        print(f"FAIL campaign: {exc.__class__.__name__}: {exc}", flush=True)
    finally:
        if evaluation[0].poll() is None:
            evaluation[0].kill()
            evaluation[0].wait()
        tear_down(stack, channel, llm, var, keep=args.keep or not ok)
    print("badinput: OK" if ok else "badinput: FAILED", flush=True)
    return 0 if ok else 1


def insiders_only(*, keep: bool) -> int:
    """`--only insiders`: the insider group and its report, without the stack."""
    var = Path(tempfile.mkdtemp(prefix="desk-badinput-insiders-"))
    log(f"var dir {var}; insider group only")
    ok = report_insiders(run_insiders(var))
    if keep or not ok:
        log(f"broker log kept in {var}/nats-server.log")
    else:
        shutil.rmtree(var, ignore_errors=True)
    print("badinput: OK" if ok else "badinput: FAILED", flush=True)
    return 0 if ok else 1
