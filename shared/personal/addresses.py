"""Postal addresses in a text (`find`): streets in English, German, French, Spanish and Chinese
formats, post boxes, postcodes with their town, US and UK postcodes; and neighbouring parts of
one address joined into one (`joined`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .span import CJK, Span

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
    rf"(?:[{CJK}]{{1,8}}?(?:省|市|区|县|镇|乡))*[{CJK}]{{1,10}}?(?:路|街|道|巷|大道|胡同|里)"
    rf"\d{{1,5}}号(?:[{CJK}\d]{{0,10}}?\d{{1,5}}(?:室|楼|层|单元|号))*"
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


def find(text: str) -> Iterator[Span]:
    """The postal addresses in `text`, part by part (`joined` makes one of neighbours)."""
    for pattern in _ADDRESSES:
        for m in pattern.finditer(text):
            yield Span("address", m.start(), m.end(), m.group())
    for m in _POSTCODE_TOWN.finditer(text):
        if m.group("town").casefold() not in _NOT_TOWNS:
            yield Span("address", m.start(), m.end(), m.group())


_BETWEEN = re.compile(rf"[\s,]{{0,4}}(?:{_TOWN}[\s,]{{1,4}})?")


def joined(text: str, chosen: list[Span]) -> list[Span]:
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
