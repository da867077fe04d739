"""The reviewers' instructions the offline model can follow (feedback, and the standing
instructions of the category it picks). It follows them, never quotes them: an instruction is
for the drafter, the reply is for the customer. Others are left out, and the summary says so.
"""

from __future__ import annotations

import re

SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")


def sentence(text: str) -> str:
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?。！？" else text + "."


_PLEASE = r"^(?:(?:please|also|and|then)\s+)*"
_DONT = re.compile(
    _PLEASE + r"(?:do\s+not|don't|dont|never|avoid|stop|no\s+more)\s+"
    r"(?:(?:write|say|use|mention|promise|include)(?:ing)?\s+)?(?P<what>.+)",
    re.I,
)
_SAY = re.compile(
    _PLEASE + r"(?:say|mention|write|add|state|explain|tell\s+(?:the\s+customer|them|him|her)"
    r"|let\s+(?:the\s+customer|them|him|her)\s+know)\s*(?:\bthat\b|:)\s*(?P<what>.+)",
    re.I,
)
_ASK_FOR = re.compile(
    _PLEASE + r"ask\s+(?:the\s+customer\s+|them\s+|him\s+|her\s+)?"
    r"(?:(?P<how>for|to\s+send(?:\s+us)?|whether|if)\s+)(?P<what>.+)",
    re.I,
)
_SORRY = re.compile(r"\bapologi[sz]e|\bsay\s+sorry\b|\bapology\b", re.I)
_SHORTER = re.compile(
    r"\bshorter\b|\bconcise\b|\btoo\s+long\b|\bbe\s+brief\b|\bkeep\s+it\s+short", re.I
)
_FORMAL = re.compile(r"\bmore\s+formal\b|\bformally\b", re.I)
_QUOTED = re.compile(r"[\"“”'‘’«]([^\"“”‘’«»]{3,}?)[\"“”'’»]")
_THIRD_PERSON = [
    (re.compile(r"\bthe customer's\b", re.I), "your"),
    (re.compile(r"\bthe customer\b", re.I), "you"),
    (re.compile(r"\b(?:they|he|she)\s+(?:are|is)\b", re.I), "you are"),
    (re.compile(r"\b(?:they|he|she|them|him)\b", re.I), "you"),
    (re.compile(r"\b(?:their|his)\b", re.I), "your"),
]
SORRY = "I am sorry for the trouble this has caused."


def _to_customer(text: str) -> str:
    """An instruction's words about the customer as words to the customer."""
    for pattern, words in _THIRD_PERSON:
        text = pattern.sub(words, text)
    return text.strip().rstrip(".!;,")


def _without(paragraphs: list[str], phrase: str) -> list[str]:
    """`paragraphs` (after the greeting) without the sentences that contain `phrase`."""
    wanted = " ".join(phrase.lower().split())
    kept = paragraphs[:1]
    for paragraph in paragraphs[1:]:
        sentences = [
            s for s in SENTENCE_END.split(paragraph) if wanted not in " ".join(s.lower().split())
        ]
        if sentences:
            kept.append(" ".join(sentences))
    return kept


def guided(paragraphs: list[str], guidance: list[str], name: str) -> tuple[list[str], list[str]]:
    """The reply's paragraphs (greeting first, no closing yet) with what it can follow of
    `guidance` done, and the instructions it could not follow."""
    declined = []
    for text in guidance:
        for clause in (c.strip() for c in re.split(r"(?<=[.;!?])\s+|\n+", text) if c.strip()):
            dont, say, ask = _DONT.match(clause), _SAY.match(clause), _ASK_FOR.match(clause)
            if dont:
                quoted = _QUOTED.findall(clause)
                phrases = quoted or [dont.group("what")]
                for phrase in phrases:
                    phrase = phrase.strip().rstrip(".!;,").removesuffix("…").removesuffix("...")
                    paragraphs = _without(paragraphs, phrase)
            elif say:
                added = sentence(_to_customer(say.group("what")))
                if added and added not in paragraphs:
                    paragraphs = [*paragraphs, added]
            elif ask:
                what = _to_customer(ask.group("what"))
                how = ask.group("how").lower()
                question = (
                    f"Could you tell us {how} {what}?"
                    if how in ("whether", "if")
                    else f"Could you send us {what}?"
                )
                paragraphs = [*paragraphs, question]
            elif _SORRY.search(clause):
                if SORRY not in paragraphs:
                    paragraphs = [paragraphs[0], SORRY, *paragraphs[1:]]
            elif _SHORTER.search(clause):
                paragraphs = paragraphs[:1] + [
                    SENTENCE_END.split(p)[0] for p in paragraphs[1:] if p != SORRY
                ]
            elif _FORMAL.search(clause):
                paragraphs = [f"Dear {name},", *paragraphs[1:]]
            else:
                declined.append(clause)
    return paragraphs, declined
