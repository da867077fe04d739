"""Personal data in a text: where a customer's e-mail address, phone number, postal address,
bank, tax, card or order number, or name stands, and the text with each replaced by a typed
placeholder (`[email]`, `[phone]`, `[address]`, …).

The drafter keeps its examples of sent replies this way, so no customer's details reach another
customer's draft; the draft checks use the same spans to see details that came from nowhere in
the ticket. Patterns, not a model: they cover English, German, French, Spanish and Chinese
formats, lean towards finding too much (a placeholder where a detail was not costs an example
a word; a detail left in costs a customer their privacy), and leave prices, dates and times
alone where they can tell them apart. Names are only those the caller knows (the customer's).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

KINDS = (
    "email",
    "phone",
    "url",
    "address",
    "iban",
    "vat",
    "card",
    "order",
    "number",
    "name",
)


@dataclass(frozen=True)
class Span:
    kind: str
    start: int
    end: int
    text: str


# When two spans overlap the longer wins; of two as long, the more specific (higher) one.
_RANK = {
    "email": 9,
    "iban": 8,
    "card": 8,
    "url": 7,
    "vat": 7,
    "name": 6,
    "address": 5,
    "order": 4,
    "phone": 3,
    "number": 1,
}

_CJK = "\u3400-\u4dbf\u4e00-\u9fff"

# --- e-mail addresses and links ----------------------------------------------------------------

_EMAIL = re.compile(r"(?<![\w.%+-])[\w.%+-]+@[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,}(?![\w-])")

_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_DOT = r"(?:\.|\[\.\]|\(\.\)|\[dot\])"  # defanged dots as well: evil[.]com
_TAIL = r"(?::\d{1,5})?(?:[/?#][^\s<>\"'`]*)?"
_URL = re.compile(
    r"(?i)(?<![\w])(?:h(?:tt|xx|\*\*|XX)ps?|ftp|sftp|wss?)(?::|\[:\])//[^\s<>\"'`]+"
    r"|(?<![\w.])www\d?" + _DOT + r"[^\s<>\"'`]+"
)
_IP = re.compile(rf"(?<![\w.]){_OCTET}(?:{_DOT}{_OCTET}){{3}}(?![\w]|\.\d){_TAIL}")
_DOMAIN = re.compile(
    r"(?i)(?<![\w@.-])((?:[^\W_](?:[\w-]{0,61}[^\W_])?" + _DOT + r")+)"
    r"([a-z]{2,24})(?![\w-])(" + _TAIL + ")"
)
# Top-level domains that count without a path after them: the common generic ones and the
# country codes of the markets served; file extensions that are also country codes (.py, .sh,
# .md, .rs) stay out, unless a path follows (then any letters do).
_TLDS = frozenset(
    """com net org info biz edu gov mil int io ai app dev shop store online site xyz top link
    support help live tech cloud email club vip pro co me tv ly gl to cc eu asia mobi name
    de at ch fr be nl lu es pt it ie uk us ca au nz pl cz sk hu ro bg gr se no dk fi is ee lv
    lt ru ua by tr il ae sa in cn hk tw jp kr sg my th vn id ph br mx ar cl pe za ng ke eg ma
    """.split()
)
_TRAILING = ".,;:!?)]}'\""

# --- phone numbers -----------------------------------------------------------------------------

# Digit groups joined by one separator each (or a bracketed area code), so each text is read
# once; which of the candidates are phone numbers is decided in `_phones`.
_PHONE = re.compile(
    r"(?<![\w@+#&])(?<!\d[.,:/-])"
    r"(?:\+\s?|\(\s?\+?)?\d+\)?(?:(?:[ .\-/]|\s?\(\d+\)\s?|\)\s?)\d+)*"
    r"(?![\w@]|[.,:/-]\d)"
)
_PHONE_WORD = re.compile(
    r"(?i)(?:\b(?:tel|tél|phone|telephone|téléphone|teléfono|telefon|telefono|mobile|mobil"
    r"|handy|portable|móvil|movil|cell|fax|call|ring|anrufen|appelez|llame|llamar|whatsapp"
    r"|hotline|number|nummer|numéro|número)\b|电话|手机|联系方式|致电)[^\n\d+]{0,12}$"
)
_MONEY = re.compile(
    r"(?i)(?:[$€£¥₹]|\b(?:eur|euro|euros|usd|gbp|chf|cny|rmb|jpy|dollars?|pounds?|yuan)\b"
    r"|元|円)"
)
_DATE = re.compile(r"\d{1,4}([./-])\d{1,2}\1\d{1,4}|\d{4}[./-]\d{1,2}|\d{1,2}[./-]\d{4}")
_THOUSANDS = re.compile(r"[1-9]\d{0,2}([ .,'])\d{3}(?:\1\d{3})*")
_CN_MOBILE = re.compile(r"(?:\+?86[\s-]?)?1[3-9]\d[\s-]?\d{4}[\s-]?\d{4}")

# --- bank, card, tax and order numbers ---------------------------------------------------------

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

# --- postal addresses --------------------------------------------------------------------------

_UP = "A-ZÄÖÜÉÈÀÂÎÔÁÍÓÚÑÇ"
_WORD_UP = rf"[{_UP}][\w'’.-]*"
_STREET_EN = re.compile(
    rf"(?<![\w.,])\d{{1,5}}[A-Za-z]?,?\s+(?:{_WORD_UP}\s+){{0,3}}"
    r"(?:Street|St\.?|Road|Rd\.?|Avenue|Ave\.?|Lane|Ln\.?|Drive|Dr\.?|Boulevard|Blvd\.?|Way"
    r"|Court|Ct\.?|Place|Pl\.?|Square|Sq\.?|Terrace|Close|Crescent|Parkway|Highway|Hwy\.?"
    r"|Row|Mews|Gardens|Grove|Hill)(?![\w])"
    r"(?:,?\s+(?:Apt|Apartment|Suite|Unit|Flat|Floor|Fl)\.?\s*#?\w{1,5}(?![\w]))?"
)
_PO_BOX = re.compile(r"(?i)\b(?:P\.?\s?O\.?\s?Box|Postfach|Boîte postale|BP|Apartado)\s+\d{1,6}\b")
_STREET_DE = re.compile(
    rf"(?<![\w])(?:[{_UP}][\wäöüß-]*(?:straße|strasse|str\.|weg|gasse|platz|allee|damm|ufer"
    r"|chaussee|steig|pfad)"
    rf"|(?:[{_UP}][\wäöüß-]*\s)?(?:Straße|Strasse|Str\.|Weg|Gasse|Platz|Allee|Ring|Damm|Ufer))"
    r"\s*\d{1,4}\s?[a-zA-Z]?(?:\s?[-/]\s?\d{1,4}[a-z]?)?(?![\w])"
)
_FR_LINK = r"(?:(?:de la|de l'|de l’|du|des|de|d'|d’|la|le|les|l'|l’)\s*)"
_STREET_FR = re.compile(
    r"(?<![\w.,])\d{1,4}(?:\s?(?:bis|ter))?,?\s+"
    r"(?i:rue|avenue|av\.|boulevard|bd|place|chemin|allée|impasse|quai|route|cours|square"
    r"|passage)\s+"
    rf"{_FR_LINK}?{_WORD_UP}(?:\s+{_FR_LINK}?{_WORD_UP}){{0,3}}"
)
_ES_LINK = r"(?:(?:de la|de los|de las|del|de)\s+)"
_STREET_ES = re.compile(
    r"(?<![\w])(?i:calle|c/|avenida|avda\.?|av\.|plaza|pza\.?|paseo|camino|carrera|ronda"
    r"|travesía|carretera)\s*"
    rf"{_ES_LINK}?{_WORD_UP}(?:\s+{_ES_LINK}?{_WORD_UP}){{0,3}},?\s*(?:n[º°o]\.?\s*)?\d{{1,4}}"
    r"(?:,?\s*\d{1,3}[º°ª]?\s?[A-Z]?(?![\w]))?"
)
_STREET_CN = re.compile(
    rf"(?:[{_CJK}]{{1,8}}?(?:省|市|区|县|镇|乡))*[{_CJK}]{{1,10}}?(?:路|街|道|巷|大道|胡同|里)"
    rf"\d{{1,5}}号(?:[{_CJK}\d]{{0,10}}?\d{{1,5}}(?:室|楼|层|单元|号))*"
)
_TOWN = rf"[{_UP}][\wäöüßéèàçñ'’-]+(?:[ -](?:am|an|im|sur|en|de|del|la|le|{_WORD_UP}))?"
_POSTCODE_TOWN = re.compile(
    rf"(?<![\w.,-])(?:(?:D|F|E|I|CH|A|B|L|NL|DK)-\d{{4,5}}|\d{{5}})\s+(?P<town>{_TOWN})"
)
_NOT_TOWNS = frozenset(
    "eur euro euros usd dollar dollars gbp chf pounds yuan rmb cny punkte points stück items"
    " orders bestellungen tickets mal times".split()
)
_US_CITY_ZIP = re.compile(r"(?<![\w])[A-Z][a-z]+(?: [A-Z][a-z]+)?,\s?[A-Z]{2}\s\d{5}(?:-\d{4})?\b")
_UK_POSTCODE = re.compile(
    r"(?<![\w])(?:GIR ?0AA|[A-PR-UWYZ][A-HK-Y]?\d[A-Z\d]? ?\d[ABD-HJLNP-UW-Z]{2})(?![\w])"
)
_ADDRESSES = (
    _STREET_EN,
    _PO_BOX,
    _STREET_DE,
    _STREET_FR,
    _STREET_ES,
    _STREET_CN,
    _US_CITY_ZIP,
    _UK_POSTCODE,
)

# --- names -------------------------------------------------------------------------------------

_TITLES = frozenset(
    "mr mrs ms miss dr prof herr frau m mme mlle sr sra srta don doña sir madam".split()
)


def spans(text: str, *, names: Iterable[str] = ()) -> list[Span]:
    """The personal data in `text`, in order and not overlapping (of two that overlap, the
    longer, then the more specific). `names` are the names (and addresses) the caller knows
    belong to a person, e.g. the customer's."""
    found = list(_candidates(text, names))
    found.sort(key=lambda s: (-(s.end - s.start), -_RANK[s.kind], s.start))
    chosen: list[Span] = []
    taken = bytearray(len(text))
    for span in found:
        if any(taken[span.start : span.end]):
            continue
        taken[span.start : span.end] = b"\x01" * (span.end - span.start)
        chosen.append(span)
    chosen.sort(key=lambda s: s.start)
    return _joined(text, chosen)


