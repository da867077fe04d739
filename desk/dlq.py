"""`desk dlq`: look at dead letters and replay them.

desk dlq list [--limit N] [--after ID]   a table of outstanding dead letters, oldest first
desk dlq show ID                         every field, the original headers and the payload
desk dlq replay ID [--yes]               republish to the original subject, then remove it
desk dlq replay --all [--yes]            the same for every outstanding dead letter

The service shown is the one that wrote the letter (its `dlq.<service>` subject, which only that
service may publish to); a letter whose headers claim another is shown as "(claims X!)".

Exit status: 0 done, 1 unknown id / replay declined / a letter not replayed / NATS unreachable
or refusing, 2 a usage error (replay without an id or --all).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import re
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import nats.errors as nats_errors
import nats.js.errors as js_errors

from shared import deadletters
from shared.bus import BrokerCode, Bus, NatsAuth, without_credentials
from shared.deadletters import DeadLetter, RefusedReplay, UnknownDeadLetter
from shared.errors import PermanentError, TransientError
from shared.logging import redact

ERROR_WIDTH = 60
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # keeps \t and \n


class _Failed(Exception):
    """A message for stderr and a non-zero exit."""


def add_arguments(subparsers: Any) -> None:
    """Register `dlq` and its sub-commands on the `desk` parser's sub-parsers."""
    dlq = subparsers.add_parser("dlq", help="list, show and replay dead letters")
    sub = dlq.add_subparsers(dest="dlq_command", required=True, metavar="command")
    listing = sub.add_parser("list", help="outstanding dead letters, oldest first")
    listing.add_argument("--limit", type=int, default=100, help="at most N rows (default 100)")
    listing.add_argument("--after", type=int, help="only ids greater than this (paging)")
    show = sub.add_parser("show", help="one dead letter with its headers and payload")
    show.add_argument("id", type=int)
    again = sub.add_parser("replay", help="republish to the original subject and remove it")
    which = again.add_mutually_exclusive_group(required=True)  # neither: a usage error (exit 2)
    which.add_argument("id", type=int, nargs="?", help="the dead letter's id")
    which.add_argument("--all", action="store_true", help="every outstanding dead letter")
    again.add_argument("--yes", action="store_true", help="do not ask for confirmation")


def main(args: argparse.Namespace, nats_url: str, auth: NatsAuth) -> int:
    command = args.dlq_command
    try:
        if command == "list":
            _run(nats_url, auth, lambda bus: _list(bus, args.limit, args.after))
        elif command == "show":
            _run(nats_url, auth, lambda bus: _show(bus, args.id))
        elif command == "replay" and args.all:
            _run(nats_url, auth, lambda bus: _replay_all(bus, args.yes))
        elif command == "replay":
            _run(nats_url, auth, lambda bus: _replay(bus, args.id, args.yes))
        else:
            raise _Failed(f"unknown command {command!r}")
    except _Failed as exc:
        print(f"desk dlq {command}: {exc}", file=sys.stderr)
        return 1
    return 0


def _run(nats_url: str, auth: NatsAuth, action: Callable[[Bus], Awaitable[None]]) -> None:
    async def go() -> None:
        try:
            bus = await Bus.connect(nats_url, service="dlq", auth=auth, reconnect=False)
        except TransientError as exc:
            raise _Failed(f"{exc} ({without_credentials(nats_url)})") from exc
        try:
            await action(bus)
        except js_errors.NotFoundError as exc:
            if exc.err_code != BrokerCode.STREAM_NOT_FOUND:
                raise _Failed(f"NATS refused: {exc.description}") from exc
            raise _Failed("the DLQ stream does not exist (run `desk provision`)") from exc
        except js_errors.APIError as exc:
            raise _Failed(f"NATS refused: {exc.description}") from exc
        except (TimeoutError, nats_errors.Error, TransientError, PermanentError) as exc:
            raise _Failed(str(exc) or exc.__class__.__name__) from exc
        finally:
            await bus.close()

    asyncio.run(go())


async def _list(bus: Bus, limit: int, after: int | None) -> None:
    letters = await deadletters.list_dead_letters(bus.js, limit=limit, after=after)
    total = await deadletters.count(bus.js)
    if not letters:
        print("no dead letters" if total == 0 else f"no dead letters after id {after}")
        return
    print(render_table(letters))
    more = f"; next page: --after {letters[-1].id}" if len(letters) == limit else ""
    print(f"\n{len(letters)} shown, {total} outstanding{more}")


