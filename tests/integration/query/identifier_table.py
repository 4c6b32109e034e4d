"""A generated Markdown table of error codes whose rows look alike to an embedding model.

Every row is ``| code | meaning | action |`` with a code from one of four families (``R-2207``,
``E1043``, ``PAY-0042``, ``SYNC_118``); meanings and actions are drawn from one small vocabulary,
so the table's chunks (the chunker splits it between rows and repeats the header in each piece)
are near neighbours on the vector side and only the code tells the right chunk from the others.
The same seed gives the same table.
"""

from __future__ import annotations

import random

SUBJECTS = ["payment", "refund", "card", "order", "invoice", "transfer", "wallet", "account"]
PROBLEMS = [
    "was declined by the bank",
    "timed out at the gateway",
    "failed the fraud check",
    "is waiting for confirmation",
    "was reversed by the issuer",
    "exceeded the daily limit",
    "has an invalid reference",
    "was submitted twice",
]
PHASES = ["during checkout", "at settlement", "after capture", "while syncing", "on renewal"]
ACTIONS = [
    "retry the payment after five minutes",
    "ask the customer to use another card",
    "contact the bank and quote the reference",
    "refund the order from the dashboard",
    "wait for the nightly settlement run",
    "escalate to the payments team",
]
FAMILIES = ["R-{:04d}", "E{:04d}", "PAY-{:04d}", "SYNC_{:03d}"]


def error_codes(rows: int, seed: int = 18) -> list[str]:
    """``rows`` distinct codes, the four families interleaved (``R-2207``, ``E1043`` ...)."""
    chooser = random.Random(seed)
    codes: list[str] = []
    while len(codes) < rows:
        family = FAMILIES[len(codes) % len(FAMILIES)]
        code = family.format(chooser.randrange(10, 999 if "SYNC" in family else 9999))
        if code not in codes:
            codes.append(code)
    return codes


def error_code_table(rows: int = 60, seed: int = 18) -> tuple[str, list[str]]:
    """A Markdown document with one table of ``rows`` error codes, and the codes in row order.

    ``R-2207`` is always one of them (the issue's example question).
    """
    chooser = random.Random(seed)
    codes = error_codes(rows, seed)
    if "R-2207" not in codes:
        codes[rows // 3] = "R-2207"
    lines = [
        "---",
        "title: Payment error codes",
        "---",
        "# Payment error codes",
        "",
        "Every error the payment service reports, what it means and what support should do.",
        "",
        "| code | meaning | action |",
        "|---|---|---|",
    ]
    for code in codes:
        meaning = (
            f"The {chooser.choice(SUBJECTS)} {chooser.choice(PROBLEMS)} {chooser.choice(PHASES)}"
        )
        lines.append(f"| {code} | {meaning} | {chooser.choice(ACTIONS).capitalize()} |")
    return "\n".join(lines) + "\n", codes
