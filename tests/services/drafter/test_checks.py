"""The check for reviewers' words in a draft: a reply that repeats a reviewer's feedback or a
standing instruction, verbatim or nearly, is flagged (and the item carries the warning), in
any language; a reply that follows the instruction, or shares a short common phrase with it,
is not."""

from __future__ import annotations

import pytest

from services.drafter import Deps, checks, close_model, writer
from shared.settings import DrafterSettings
from standins.llm import FakeLLM

FOLLOW_UP = "Do not write 'we will follow up…'; say when we will reply."


def reply(*body: str) -> str:
    return "\n\n".join(["Hi Jane,", *body, "Best regards,\nThe Support Team"])


@pytest.mark.parametrize(
    ("draft", "feedback"),
    [
        # the offline model's old habit: the instruction pasted as the reply's last paragraph
        (reply("We have passed it on.", "Do not write 'we will follow up…'."), [FOLLOW_UP]),
        # nearly: case, punctuation and one word changed
        (
            reply("mention that the invoice with our VAT number is attached"),
            ["Mention that the invoice with the VAT number is attached."],
        ),
        # inside a longer sentence of the reply
        (
            reply("Thanks. As requested: please apologise for the delay in processing the refund."),
            ["Please apologise for the delay in processing the refund."],
        ),
        (
            reply("Vielen Dank. Schreiben Sie nicht, dass wir uns später melden werden."),
            ["Schreiben Sie nicht, dass wir uns später melden werden."],
        ),
        (
            reply("Merci. Dites au client que le remboursement prend cinq jours ouvrés."),
            ["Dites au client que le remboursement prend cinq jours ouvrés."],
        ),
        (
            "李娜，您好：\n\n请不要写我们会尽快跟进这个问题。\n\n此致\n客服团队",
            ["请不要写我们会尽快跟进这个问题。"],
        ),
    ],
)
def test_a_reply_repeating_feedback_is_flagged(draft: str, feedback: list[str]) -> None:
    [warning] = checks.repeated_guidance(draft, feedback)
    assert "repeats a reviewer's feedback" in warning


@pytest.mark.parametrize(
    ("draft", "feedback"),
    [
        # followed: the words it asked for, without the asking
        (
            reply("The invoice with the VAT number is attached."),
            ["Say that the invoice with the VAT number is attached."],
        ),
        (reply("We will reply by Friday."), [FOLLOW_UP]),
        (
            reply("Die Rechnung mit der Umsatzsteuer-ID ist beigefügt."),
            ["Schreiben Sie, dass die Rechnung mit der Umsatzsteuer-ID beigefügt ist."],
        ),
        (
            reply("Le remboursement prend cinq jours ouvrés."),
            ["Dites que le remboursement prend cinq jours ouvrés."],
        ),
        (
            "您好：\n\n发票已经附上，请查收。\n\n此致\n客服团队",
            ["请告诉客户发票已经附上，请查收。"],
        ),
        # short common phrases shared with the feedback
        (reply("Thank you for your patience."), ["Thank you for your patience."]),
        (reply("Sorry for the trouble."), ["Sign as The Support Team.", "Sorry for the trouble."]),
        ("您好：\n\n感谢您的来信。\n\n此致", ["感谢您的来信。"]),
        # the reviewer quoting the draft: the draft is not quoting the reviewer
        (
            reply("We will follow up on it in this conversation."),
            ["'We will follow up on it in this conversation' is too vague: give a date."],
        ),
        # the words asked for at the start of the reply
        (
            reply("Thank you for getting in touch with us."),
            ["Start with: Thank you for getting in touch with us."],
        ),
    ],
)
def test_a_reply_following_feedback_is_not_flagged(draft: str, feedback: list[str]) -> None:
    assert checks.repeated_guidance(draft, feedback) == []


def test_a_standing_instruction_is_named_as_such() -> None:
    standing = "Always tell the customer the exact date the refund was issued."
    [warning] = checks.repeated_guidance(reply(standing), [], [standing])
    assert "repeats a standing instruction" in warning


async def test_the_item_warns_when_the_model_pastes_feedback(fake_llm: FakeLLM) -> None:
    """The stand-in model quotes the reviewers' lines under "Following your notes:" (a model
    that pastes instead of following): the draft goes to review with the warning."""
    settings = DrafterSettings(llm_base_url=fake_llm.url, llm_model="m")
    deps = Deps.configured(settings, source=None)  # type: ignore[arg-type]
    ticket = {
        "id": "T1",
        "subject": "Refund",
        "body": "Where is my refund?",
        "customer": {"name": "Jane"},
        "messages": [{"id": "T1-m1", "author": "customer", "body": "Where is my refund?"}],
    }
    asked = writer.Asked(
        feedback=[FOLLOW_UP],
        instructions={"refund": ["Always give the date the refund was confirmed on."]},
    )
    try:
        written = await writer.write(deps, ticket, {"messages": ["T1-m1"]}, asked)
    finally:
        await close_model(deps.model)
    assert written.draft is not None and FOLLOW_UP in written.draft.reply
    repeated = [w for w in written.problems if "repeats" in w]
    assert len(repeated) == 2, written.problems
    assert "a reviewer's feedback" in repeated[0] and "a standing instruction" in repeated[1]
