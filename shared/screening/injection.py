"""What the customer wrote addressed to the model rather than to us (`steering`): "ignore the
previous instructions", "REPEAT CONVERSATION", `CATEGORY=…`, prompt tags such as
`</ticket><system>`, in English, German, French, Spanish and Chinese.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .text import nfkc

_TAGS = "system|assistant|user|developer|ticket|conversation|knowledge|examples|instructions"
_STEERING = re.compile(
    "|".join(
        (
            # English
            r"\b(?:ignore|disregard|forget|override)\b.{0,30}\b(?:previous|prior|above|earlier|"
            r"all|your|the|any)\b.{0,20}\b(?:instructions?|prompts?|rules|directions|guidelines)\b",
            r"\brepeat\s+(?:the\s+|all\s+|your\s+)?(?:examples?|conversation|prompt|"
            r"everything|system)\b|\brepeat\s+your\s+instructions\b",
            r"\b(?:system|developer)\s+(?:prompt|message|instructions?)\b",
            r"\bcategory\s*[=:]\s*[a-z]+",
            r"\b(?:you are now|from now on you|act as (?:an?|the) (?:ai|assistant|model)|"
            r"new instructions?|jailbreak|developer mode|dan mode)\b",
            r"\badd this link\b|\bask (?:me |them |the customer )?for (?:the |my |their )?"
            r"(?:card|password|pin|cvv)",
            r"\b(?:as|to) (?:the|an?) (?:ai|language model|llm)\b",
            # prompt markup
            r"</?\s*(?:" + _TAGS + r")\s*>",
            r"<\|im_(?:start|end)\|>|\[/?INST\]|<<SYS>>",
            # German, French, Spanish
            r"\b(?:ignorier|vergiss)\w*\b.{0,30}\b(?:anweisungen|instruktionen|vorgaben|regeln)\b",
            r"\b(?:ignore[zr]?|oublie[zr]?)\b.{0,30}\b(?:instructions|consignes|règles)\b",
            r"\b(?:ignora|olvida)\w*\b.{0,30}\b(?:instrucciones|indicaciones|reglas)\b",
        )
    ),
    re.IGNORECASE | re.DOTALL,
)
_STEERING_ZH = (
    "忽略之前",
    "忽略以上",
    "忽略所有",
    "忽略前面",
    "无视之前",
    "系统提示",
    "重复所有",
    "提示词",
)


def steering(texts: Iterable[str]) -> list[str]:
    """What in the customer's `texts` is addressed to the model, each once, in order: a ticket
    that tries to instruct the model is answered by a person, whatever the draft says."""
    found: list[str] = []
    for text in texts:
        plain = nfkc(text)
        found += [" ".join(m.group(0).split())[:60] for m in _STEERING.finditer(plain)]
        found += [word for word in _STEERING_ZH if word in plain]
    return list(dict.fromkeys(found))
