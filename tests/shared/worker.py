"""A consumer process for the multi-process tests: the real service shape around one handler.

    python -m tests.shared.worker <out_dir> [--hang-first] [--delay S] [--concurrency N]

Every delivery appends "<msg_id> <attempt> <pid>" to out_dir/deliveries; the side effect,
guarded by the processed-ledger, appends "<msg_id> <pid>" to out_dir/effects. With
--hang-first, a first delivery hangs after its side effect (before the ack) until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import ClassVar

from shared import subjects
from shared.catalog import ledger_bucket
from shared.consumer import Consumer, Delivery
from shared.envelope import Envelope
from shared.ledger import Ledger
from shared.retry import RetryPolicy
from shared.service import Service
from shared.settings import DeskSettings


class WorkerSettings(DeskSettings):
    service: ClassVar[str] = "worker"


def append(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


async def main(
    out: Path, hang_first: bool, delay: float, concurrency: int, max_deliver: int
) -> None:
    pid = os.getpid()
    async with Service(WorkerSettings()) as svc:
        assert svc.bus is not None
        ledger = await Ledger.open(
            svc.bus.js, "worker", ledger_bucket("drafter")
        )  # a provisioned one

        async def handle(d: Delivery[Envelope]) -> None:
            append(out / "deliveries", f"{d.msg_id} {d.attempt} {pid}")
            if await ledger.claim(f"effect:{d.msg_id}"):  # already done by an earlier delivery?
                append(out / "effects", f"{d.msg_id} {pid}")
            if hang_first and d.attempt == 1:
                append(out / "hanging", f"{d.msg_id} {pid}")
                await asyncio.sleep(3600)
            await asyncio.sleep(delay)

        await svc.consume(
            Consumer(
                name="workers",
                stream=subjects.WORK,
                subjects=(subjects.work_for("proc"),),
                handler=handle,
                ack_wait=2.0,
                concurrency=concurrency,
                batch=concurrency,
                retry=RetryPolicy(initial=0.2),
                max_deliver=max_deliver,
            )
        )
        append(out / "ready", str(pid))
        await svc.until_stopped()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--hang-first", action="store_true")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--max-deliver", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.out, args.hang_first, args.delay, args.concurrency, args.max_deliver))
