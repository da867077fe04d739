"""Personal data found and replaced: what keeps one customer's details out of another's draft."""

from __future__ import annotations

import itertools

import pytest

from shared.personal import Span, redact, spans


def kinds(text: str, **kw: object) -> list[tuple[str, str]]:
    return [(s.kind, s.text) for s in spans(text, **kw)]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # e-mail addresses, links, bare domains, defanged links, IP addresses
        (
            "write to anna.schmidt+shop@example.co.uk today",
            [("email", "anna.schmidt+shop@example.co.uk")],
        ),
        ("reset at evil-support.com/reset now", [("url", "evil-support.com/reset")]),
        ("see hxxps://evil.example/login.", [("url", "hxxps://evil.example/login")]),
        ("https://shop.example.com/orders?id=4", [("url", "https://shop.example.com/orders?id=4")]),
        ("log in at secure-bank[.]com", [("url", "secure-bank[.]com")]),
        ("the server 203.0.113.7:8080/admin", [("url", "203.0.113.7:8080/admin")]),
        ("visit www.example.org.", [("url", "www.example.org")]),
        # phone numbers, several countries
        ("call +49 30 1234 5678", [("phone", "+49 30 1234 5678")]),
        ("ruf an: 0171 2345678", [("phone", "0171 2345678")]),
        ("Tel. 030/1234567", [("phone", "030/1234567")]),
        ("+49 (0)30 12345678", [("phone", "+49 (0)30 12345678")]),
        ("(555) 123-4567", [("phone", "(555) 123-4567")]),
        ("call 1-800-555-0199", [("phone", "1-800-555-0199")]),
        ("appelez le 06 12 34 56 78", [("phone", "06 12 34 56 78")]),
        ("+33 1 23 45 67 89", [("phone", "+33 1 23 45 67 89")]),
        ("llame al +34 612 345 678", [("phone", "+34 612 345 678")]),
        ("手机13812345678，谢谢", [("phone", "13812345678")]),
        ("电话 010-12345678", [("phone", "010-12345678")]),
        ("+86 138 1234 5678", [("phone", "+86 138 1234 5678")]),
        # postal addresses
        (
            "I live at 12 Baker Street, London NW1 6XE.",
            [("address", "12 Baker Street, London NW1 6XE")],
        ),
        ("ship to 221B Baker St. please", [("address", "221B Baker St.")]),
        ("Hauptstraße 5, 10115 Berlin", [("address", "Hauptstraße 5, 10115 Berlin")]),
        ("Berliner Straße 12a", [("address", "Berliner Straße 12a")]),
        ("15 rue de la Paix, 75002 Paris", [("address", "15 rue de la Paix, 75002 Paris")]),
        ("Calle Mayor 12, 28013 Madrid", [("address", "Calle Mayor 12, 28013 Madrid")]),
        ("Springfield, IL 62704", [("address", "Springfield, IL 62704")]),
        ("寄到朝阳区建国路88号", [("address", "寄到朝阳区建国路88号")]),
        # bank, card, tax and order numbers, long digit runs
        ("IBAN DE89 3704 0044 0532 0130 00", [("iban", "DE89 3704 0044 0532 0130 00")]),
        ("GB82WEST12345698765432", [("iban", "GB82WEST12345698765432")]),
        ("card 4111 1111 1111 1111", [("card", "4111 1111 1111 1111")]),
        ("card 4111111111111111.", [("card", "4111111111111111")]),
        ("USt-IdNr.: DE123456789", [("vat", "DE123456789")]),
        ("TVA FR40303265045", [("vat", "FR40303265045")]),
        ("ATU12345678 and NL123456789B01", [("vat", "ATU12345678"), ("vat", "NL123456789B01")]),
        ("NIF 12345678Z", [("vat", "12345678Z")]),
        ("信用代码 91350100M000100Y43", [("vat", "91350100M000100Y43")]),
        ("ORD-12345", [("order", "ORD-12345")]),
        ("invoice INV-2024-0042", [("order", "INV-2024-0042")]),
        ("ticket #48213", [("order", "#48213")]),
        ("Bestellung 4821", [("order", "4821")]),
        ("commande n° 482133", [("order", "482133")]),
        ("订单号：20240115001", [("order", "20240115001")]),
        ("customer 1234567", [("order", "1234567")]),
        ("身份证110101199003071234", [("number", "110101199003071234")]),
        ("reference code 88812345 ok", [("number", "88812345")]),
    ],
)
def test_personal_data_is_found(text: str, expected: list[tuple[str, str]]) -> None:
    assert kinds(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Refunds are paid within 5 working days, usually 3-5.",
        "Your parcel ships on 2024-12-07 10:30 or 07/12/2026 at 9:15.",
        "Die Lieferung kommt am 7.12.2026 zwischen 8 und 12 Uhr. Preis 1.234,50 €.",
        "Le remboursement de 49,90 € arrive sous 5 à 7 jours ouvrés, le 15/01/2025.",
        "El reembolso de 1.299,00 € llega en 3-5 días hábiles.",
        "退款将在3-5个工作日内到账，金额为1299元。",
        "Total: 12.345,67 EUR, 1,299.00 USD, ¥3000, 2 x 49,99 €, 100%.",
        "We refunded EUR 1 299 000 and 20.000 points within 24-48 hours.",
        "Update to version 3.2.1 on Windows 11; see ISO 8601, e.g. main.py or readme.md.",
        "Open 09:00-17:00, Mon-Fri. COVID-19, H264, Spring 2024. Bring 5 items.",
    ],
)
def test_prices_dates_times_and_versions_stay(text: str) -> None:
    assert spans(text) == []
    assert redact(text) == text


