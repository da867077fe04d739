"""Mail header values as the product uses them: one line, one sender (pure; no I/O).

Whoever writes to the support address writes its headers. A `From` may name two addresses, a
Subject or a display name may carry CR/LF (raw, or RFC 2047-encoded: `=?utf-8?q?=0D=0A?=`), and
any of it would reach the reply channel's payload or a reply's headers. Intake (the IMAP
poller, the drafter reading an `email.received` event) takes values only through here: a
header value is one line without control characters, and a sender is exactly one address, or
the mail is refused with the reason.
"""

from __future__ import annotations

import email.errors
import email.header
import email.policy
import re
from dataclasses import dataclass
from email.headerregistry import AddressHeader

MAX_NAME = 200  # characters of a display name kept
MAX_LINE = 998  # characters of a header line (RFC 5322's limit)

_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]+")
# an RFC 2047 encoded word, with the white space that joins it to a next one
_ENCODED_RUN = re.compile(r"=\?[^?\s]+\?[bBqQ]\?[^?\s]*\?=(?:\s+=\?[^?\s]+\?[bBqQ]\?[^?\s]*\?=)*")
# what an address this product replies to may look like: no space, quote, bracket or control
_ADDRESS = re.compile(r"[^\s\"(),:;<>@\[\\\]]+@[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?")

_SPECIALS = re.compile(r'[()<>@,;:\\".\[\]]')  # a display name with one of these is quoted


class HeaderError(ValueError):
    """A header value the product cannot use; the message says why."""


@dataclass(frozen=True)
class Sender:
    name: str  # one line; may be empty
    address: str  # as written (one line, one address)

    @property
    def normal(self) -> str:
        return normal_address(self.address)

    def formatted(self) -> str:
        """`"Name" <address>`, or the address alone: one line, read back as the same pair."""
        if not self.name:
            return self.address
        if not _SPECIALS.search(self.name):
            return f"{self.name} <{self.address}>"
        quoted = self.name.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{quoted}" <{self.address}>'


def single_line(value: object, limit: int = MAX_LINE) -> str:
    """A header value as one line: every run of control characters (CR, LF, tab, NUL…) becomes
    one space; at most `limit` characters."""
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    return " ".join(_CONTROL.sub(" ", text).split())[:limit]


def normal_address(address: str) -> str:
    """An address as participants are compared: no display name, no case, no spaces."""
    return address.strip().strip("<>").strip().lower()


def plain_address(value: object) -> bool:
    """Whether `value` is one address as written in a reply's recipient: no display name, no
    second address, no space or control character."""
    return isinstance(value, str) and _ADDRESS.fullmatch(value) is not None


def decoded(value: object, limit: int = MAX_LINE) -> str:
    """An unstructured header value (a Subject) with its encoded words decoded, as one line."""
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    return single_line(_ENCODED_RUN.sub(lambda m: _decode(m.group()), text), limit)


def sender(value: object) -> Sender:
    """The one sender a `From` value names; HeaderError if it names none, several, or one that
    is not a plain address."""
    raw = value if isinstance(value, str) else ""
    # encoded words decoded first (as quoted text), so that a CR/LF or a ':' inside one stays
    # inside the display name
    text = _ENCODED_RUN.sub(lambda m: _quoted(_decode(m.group())), single_line(raw))
    if not text:
        raise HeaderError("the mail has no From")
    try:
        parsed = email.policy.default.header_factory("from", text)
    except (ValueError, IndexError, TypeError):
        raise HeaderError("the mail's From cannot be read as an address") from None
    addresses = parsed.addresses if isinstance(parsed, AddressHeader) else ()
    if any(isinstance(d, email.errors.InvalidHeaderDefect) for d in parsed.defects):
        # the parser guessed (`a@b <c@d>` reads as a@b): a guess never names whom we answer
        raise HeaderError("the mail's From cannot be read as one address")
    if len(addresses) != 1:
        raise HeaderError(f"the mail's From names {len(addresses)} addresses, not one")
    (found,) = addresses
    address = single_line(found.addr_spec)
    if not _ADDRESS.fullmatch(address):
        raise HeaderError("the mail's From is not a plain address")
    return Sender(single_line(found.display_name, MAX_NAME), address)


def _decode(run: str) -> str:
    try:
        return str(email.header.make_header(email.header.decode_header(run)))
    except (LookupError, ValueError, UnicodeError, email.errors.HeaderParseError):
        return run


def _quoted(text: str) -> str:
    inner = single_line(text).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{inner}"'
