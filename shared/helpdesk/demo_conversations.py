"""The demo helpdesk's scripted conversations: each ticket's messages after the opening one,
written by the customer or by one of the shop's two support agents.

`demo` builds the tickets from them (see its docstring for the landmarks they make).
"""

from __future__ import annotations

from .base import AuthorKind

MAYA = "Maya Chen"  # the shop's support agents
OSKAR = "Oskar Lind"

# the messages after the opening one: ticket -> [(author, agent name, time, body)]; a
# customer's messages carry the customer's name
LATER_MESSAGES: dict[str, list[tuple[AuthorKind, str, str, str]]] = {
    "T1001": [
        ("agent", MAYA, "2026-10-12 11:30",
         "Hi Emma, I've switched your plan back to monthly. Should the refund of the difference "
         "go back to the card ending 4421?"),
        ("customer", "", "2026-10-13 08:05", "Yes, the card ending 4421 is fine. Thank you!"),
        ("agent", OSKAR, "2026-11-12 10:02",
         "The refund was issued today and should show on your statement within 5-10 business "
         "days. Could you let us know once you see it, so we can close this ticket?"),
    ],
    "T1003": [
        ("agent", MAYA, "2026-10-14 10:30",
         "Thanks for the report! Does it happen with every photo, or only with large ones? A "
         "screenshot of Settings > About would help too."),
        ("customer", "", "2026-11-18 15:20",
         "Only with photos over about 10 MB, small ones upload fine. It still crashes on 4.2.2, "
         "which I installed yesterday."),
    ],
    "T1004": [
        ("note", OSKAR, "2026-10-15 09:10",
         "The VAT number was added to the account on 10 October; INV-2026-0412 was generated "
         "before that. Finance has to reissue it by hand."),
        ("customer", "", "2026-11-14 09:45",
         "Any news on the corrected invoice? Our books close on Friday."),
    ],
    "T1006": [
        ("agent", MAYA, "2026-10-17 13:40",
         "Hi Lukas, we only see one payment for order #58213 on our side. The second one may be "
         "a card pre-authorisation that your bank releases within a few days."),
        ("customer", "", "2026-10-24 09:12",
         "It's been a week and both are still on my statement as completed payments."),
        ("agent", OSKAR, "2026-11-10 14:12",
         "Thanks for waiting. Could you send us a screenshot or PDF of the statement showing "
         "both payments? Then we can open a case with our payment provider."),
    ],
    "T1008": [
        ("agent", OSKAR, "2026-10-19 21:40",
         "Hi Mateus, we can reset two-factor login for you. For your security, please reply from "
         "the email address registered on the account and tell us the date of your last order."),
        ("customer", "", "2026-10-19 22:05",
         "Replying from my account address. My last order was on 2 October."),
        ("agent", MAYA, "2026-10-20 07:30",
         "Thank you, two-factor login is reset. Please log in and set up your authenticator "
         "again."),
        ("agent", MAYA, "2026-11-09 08:30",
         "Just checking in: were you able to log in again? If we don't hear back we'll close "
         "this ticket."),
    ],
    "T1009": [
        ("customer", "", "2026-11-11 10:11",
         "Just following up: I still need the receipt for the October 3rd payment for my expense "
         "report."),
    ],
    "T1011": [
        ("agent", MAYA, "2026-10-23 09:05",
         "Hi Fatima, your subscription is set to end with the current billing period. Would you "
         "like an export of your data before then?"),
    ],
    "T1014": [
        ("agent", OSKAR, "2026-10-26 09:20",
         "Sorry about that. Please open your authenticator app's settings, use 'Sync time for "
         "codes', and then try a fresh code."),
        ("customer", "", "2026-11-17 08:40",
         "I did the time sync and every code is still rejected. I'm on an iPhone with Google "
         "Authenticator."),
    ],
    "T1015": [
        ("note", MAYA, "2026-11-09 11:00",
         "Dark mode request passed to the product team (feature board card #212)."),
    ],
    "T1016": [
        ("agent", OSKAR, "2026-11-12 15:00",
         "Hi Tomás, sorry the mug arrived broken. The photos didn't come through with your "
         "message; could you reply with them attached so we can process the refund?"),
    ],
    "T1018": [
        ("agent", MAYA, "2026-10-29 18:20",
         "The lock lifts by itself after 24 hours, or straight away if you reset your password "
         "from the login page."),
        ("customer", "", "2026-10-30 07:55",
         "The reset worked, but now it asks for a two-factor code and I never set that up."),
        ("agent", OSKAR, "2026-11-10 09:15",
         "We've turned off the two-factor prompt on your account. Could you try logging in again "
         "and tell us whether it works?"),
    ],
    "T1019": [
        ("agent", MAYA, "2026-10-30 09:45",
         "Good question! I've asked our finance team whether receipts can be issued in JPY and "
         "will get back to you."),
        ("customer", "", "2026-11-16 10:00",
         "Any answer from finance yet? My next reimbursement claim is due at the end of the "
         "month."),
    ],
    "T1020": [
        ("customer", "", "2026-11-16 10:00",
         "Two weeks later and still no parcel. Can you send a replacement, please?"),
    ],
    "T1021": [
        ("agent", OSKAR, "2026-11-03 08:25",
         "Thanks, we can reproduce the crash. The fix is in version 4.3.1, which should reach "
         "the App Store today."),
        ("customer", "", "2026-11-19 07:50",
         "We all updated to 4.3.1 and the app still crashes right after the splash screen."),
    ],
    "T1022": [
        ("agent", MAYA, "2026-11-05 09:30",
         "Hi Hannah, one of the two charges is most likely a card check that your bank releases "
         "within a few days."),
        ("customer", "", "2026-11-13 08:02",
         "It's been more than a week and both charges are still there."),
    ],
    "T1023": [
        ("customer", "", "2026-11-15 11:30", "In case it helps, our GSTIN is 27AAPFU0939F1ZV."),
    ],
    "T1024": [
        ("agent", OSKAR, "2026-11-09 10:20",
         "Hi Élodie, you can change it under Settings > Profile > Login email. We'll send a "
         "confirmation link to the new address; could you let us know once it's done?"),
    ],
    "T1026": [
        ("agent", MAYA, "2026-11-09 16:10",
         "Refunds usually take 5-10 business days to reach your account, depending on your "
         "bank."),
        ("customer", "", "2026-11-10 09:01",
         "My bank says nothing is on its way. Can you send me a reference number for the "
         "refund?"),
    ],
    "T1027": [
        ("note", OSKAR, "2026-11-20 16:45",
         "Passed to the billing lead: the customer says the earlier messages went unanswered."),
    ],
    "T1029": [
        ("agent", MAYA, "2026-11-13 12:40",
         "Hi Nora, the November invoice is issued on 1 December and will appear on the billing "
         "page then. Is there anything else we can help with?"),
    ],
    "T1031": [
        ("customer", "", "2026-11-15 09:44",
         "Same thing with a second order today (#62911): the code was accepted and the total "
         "didn't change."),
    ],
    "T1034": [
        ("agent", OSKAR, "2026-11-18 14:05",
         "Happy to update it. Could you send us the company registration certificate with the "
         "new name?"),
        ("customer", "", "2026-11-19 08:05",
         "Attached is the certificate from Companies House with the new name."),
    ],
    "T1035": [
        ("customer", "", "2026-11-20 07:12",
         "Forgot to mention: the laptop runs Windows 11 and the phone is an iPhone 15."),
    ],
    "T1036": [
        ("agent", MAYA, "2026-11-20 15:30",
         "We can do that. Deleting the account removes all your data for good; please confirm "
         "that you want us to go ahead."),
        ("customer", "", "2026-11-21 10:30", "Yes, I confirm. Please delete everything."),
    ],
    "T1037": [
        ("customer", "", "2026-11-22 11:48",
         "My cancellation confirmation number is CN-4471, if that helps."),
    ],
    "T1039": [
        ("agent", OSKAR, "2026-11-24 16:40",
         "Sorry about that. Which browser and version are you using?"),
        ("customer", "", "2026-11-25 09:10",
         "Chrome 131 on a MacBook Air. It also happens in Safari."),
    ],
    "T1040": [
        ("agent", MAYA, "2026-11-26 08:55",
         "Glad you found it! I'm closing this ticket; just reply if you need anything else."),
    ],
}  # fmt: skip