def test_redacted_with_typed_placeholders() -> None:
    text = (
        "Hi Anna, I am Anna Schmidt (anna@example.com, +49 30 1234 5678), Hauptstraße 5, "
        "10115 Berlin. Order ORD-12345, IBAN DE89 3704 0044 0532 0130 00, card "
        "4111 1111 1111 1111, VAT DE123456789, account 99887766. Reset at evil.com/reset"
    )

    redacted = redact(text, names=["Anna Schmidt"])

    assert redacted == (
        "Hi [name], I am [name] ([email], [phone]), [address]. Order [order], IBAN [iban], "
        "card [card], VAT [vat], account [order]. Reset at [url]"
    )
    assert redact(redacted, names=["Anna Schmidt"]) == redacted  # a second pass changes nothing


def test_names_only_those_given() -> None:
    text = "Dear Mr. Wang, 王伟 wrote; Will Smith will call. SCHMIDT and schmidt."

    assert redact(text) == text
    assert redact(text, names=["Mr. Wang", "王伟", "Will Smith", "Schmidt"]) == (
        "Dear [name], [name] wrote; [name] will call. [name] and [name]."
    )
    assert redact("Thanks, Jo!", names=["Jo Lee"]) == "Thanks, [name]!"
    # parts of a name match as written (capitalised), the whole name in any case
    assert redact("we will see; WILL SMITH", names=["Will Smith"]) == "we will see; [name]"


def test_an_address_given_as_a_name_is_an_email() -> None:
    assert kinds("from Jane.Doe@Example.com", names=["jane.doe@example.com"]) == [
        ("email", "Jane.Doe@Example.com")
    ]


def test_spans_are_ordered_and_do_not_overlap() -> None:
    text = "mail a@b.de or see https://b.de/x?mail=a@b.de, phone +1 555 123 4567, ORD-99999"

    found = spans(text)

    assert [s.kind for s in found] == ["email", "url", "phone", "order"]
    assert all(a.end <= b.start for a, b in itertools.pairwise(found))
    assert all(text[s.start : s.end] == s.text for s in found)
    assert isinstance(found[0], Span)


def test_a_long_hostile_text_is_read_quickly() -> None:
    import time

    text = ("1" * 5000 + " ") * 4 + "+49 " * 2000 + "a.b." * 3000 + "@" * 2000
    started = time.monotonic()
    spans(text)
    assert time.monotonic() - started < 2.0