def redact(text: str, *, names: Iterable[str] = ()) -> str:
    """`text` with each of its `spans` replaced by its kind in brackets: `[email]`, `[phone]`…"""
    parts: list[str] = []
    at = 0
    for span in spans(text, names=names):
        parts.append(text[at : span.start])
        parts.append(f"[{span.kind}]")
        at = span.end
    parts.append(text[at:])
    return "".join(parts)


def _candidates(text: str, names: Iterable[str]) -> Iterator[Span]:
    """Every span any pattern finds, overlapping; a pattern whose text cannot be there (no
    digit, no `@`, none of its words) is not run: most replies hold few of them."""

    def span(kind: str, start: int, end: int) -> Span:
        return Span(kind, start, end, text[start:end])

    if "@" in text:
        for m in _EMAIL.finditer(text):
            yield span("email", m.start(), m.end())
    yield from _links(text)
    yield from _names(text, names)
    if not _DIGIT.search(text):
        return  # everything below has a digit in it
    folded = text.casefold()
    yield from _phones(text)
    for m in _IBAN.finditer(text):
        compact = m.group().replace(" ", "")
        if 15 <= len(compact) <= 34 and sum(c.isdigit() for c in compact) >= 10:
            yield span("iban", m.start(), m.end())
    for m in _CARD.finditer(text):
        digits = [int(c) for c in m.group() if c.isdigit()]
        if _luhn(digits) or _CARD_GROUPED.fullmatch(m.group()):
            yield span("card", m.start(), m.end())
    for m in _VAT.finditer(text):
        compact = re.sub(r"[ .-]", "", m.group())
        if _VAT_SHAPES.fullmatch(compact):
            yield span("vat", m.start(), m.end())
    for m in _TAX_IDS.finditer(text):
        yield span("vat", m.start(), m.end())
    if any(word in folded for word in _TAX_WORDS):
        for m in _TAX_WORD.finditer(text):
            value = m.group("v").rstrip(" ./-")
            yield span("vat", m.start("v"), m.start("v") + len(value))
    for m in _ORDER_TOKEN.finditer(text):
        if sum(c.isdigit() for c in m.group()) >= 3:
            yield span("order", m.start(), m.end())
    if any(word in folded for word in _ORDER_WORDS):
        for m in _ORDER_WORD.finditer(text):
            yield span("order", m.start("v"), m.end("v"))
    for m in _NUMBER.finditer(text):
        yield span("number", m.start(), m.end())
    for pattern in _ADDRESSES:
        for m in pattern.finditer(text):
            yield span("address", m.start(), m.end())
    for m in _POSTCODE_TOWN.finditer(text):
        if m.group("town").casefold() not in _NOT_TOWNS:
            yield span("address", m.start(), m.end())


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
_DIGIT = re.compile(r"\d")


