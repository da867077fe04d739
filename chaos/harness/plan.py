"""The workload plan: a bounded, seeded list of sends (pure; nothing is sent here).

One ticket per thread, created in the demo helpdesk just before its first event; 20 % of sends
re-send an earlier event (same id); 5 % name tickets that do not exist (T99xxx); some tickets get
a second event with an OLDER version after a newer one; some tickets are created without any
webhook, so only the reconciler can find them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass
class Op:
    kind: str  # "first" (create ticket + send), "older" (pair's older event), "missing",
    #            "dup" (re-send op `ref`), "silent" (create ticket, no webhook)
    slot: int = -1  # ticket slot for first / older / silent
    ref: Op | None = None  # the op a dup re-sends
    lawyer: bool = False


def plan(events: int, rng: random.Random) -> list[Op]:
    n_dup = round(0.20 * events)
    n_missing = max(1, round(0.05 * events))
    n_pairs = max(1, round(0.05 * events))
    n_silent = max(1, round(0.05 * events))
    unique = events - n_dup
    n_single = unique - n_missing - 2 * n_pairs
    if n_single < 1:
        raise SystemExit("--events is too small for the workload mix (use at least 20)")
    slot = 0
    base: list[Op] = []
    for _ in range(n_single):
        base.append(Op("first", slot, lawyer=rng.random() < 0.05))
        slot += 1
    pair_slots = []
    for _ in range(n_pairs):
        base.append(Op("first", slot))
        pair_slots.append(slot)
        slot += 1
    for i in range(n_missing):
        base.append(Op("missing", 99000 + i))
    rng.shuffle(base)
    # each pair's older event goes somewhere after its newer one
    for pslot in pair_slots:
        at = next(i for i, op in enumerate(base) if op.kind == "first" and op.slot == pslot)
        base.insert(rng.randint(at + 1, len(base)), Op("older", pslot))
    ops = list(base)
    # duplicates: re-send an earlier send (same event id), at a random later position
    for _ in range(n_dup):
        sends = [i for i, op in enumerate(ops) if op.kind in ("first", "older", "missing")]
        ref_pos = rng.choice(sends)
        ops.insert(rng.randint(ref_pos + 1, len(ops)), Op("dup", ref=ops[ref_pos]))
    # silent tickets (no webhook) at random points
    for _ in range(n_silent):
        ops.insert(rng.randint(0, len(ops)), Op("silent", slot))
        slot += 1
    return ops
