"""Personal data in a text: where a customer's e-mail address, phone number, postal address,
bank, tax, card or order number, or name stands, and the text with each replaced by a typed
placeholder (`[email]`, `[phone]`, `[address]`, …).

The drafter keeps its examples of sent replies this way, so no customer's details reach another
customer's draft; the draft checks use the same spans to see details that came from nowhere in
the ticket. Patterns, not a model: they cover English, German, French, Spanish and Chinese
formats, lean towards finding too much (a placeholder where a detail was not costs an example
a word; a detail left in costs a customer their privacy), and leave prices, dates and times
alone where they can tell them apart. Names are only those the caller knows (the customer's).

`redaction` finds and replaces, with the patterns of `contacts` (e-mail addresses, links, phone
numbers), `identifiers` (bank, card, tax and order numbers), `addresses` and `people` (names);
`span` is what each finds.
"""

from .redaction import redact, spans
from .span import KINDS, Span

__all__ = ["KINDS", "Span", "redact", "spans"]
