"""Who takes part in a mail conversation, and so which conversation a reply mail joins.

A reply mail joins the conversation of a mail it answers only if its sender takes part in it
(started it, or joined it so); otherwise it is a conversation of its own and the reviewer is
told which conversation it claimed. Each mail's Message-ID is remembered with its conversation
per sender (first writer wins, so replicas agree), and for anyone (first writer wins) to name
the conversation a stranger claims.
"""

from __future__ import annotations

from shared import ids, mail
from shared.ledger import Ledger

from . import threads
from .runs import Runs


class Participants:
    def __init__(self, runs: Runs, ledger: Ledger) -> None:
        self.runs = runs
        self.ledger = ledger

    async def thread_of(self, work: threads.Work) -> threads.Work:
        """The mail `work` in the conversation it joins (module docstring)."""
        assert work.mail_id is not None and work.mail_from is not None
        sender = work.mail_from
        mine = ids.mail(f"{sender}\n{work.mail_id}")
        thread, claimed = work.thread, None
        for parent in work.mail_parents:
            for key in (ids.mail(f"{sender}\n{parent}"), ids.mail(parent)):
                found = await self.ledger.get(key)
                if not found:
                    continue
                if await self._takes_part(found.decode(), sender):
                    thread = found.decode()
                    break
                claimed = claimed or found.decode()
            if thread != work.thread:
                break
        known = await self.ledger.get(mine)  # this mail, seen before (a redelivery, a copy)
        thread = known.decode() if known else thread
        # the sender first: whenever its Message-ID names the conversation, it takes part
        await self.ledger.claim(ids.mail_participant(thread, sender))
        if not await self.ledger.claim(mine, thread.encode()):
            thread = (await self.ledger.get(mine) or thread.encode()).decode()
        await self.ledger.claim(ids.mail(work.mail_id), thread.encode())
        if thread != work.thread:
            return work.in_thread(thread)
        return work.noting(threads.claimed_note(claimed)) if claimed else work

    async def _takes_part(self, thread: str, sender: str) -> bool:
        """Whether `sender` (normalised) started the mail conversation or joined it. A
        conversation from before participants were recorded: its customer is who started it."""
        if await self.ledger.seen(ids.mail_participant(thread, sender)):
            return True
        values = (await self.runs.state(self.runs.config(thread))).values or {}
        customer = (values.get("ticket") or values.get("inline_ticket") or {}).get("customer")
        email = customer.get("email") if isinstance(customer, dict) else None
        return isinstance(email, str) and mail.normal_address(email) == sender
