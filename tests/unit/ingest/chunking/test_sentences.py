from __future__ import annotations

import pytest

from loader.ingest.chunking import split_sentences


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("One. Two! Three? Four.", ["One. ", "Two! ", "Three? ", "Four."]),
        ("Dr. Rao signed it. It is valid.", ["Dr. Rao signed it. ", "It is valid."]),
        ("Use a card, e.g. Visa. Or UPI.", ["Use a card, e.g. Visa. ", "Or UPI."]),
        ("Pay now, i.e. Today. Fine.", ["Pay now, i.e. Today. ", "Fine."]),
        ("Shipped to the U.S. Army base. Done.", ["Shipped to the U.S. Army base. ", "Done."]),
        ("See order No. 44821 now. Thanks.", ["See order No. 44821 now. ", "Thanks."]),
        ("It costs 4.5 rupees. Cheap.", ["It costs 4.5 rupees. ", "Cheap."]),
        ("Apples, pears, etc. and more.", ["Apples, pears, etc. and more."]),
        ('He said "Stop." Then left.', ['He said "Stop." ', "Then left."]),
        ("- first item\n- second item", ["- first item\n", "- second item"]),
        ("no ending punctuation", ["no ending punctuation"]),
    ],
)
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "  Leading space. Trailing space.  ",
        "Line one.\n\nLine two.\n  indented.\tTab. Done!!  What?!\n",
        "Mr. A. B. Smith paid $4.50 at 9 a.m. on Jan. 5. Then he left... Really.",
    ],
)
def test_joining_gives_the_text_back(text: str) -> None:
    assert "".join(split_sentences(text)) == text
