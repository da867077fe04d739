"""Mail header values as the product takes them: one line, one sender (shared.mail)."""

from __future__ import annotations

import pytest

from shared import mail


@pytest.mark.parametrize(
    ("value", "name", "address"),
    [
        ("Jane Doe <jane@example.com>", "Jane Doe", "jane@example.com"),
        ("jane@example.com", "", "jane@example.com"),
        ('"Doe, Jane" <jane@example.com>', "Doe, Jane", "jane@example.com"),
        ("=?utf-8?b?SmFuZQ==?= =?utf-8?b?IERvZQ==?= <j@example.com>", "Jane Doe", "j@example.com"),
        # an encoded CR/LF (and a ':' that would open a group) stays inside the display name
        (
            "=?utf-8?q?Eve=0D=0ABcc:_x@example.com?= <eve@example.com>",
            "Eve Bcc: x@example.com",
            "eve@example.com",
        ),
    ],
)
def test_a_from_gives_one_single_line_sender(value: str, name: str, address: str) -> None:
    sender = mail.sender(value)
    assert (sender.name, sender.address) == (name, address)
    assert "\r" not in sender.formatted() and "\n" not in sender.formatted()
    assert mail.sender(sender.formatted()) == sender  # written and read back: the same


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("jane@example.com, mallory@evil.example", "names 2 addresses"),
        ("Team: jane@example.com, mallory@evil.example;", "names 2 addresses"),
        ("a@example.com <mallory@evil.example>", "cannot be read as one address"),
        ("Eve\r\nBcc: x@example.com <eve@example.com>", "cannot be read as one address"),
        ("Jane <jane@exa\r\nmple.com>", "cannot be read as one address"),
        ("undisclosed-recipients:;", "names 0 addresses"),
        ("", "has no From"),
    ],
)
def test_a_from_that_is_not_one_plain_address_is_refused_saying_why(value: str, why: str) -> None:
    with pytest.raises(mail.HeaderError, match=why):
        mail.sender(value)


def test_values_are_one_line_and_addresses_compare_without_case_or_name() -> None:
    assert mail.single_line("Refund\r\nBcc: x@y\x00 now") == "Refund Bcc: x@y now"
    assert mail.decoded("=?utf-8?q?Hello=0D=0AX-Injected:_yes?=") == "Hello X-Injected: yes"
    assert mail.normal_address(" <Jane@Example.COM> ") == "jane@example.com"
    assert mail.plain_address("jane@example.com")
    assert not mail.plain_address("jane@example.com, mallory@evil.example")
    assert not mail.plain_address("jane@example.com\r\nBcc: x@y")