async def _show(bus: Bus, id: int) -> None:
    letter = await deadletters.get_dead_letter(bus.js, id)
    if letter is None:
        raise _Failed(f"no dead letter with id {id}")
    print(render_letter(letter))


async def _replay(bus: Bus, id: int, yes: bool) -> None:
    letter = await deadletters.get_dead_letter(bus.js, id)
    if letter is None:
        raise _Failed(f"no dead letter with id {id}")
    if not yes and not _confirm(
        f"replay dead letter {id} ({letter.payload_size} bytes) to {_clean(letter.subject)}?"
    ):
        raise _Failed("not replayed (pass --yes to skip this question)")
    try:
        result = await deadletters.replay(bus, id)
    except UnknownDeadLetter as exc:  # replayed by someone else in the meantime
        raise _Failed(str(exc)) from exc
    except RefusedReplay as exc:
        raise _Failed(str(exc)) from exc
    where = f"{result.stream} seq {result.seq}"
    if result.duplicate:
        print(f"dead letter {id} had already been replayed to {_clean(result.subject)} ({where})")
    else:
        print(f"replayed dead letter {id} to {_clean(result.subject)} ({where})")
    print(f"removed from the DLQ; {await deadletters.count(bus.js)} outstanding")


async def _replay_all(bus: Bus, yes: bool) -> None:
    """Every outstanding dead letter, oldest first, each as `_replay` does it; one that cannot
    be replayed is kept and named, and the others still go."""
    outstanding = await deadletters.count(bus.js)
    if outstanding == 0:
        print("no dead letters")
        return
    if not yes and not _confirm(f"replay all {outstanding} dead letters?"):
        raise _Failed("not replayed (pass --yes to skip this question)")
    replayed, refused = await deadletters.replay_all(bus)  # those outstanding now: it ends
    failed = [f"  {id}: {_clean(why)}" for id, why in refused.items()]
    print(f"replayed {_letters(len(replayed))}; {await deadletters.count(bus.js)} outstanding")
    if failed:
        print("\n".join([f"{len(failed)} not replayed:", *failed]))
        raise _Failed(f"{_letters(len(failed))} not replayed (see above)")


def _letters(n: int) -> str:
    return f"{n} dead letter" + ("" if n == 1 else "s")


def _confirm(question: str) -> bool:
    print(f"{question} [y/N] ", end="", flush=True)
    try:
        answer = input()
    except (EOFError, OSError):  # no terminal to ask
        print()
        return False
    return answer.strip().lower() in {"y", "yes"}


def render_table(letters: list[DeadLetter]) -> str:
    rows = [("ID", "TIME (UTC)", "SERVICE", "SUBJECT", "ATTEMPTS", "REASON", "ERROR")]
    for d in letters:
        rows.append(
            (
                str(d.id),
                _utc(d),
                _clean(_writer(d)),
                _clean(d.subject),
                str(d.attempts),
                _clean(d.reason),
                _shorten(_clean(redact(d.error)).replace("\n", " "), ERROR_WIDTH),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]])
        for row in rows
    ).rstrip()


def render_letter(d: DeadLetter) -> str:
    fields = [
        ("id", str(d.id)),
        ("time", _utc(d)),
        ("service", _writer(d)),
        ("consumer", d.consumer),
        ("stream", f"{d.stream} seq {d.stream_seq}"),
        ("subject", d.subject),
        ("attempts", str(d.attempts)),
        ("reason", d.reason),
        ("error", redact(d.error)),
        ("original msg id", d.original_msg_id or "-"),
        ("payload size", f"{d.payload_size} bytes"),
    ]
    lines = [f"{name + ':':<17}{_clean(value)}" for name, value in fields]
    lines.append("headers:")
    lines.extend(f"  {_clean(k)}: {_clean(v)}" for k, v in sorted(d.headers.items()))
    limit = deadletters.PAYLOAD_DISPLAY_LIMIT
    cut = d.payload_size > limit
    lines.append(f"payload (first {limit} bytes):" if cut else "payload:")
    lines.append(_clean(d.payload) if d.payload else "(empty)")
    return "\n".join(lines)


def _writer(d: DeadLetter) -> str:
    """Who wrote it (its subject says), and whom it claims to be when that is someone else."""
    if d.claimed_service is None:
        return d.service
    return f"{d.service} (claims {d.claimed_service}!)"


def _utc(d: DeadLetter) -> str:
    return d.time.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _clean(text: str) -> str:
    """Show control characters (terminal escapes from outside) as `\\xNN`, never run them."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
