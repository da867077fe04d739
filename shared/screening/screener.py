"""The screen itself (`screen`): every check run on a reply, as the warnings it earns, and the
texts it takes from a ticket (`conversation_texts`, `customer_texts`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .clauses import asks_for_secrets, asks_to_verify, promises
from .details import PLACEHOLDER, foreign_details
from .injection import steering
from .quotation import quoted
from .text import DISGUISED, nfkc
from .weblinks import PRIVATE_IP, defanged, hosts_of_addresses, links, vouched


def screen(
    reply: str,
    *,
    conversation: Sequence[str] = (),
    knowledge: Sequence[str] = (),
    customer: Sequence[str] | None = None,
) -> list[str]:
    """The warnings a reply earns (empty: nothing foreign in it). See `shared.screening`."""
    warnings: list[str] = []
    known_links = [k for text in knowledge for k in (*links(text), *hosts_of_addresses(text))]
    said = "\n".join(conversation)
    foreign = [
        link
        for link in links(reply)
        if not vouched(link, known_links)
        # the customer's own network named back to them; with a path or port it is a link
        and not (PRIVATE_IP.match(link.host) and not link.path and link.host in said)
    ]
    if foreign:
        warnings.append(
            "the reply links to an address the cited knowledge does not name: "
            + ", ".join(defanged(link) for link in foreign[:5])
        )
    if DISGUISED.search(nfkc(reply)):
        warnings.append("the reply writes a link or address in disguise (hxxp, [.], (at), dot)")
    warnings += foreign_details(reply, [*conversation, *knowledge])
    holes = list(dict.fromkeys(m.group(0) for m in PLACEHOLDER.finditer(reply)))
    if holes:
        warnings.append(
            "the reply has the placeholders of a remembered example where details belong: "
            + ", ".join(holes[:5])
        )
    if asks_for_secrets(reply):
        warnings.append(
            "the reply asks for a password, card number, security code, PIN or one-time code;"
            " we never ask for those"
        )
    if asks_to_verify(reply):
        warnings.append('the reply asks the customer to "verify" an account or identity')
    promised = promises(reply)
    if promised:
        warnings.append(
            "the reply promises what only a person may decide: "
            + ", ".join(repr(p) for p in promised[:3])
        )
    words = quoted(reply, conversation if customer is None else customer, knowledge)
    if words:
        warnings.append(f"the reply quotes about {int(words)} words of the conversation verbatim")
    steered = steering(customer or ())
    if steered:
        warnings.append(
            "the customer's text is addressed to the model, not to us: "
            + ", ".join(repr(s) for s in steered[:3])
            + "; a person answers it"
        )
    return warnings


def customer_texts(
    subject: str | None, customer: Mapping[str, Any] | None, messages: Iterable[Mapping[str, Any]]
) -> list[str]:
    """What `screen` takes as what the customer wrote: the subject, the customer's name, and the
    bodies of the customer's messages."""
    texts = [str(subject or ""), str((customer or {}).get("name") or "")]
    texts += [str(m.get("body") or "") for m in messages if m.get("author") == "customer"]
    return [t for t in texts if t]


def conversation_texts(
    subject: str | None, customer: Mapping[str, Any] | None, messages: Iterable[Mapping[str, Any]]
) -> list[str]:
    """What `screen` takes as the conversation: the subject, the customer's name and e-mail
    address, and the messages' bodies (internal notes left out: they are not for the customer)."""
    texts = [str(subject or "")]
    texts += [str((customer or {}).get(k) or "") for k in ("name", "email")]
    texts += [str(m.get("body") or "") for m in messages if m.get("author") != "note"]
    return [t for t in texts if t]