def _links(text: str) -> Iterator[Span]:
    folded = text.casefold()
    patterns = [_URL] if "//" in text or "www" in folded else []
    if _DIGIT.search(text):
        patterns.append(_IP)
    for pattern in patterns:
        for m in pattern.finditer(text):
            end = m.start() + len(m.group().rstrip(_TRAILING))
            yield Span("url", m.start(), end, text[m.start() : end])
    for m in _DOMAIN.finditer(text):
        tld, tail = m.group(2).lower(), m.group(3)
        if tld not in _TLDS and tail[:1] not in ("/", "?", "#"):
            continue
        end = m.start() + len(m.group().rstrip(_TRAILING))
        yield Span("url", m.start(), end, text[m.start() : end])


def _phones(text: str) -> Iterator[Span]:
    for m in _CN_MOBILE.finditer(text):
        if not _inside_word(text, m.start(), m.end()):
            yield Span("phone", m.start(), m.end(), m.group())
    for m in _PHONE.finditer(text):
        value = m.group().rstrip(" .-/")
        if value.startswith("(") and ")" not in value:
            value = value[1:]
        start = m.start() + m.group().find(value)
        end = start + len(value)
        if _is_phone(text, value, start, end):
            yield Span("phone", start, end, value)


def _is_phone(text: str, value: str, start: int, end: int) -> bool:
    digits = sum(c.isdigit() for c in value)
    if not 7 <= digits <= 15:
        return False
    before = text[max(0, start - 40) : start]
    after = text[end : end + 12]
    asked = bool(_PHONE_WORD.search(before))
    international = value.startswith(("+", "00", "(+"))
    separated = any(not c.isdigit() for c in value.lstrip("+"))
    if not separated:
        return international or (asked and digits >= 8)
    if _DATE.fullmatch(value) or _IP.fullmatch(value):
        return False
    if _MONEY.search(before[-6:]) or _MONEY.match(after.lstrip()):
        return False
    if not international and not asked and _THOUSANDS.fullmatch(value):
        return False  # 1 299 000, 12.500.000: an amount written in groups of thousands
    return True


