"""What the offline model knows of each category: the words that pick it, what the team does
next, and what the team needs from the customer (none of it policy: times, outcomes and
eligibility come only from an offered passage of the knowledge base)."""

from __future__ import annotations

import re

_KEYWORDS: list[tuple[str, tuple[str, ...]]] = [
    (
        "refund",
        (
            *("refund", "money back", "reimburse"),
            *("rückerstattung", "remboursement", "reembolso", "退款", "退钱"),
        ),
    ),
    (
        "invoice",
        ("invoice", "receipt", "vat", "tax id", "rechnung", "facture", "factura", "发票", "收据"),
    ),
    (
        "billing",
        (
            "charged twice",
            "double charge",
            "duplicate charge",
            "charged",
            "payment",
            "billing",
            "overcharge",
            "subscription fee",
            "cancel",
            "discount",
            "coupon",
            "promo code",
            "checkout",
            "débité",
            "扣款",
            "扣费",
        ),
    ),
    (
        "account",
        (
            "password",
            "log in",
            "login",
            "sign in",
            "locked out",
            "2fa",
            "two-factor",
            "account access",
            "verification code",
            "delete my account",
            "my account deleted",
            "konto",
            "compte",
            "账号",
            "密码",
            "登录",
        ),
    ),
    (
        "bug",
        (
            "error",
            "crash",
            "bug",
            "broken",
            "doesn't work",
            "does not work",
            "not working",
            "fails",
            "failed",
            "export",
            "freez",
            "invit",
            "崩溃",
            "错误",
        ),
    ),
]

# What the team does next, per category: no policy (no times, outcomes or eligibility), only
# who looks at it. A draft states a policy only as an offered passage of the knowledge base does.
NEXT = {
    "refund": "I have passed your request to our billing team, who will review it and reply to "
    "you here.",
    "billing": "I have asked our billing team to check the payments on your account; we will "
    "reply here as soon as they have.",
    "invoice": "I have asked our billing team to look into your invoice; we will reply here once "
    "they have.",
    "bug": "I have shared your description with our engineering team, who are looking into it.",
    "account": "I have passed your request to our account team, who will look into it.",
    "other": "I have passed your message to the right team, who will look into it and reply here.",
}
# What the team needs, per category: (what says it is given already, the question). None: ask
# nothing.
_ASK: dict[str, tuple[re.Pattern[str] | None, str] | None] = {
    "refund": (
        re.compile(r"#\s?\d{3,}|\border\s+(?:no\.?\s*|number\s+)?\d{3,}", re.I),
        "Could you send us the order number, so that we can find the payment?",
    ),
    "billing": (
        re.compile(r"#\s?\d{3,}|\border\s+(?:no\.?\s*|number\s+)?\d{3,}", re.I),
        "Could you send us the order number and the date of the payment?",
    ),
    "invoice": (
        re.compile(r"\bINV-[\w-]+", re.I),
        "Could you send us the invoice number and the details the invoice should show?",
    ),
    "bug": (
        re.compile(r"\b(?:v(?:ersion)?\s?)?\d+\.\d+(?:\.\d+)?\b", re.I),
        "Could you tell us the app version and the device or browser you use, and the steps "
        "that lead to the problem?",
    ),
    "account": (
        None,
        "So that we can check it is you, please reply from the email address registered on "
        "your account.",
    ),
    "other": None,
}
_BUG_DETAILS = "If you see an error message, a screenshot of it would help us."


def classify(text: str) -> str:
    lowered = text.lower()
    for category, words in _KEYWORDS:
        if any(word in lowered for word in words):
            return category
    return "other"


def needs(category: str, said: str) -> list[str]:
    """What the team needs from the customer, unless they said it already."""
    ask = _ASK[category]
    if ask is None:
        return []
    given, question = ask
    if given is not None and given.search(said):
        return [_BUG_DETAILS] if category == "bug" else []
    return [question]
