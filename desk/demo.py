"""`desk demo`: the scenario a newcomer runs to see the whole system work.

Starts a fresh stack (embedded NATS, SQLite, the offline draft model) in its own directory,
sends six signed ticket webhooks (T1012 twice, T1041, T1003, T1005, and T9999, which does not
exist), works the inbox (accept T1012; feedback on T1041, then edit the redraft and send it;
ignore T1003), then plays the conversation: the customer of T1012 writes again (round two, a new
draft, accepted: a second reply), and an agent answers T1005 in the helpdesk while its draft
waits (the draft is withdrawn, never sent). Prints each step and the final table, and stops
the stack again.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

from services.sender import read_outbox
from shared import subjects
from shared.bus import Bus
from shared.helpdesk.events import message_event
from shared.history import stored

from .helpdesk import add_message
from .inbox import Client, InboxError
from .statefile import STATE_FILE
from .webhook import SendError, sample_event, send

T = TypeVar("T")
EDITED_BODY = "Your invoice, with your VAT number on it, is attached to this email."


def add_arguments(subparsers: Any) -> None:
    demo = subparsers.add_parser("demo", help="run the demo scenario on a fresh stack")
    demo.add_argument("--var-dir", type=Path, help="where the demo stack lives (default: temp)")
    demo.add_argument("--keep", action="store_true", help="leave the demo stack running")


def wait(what: str, check: Callable[[], T | None], timeout: float = 60.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = check()
        except InboxError:
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what} after {timeout:.0f}s")
        time.sleep(0.2)


def step(text: str) -> None:
    print(f"==> {text}", flush=True)


def start_stack(var_dir: Path) -> tuple[subprocess.Popen[bytes], dict[str, Any], dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
    env.update({"DESK_VAR_DIR": str(var_dir), "DESK_INGRESS_PORT": "0", "DESK_INBOX_API_PORT": "0"})
    var_dir.mkdir(parents=True, exist_ok=True)
    log = open(var_dir / "desk-up.log", "wb")  # handed to the child
    stack = subprocess.Popen(
        [sys.executable, "-m", "desk", "up"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    log.close()

    def ready() -> dict[str, Any] | None:
        path = var_dir / STATE_FILE
        return json.loads(path.read_text()) if path.exists() else None

    state = wait("the stack to start", ready)
    creds = json.loads(Path(state["credentials"]).read_text())
    return stack, state, creds


def _answers(url: str) -> bool:
    """The server at `url` answers HTTP at all (a 404 for `/` is an answer)."""
    try:
        httpx.get(url, timeout=2)
    except httpx.HTTPError:
        return False
    return True


def run_scenario(state: dict[str, Any], creds: dict[str, Any], var_dir: Path) -> int:
    ingress = state["services"]["ingress"]["url"]
    secret = creds["webhook_secrets"]["helpdesk"]
    inbox = Client(state["services"]["inbox_api"]["url"], creds["reviewer_token"])

    step("sending six signed ticket webhooks (T1012 twice; T9999 does not exist)")
    answers: dict[str, list[bool]] = {}
    for ticket, repeat in (("T1012", 2), ("T1041", 1), ("T1003", 1), ("T1005", 1), ("T9999", 1)):
        event = sample_event("ticket.created", ticket, "normal", f"evt_demo_{ticket}")
        wait("the inbox", lambda: inbox.items({}))  # the stack answers
        wait("ingress", functools.partial(_answers, ingress))
        for status, body in send(
            url=ingress,
            source="helpdesk",
            secret=secret,
            scheme="standard",
            event=event,
            repeat=repeat,
        ):
            answers.setdefault(ticket, []).append(json.loads(body)["duplicate"])
            print(f"    {ticket}: {status} {body}")

    def item(item_id: str, status: str = "waiting") -> dict[str, Any] | None:
        found = inbox.item(item_id)
        return found if found["status"] == status else None

    step("waiting for the drafts")
    for item_id in ("T1012~v1", "T1041~v1", "T1003~v1", "T1005~v1"):
        drafted = wait(item_id, functools.partial(item, item_id))
        print(f"    {item_id} [{drafted['category']}] {drafted['summary']}")

    step("accepting T1012")
    inbox.decide("T1012~v1", {"type": "accept", "version": 1})
    step("answering T1041 with feedback, waiting for version 2")
    inbox.decide(
        "T1041~v1",
        {
            "type": "response",
            "version": 1,
            "args": "Say that the invoice with the VAT number is attached.",
        },
    )
    v2 = wait("T1041~v2", lambda: item("T1041~v2"))
    print(f"    v2 reply: {v2['action_request']['args']['reply']!r}")
    step("editing T1041 v2 and sending it")
    greeting = v2["action_request"]["args"]["reply"].split("\n", 1)[0]
    edited = f"{greeting}\n\n{EDITED_BODY}\n\nBest regards,\nThe Support Team"
    inbox.decide("T1041~v2", {"type": "edit", "version": 2, "args": edited})
    step("ignoring T1003")
    inbox.decide("T1003~v1", {"type": "ignore", "version": 1})

    wait("T1012 sent", lambda: item("T1012~v1", "sent"))
    wait("T1041 sent", lambda: item("T1041~v2", "sent"))
    wait("T1003 ignored", lambda: item("T1003~v1", "ignored"))

    helpdesk = f"sqlite:///{(var_dir / 'helpdesk.sqlite').resolve()}"

    def helpdesk_message(ticket: str, body: str, author: str) -> None:
        changed, message = add_message(helpdesk, ticket, body, author)
        event = message_event(changed, message, event_id=f"evt_demo_{message.id}")
        for status, answer in send(
            url=ingress, source="helpdesk", secret=secret, scheme="standard", event=event, repeat=1
        ):
            print(f"    {ticket} {author} message {message.id}: {status} {answer}")

    step("the customer of T1012 writes again: round two")
    helpdesk_message("T1012", "Thanks! Will the refund show on the same card?", "customer")
    round_two = wait("T1012~v2", lambda: item("T1012~v2"))
    said = [m["author"] for m in round_two.get("conversation", [])]
    print(f"    T1012~v2 answers round {round_two['round']}; the conversation: {', '.join(said)}")
    inbox.decide("T1012~v2", {"type": "accept", "version": round_two["version"]})
    wait("T1012 round two sent", lambda: item("T1012~v2", "sent"))

    step("an agent answers T1005 in the helpdesk while its draft waits")
    helpdesk_message("T1005", "I have unblocked your address; please try again.", "agent")
    withdrawn = wait("T1005 withdrawn", lambda: item("T1005~v1", "withdrawn"))
    print(f"    T1005~v1 withdrawn: {withdrawn.get('withdrawn_reason')}")
    letters = wait(
        "T9999 dead-lettered",
        lambda: [
            d
            for d in inbox._call("GET", "/api/deadletters")["dead_letters"]
            if "T9999" in d["error"]
        ],
    )
    rows = read_outbox(None, var_dir)
    sent_events = asyncio.run(_results(state["nats_admin_url"], "reply.sent"))

    final = {
        "T1012": inbox.item("T1012~v1"),
        "T1012/2": inbox.item("T1012~v2"),
        "T1041": inbox.item("T1041~v2"),
        "T1003": inbox.item("T1003~v1"),
        "T1005": inbox.item("T1005~v1"),
    }
    print()
    print(f"{'TICKET':<10} {'ITEM':<10} {'STATUS':<13} SENT TEXT")
    for ticket, found in final.items():
        text = (found.get("result") or {}).get("text") or found.get("withdrawn_reason") or ""
        print(f"{ticket:<10} {found['id']:<10} {found['status']:<13} {' '.join(text.split())[:60]}")
    dead = letters[0]
    print(
        f"{'T9999':<10} {'-':<10} {'dead letter':<13} attempts {dead['attempts']}: "
        f"{dead['error'][:60]}"
    )
    print(
        f"\noutbox rows: {len(rows)}; reply.sent events: {sent_events}; "
        f"the duplicate T1012 webhook answered duplicate={answers['T1012'][1]}"
    )
    keys = {r.key for r in rows if r.ticket_id == "T1012"}
    ok = (
        final["T1012"]["status"] == "sent"
        and final["T1012/2"]["status"] == "sent"
        and len(keys) == 2  # one reply per round
        and final["T1005"]["status"] == "withdrawn"
        and final["T1041"]["status"] == "sent"
        and (final["T1041"].get("result") or {}).get("text") == edited
        and final["T1003"]["status"] == "ignored"
        and dead["attempts"] == 1
        and len(rows) == 3
        and sent_events == 3
        and answers["T1012"] == [False, True]
    )
    print("demo: OK" if ok else "demo: FAILED")
    return 0 if ok else 1


async def _results(nats_url: str, kind: str) -> int:
    bus = await Bus.connect(nats_url, service="demo", reconnect=False)
    try:
        found = await stored(bus, subjects.RESULTS)
    finally:
        await bus.close()
    return sum(1 for m in found if m.subject == subjects.result(kind))


def main(args: argparse.Namespace) -> int:
    var_dir = args.var_dir or Path(tempfile.mkdtemp(prefix="desk-demo-"))
    print(f"demo stack in {var_dir}")
    stack, state, creds = start_stack(var_dir)
    try:
        return run_scenario(state, creds, var_dir)
    except (TimeoutError, InboxError, SendError) as exc:
        print(f"desk demo: {exc} (logs in {var_dir / 'log'})", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"the demo stack keeps running; stop it with: kill -INT {stack.pid}")
        else:
            stack.send_signal(signal.SIGINT)
            stack.wait(60)