def _inside_word(text: str, start: int, end: int) -> bool:
    """Part of a longer run of Latin letters or digits (Chinese text has no spaces to look for)."""
    return bool(
        (start > 0 and re.match(r"[A-Za-z0-9]", text[start - 1]))
        or (end < len(text) and re.match(r"[A-Za-z0-9]", text[end]))
    )


def _names(text: str, names: Iterable[str]) -> Iterator[Span]:
    whole: set[str] = set()
    parts: set[str] = set()
    for raw in names:
        name = " ".join(str(raw).split()).strip(" ,;<>\"'")
        if len(name) < 2:
            continue
        if "@" in name:
            for m in re.finditer(re.escape(name), text, re.IGNORECASE):
                yield Span("email", m.start(), m.end(), m.group())
            continue
        whole.add(name)
        for part in re.split(r"[\s,]+", name):
            part = part.strip(".")
            if len(part) >= 2 and part.casefold() not in _TITLES and not part.isdigit():
                parts.add(part)
    for name in whole:
        for m in _word(name, ignore_case=True).finditer(text):
            yield Span("name", m.start(), m.end(), m.group())
    for part in parts - whole:
        for m in _word(part, ignore_case=False).finditer(text):
            yield Span("name", m.start(), m.end(), m.group())


def _word(name: str, *, ignore_case: bool) -> re.Pattern[str]:
    """`name` as a whole word (Chinese, Japanese and Korean names are not between spaces)."""
    if re.search(f"[{_CJK}]", name):
        return re.compile(re.escape(name))
    if ignore_case:
        return re.compile(rf"(?<![\w]){re.escape(name)}(?![\w])", re.IGNORECASE)
    forms = {name, name[:1].upper() + name[1:], name.upper()}
    choice = "|".join(re.escape(f) for f in sorted(forms))
    return re.compile(rf"(?<![\w])(?:{choice})(?![\w])")


def _luhn(digits: list[int]) -> bool:
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return len(digits) >= 13 and total % 10 == 0


_BETWEEN = re.compile(rf"[\s,]{{0,4}}(?:{_TOWN}[\s,]{{1,4}})?")


def _joined(text: str, chosen: list[Span]) -> list[Span]:
    """Neighbouring address spans (street, then postcode and town, maybe with the town between)
    as one address."""
    joined: list[Span] = []
    for span in chosen:
        last = joined[-1] if joined else None
        if (
            last is not None
            and last.kind == span.kind == "address"
            and _BETWEEN.fullmatch(text[last.end : span.start])
        ):
            joined[-1] = Span("address", last.start, span.end, text[last.start : span.end])
        else:
            joined.append(span)
    return joined
