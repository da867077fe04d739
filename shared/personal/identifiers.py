"""Bank, card, tax and order numbers in a text (`find`): IBANs, card numbers (Luhn-checked or
grouped as cards are), VAT numbers and tax IDs by their national shapes or the word before
them, order numbers by their shape or the word before them, and long runs of digits.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .span import Span

_IBAN = re.compile(r"(?<![\w])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![\w])")
_CARD = re.compile(r"(?<![\w.,-])\d(?:[ -]?\d){12,18}(?![\w]|[.,-]\d)")
_CARD_GROUPED = re.compile(r"\d{4}([ -])\d{4}\1\d{4}\1\d{1,7}")
_VAT_SHAPES = re.compile(
    r"ATU\d{8}|BE[01]\d{9}|BG\d{9,10}|CY\d{8}[A-Z]|CZ\d{8,10}|DE\d{9}|DK\d{8}|EE\d{9}|EL\d{9}"
    r"|ES[A-Z0-9]\d{7}[A-Z0-9]|FI\d{8}|FR[A-HJ-NP-Z0-9]{2}\d{9}|HR\d{11}|HU\d{8}"
    r"|IE\d[A-Z0-9+*]\d{5}[A-Z]{1,2}|IT\d{11}|LT\d{9}(?:\d{3})?|LU\d{8}|LV\d{11}|MT\d{8}"
    r"|NL\d{9}B\d{2}|PL\d{10}|PT\d{9}|RO\d{2,10}|SE\d{12}|SI\d{8}|SK\d{10}"
    r"|(?:GB|XI)(?:\d{9}|\d{12}|GD\d{3}|HA\d{3})|CHE\d{9}(?:MWST|TVA|IVA)?|NO\d{9}(?:MVA)?"
)
_VAT = re.compile(
    r"(?<![\w])(?:ATU|CHE|[A-Z]{2})[ -]?\d[\dA-Z]*(?:[ .-]\d[\dA-Z]*)*(?:[ ]?(?:MWST|TVA|IVA|MVA))?"
    r"(?![\w])"
)
# Spanish NIF/DNI, NIE and CIF; China's unified social credit code (18 characters, letters in it)
_TAX_IDS = re.compile(
    r"(?<![\w])(?:\d{8}-?[A-HJ-NP-TV-Z]|[XYZ]-?\d{7}-?[A-Z]|[ABCDEFGHJNPQRSUVW]\d{7}[0-9A-J]"
    r"|(?=[0-9A-Z]*[A-Z])[0-9A-HJ-NPQRTUWXY]{2}\d{6}[0-9A-HJ-NPQRTUWXY]{10})(?![\w])"
)
_TAX_WORD = re.compile(
    r"(?i)(?:\b(?:vat|ust-?id(?:nr)?|ust\.?-?id\.?-?nr|uid|tva|iva|nif|cif|nie|dni|steuer-?nummer"
    r"|steuer-?nr|steuer-?id|tax\s?id|tin|siren|siret)\b|税号|纳税人识别号|统一社会信用代码)"
    r"\.?\s*(?:(?:no|nr|n[°º]|number|nummer|número|intracom(?:munautaire)?)\.?\s*)?[:#]?\s*"
    r"(?P<v>[A-Z]{0,3}\d(?:[./-]?[0-9A-Z]|\s(?=\d)){5,18})"
)
_ORDER_TOKEN = re.compile(
    r"(?<![\w&])#\d{3,}(?![\w])"
    r"|(?<![\w-])[A-Z]{2,6}[-_/#]?\d{3,}(?:[-_/][A-Z0-9]{2,})*(?![\w])"
    r"|(?<![\w-])[A-Z]{2,6}(?:[-_/][A-Z0-9]*\d[A-Z0-9]*){1,3}(?![\w])"
)
_ORDER_WORD = re.compile(
    r"(?i)(?:\b(?:order|orders|invoice|ticket|case|ref|reference|booking|tracking|shipment"
    r"|parcel|contract|customer|account|bestellung|bestellnummer|rechnung|rechnungsnummer"
    r"|auftrag|auftragsnummer|sendung|sendungsnummer|kundennummer|vertrag|commande|facture"
    r"|dossier|colis|contrat|pedido|factura|reserva|envío|envio|contrato|cliente)\b"
    r"|订单号?|发票号?|运单号?|快递单号|工单号?|客户号)"
    r"\.?\s*(?:(?:no|nr|n[°º]|number|nummer|número|num|id)\.?\s*)?[:#]?\s*(?:号码?|编号)?[:：]?\s*"
    r"(?P<v>#?(?=[A-Z0-9-]*\d{3})[A-Z0-9][A-Z0-9-]{2,}(?![\w]))"
)
_NUMBER = re.compile(r"\d{17}[\dXx](?![\w])|\d{6,}")

# what `_TAX_WORD` and `_ORDER_WORD` need one of (case-folded), cheaper to look for than they are
_TAX_WORDS = (
    "vat",
    "ust",
    "uid",
    "tva",
    "iva",
    "nif",
    "cif",
    "nie",
    "dni",
    "steuer",
    "tax",
    "tin",
    "siren",
    "siret",
    "税号",
    "纳税人",
    "信用代码",
)
_ORDER_WORDS = (
    "order",
    "invoice",
    "ticket",
    "case",
    "ref",
    "booking",
    "tracking",
    "shipment",
    "parcel",
    "contract",
    "customer",
    "account",
    "bestell",
    "rechnung",
    "auftrag",
    "sendung",
    "kunden",
    "vertrag",
    "commande",
    "facture",
    "dossier",
    "colis",
    "contrat",
    "pedido",
    "factura",
    "reserva",
    "env",
    "cliente",
    "订单",
    "发票",
    "运单",
    "快递单号",
    "工单",
    "客户号",
)


def find(text: str) -> Iterator[Span]:
    """The bank, card, tax and order numbers in `text`, and its long runs of digits."""
    folded = text.casefold()
    for m in _IBAN.finditer(text):
        compact = m.group().replace(" ", "")
        if 15 <= len(compact) <= 34 and sum(c.isdigit() for c in compact) >= 10:
            yield Span("iban", m.start(), m.end(), m.group())
    for m in _CARD.finditer(text):
        digits = [int(c) for c in m.group() if c.isdigit()]
        if _luhn(digits) or _CARD_GROUPED.fullmatch(m.group()):
            yield Span("card", m.start(), m.end(), m.group())
    for m in _VAT.finditer(text):
        compact = re.sub(r"[ .-]", "", m.group())
        if _VAT_SHAPES.fullmatch(compact):
            yield Span("vat", m.start(), m.end(), m.group())
    for m in _TAX_IDS.finditer(text):
        yield Span("vat", m.start(), m.end(), m.group())
    if any(word in folded for word in _TAX_WORDS):
        for m in _TAX_WORD.finditer(text):
            value = m.group("v").rstrip(" ./-")
            yield Span("vat", m.start("v"), m.start("v") + len(value), value)
    for m in _ORDER_TOKEN.finditer(text):
        if sum(c.isdigit() for c in m.group()) >= 3:
            yield Span("order", m.start(), m.end(), m.group())
    if any(word in folded for word in _ORDER_WORDS):
        for m in _ORDER_WORD.finditer(text):
            yield Span("order", m.start("v"), m.end("v"), m.group("v"))
    for m in _NUMBER.finditer(text):
        yield Span("number", m.start(), m.end(), m.group())


def _luhn(digits: list[int]) -> bool:
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return len(digits) >= 13 and total % 10 == 0
