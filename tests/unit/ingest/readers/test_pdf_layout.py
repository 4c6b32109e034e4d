"""PDF layout and structure, pure: words placed by hand, as a PDF would give them."""

from __future__ import annotations

import itertools

from loader.documents import Block
from loader.ingest.readers.common import Heading
from loader.ingest.readers.pdf_layout import (
    Segment,
    TableRegion,
    Word,
    drop_running_lines,
    page_lines,
    reading_order,
)
from loader.ingest.readers.pdf_structure import StructureOutline, heading_ranks

BODY = "ABCDEF+DejaVuSerif"
BOLD = "ABCDEF+DejaVuSans-Bold"
SERIF_BOLD = "ABCDEF+DejaVuSerif-Bold"
MONO = "ABCDEF+DejaVuSansMono"
CHAR = 6.0  # the width of a character in these words


def words(text: str, x: float, top: float, size: float = 12, font: str = BODY, page: int = 1):
    """The words of one line of text, starting at ``x``."""
    placed = []
    for word in text.split():
        width = CHAR * len(word) * size / 12
        placed.append(Word(word, x, x + width, top, top + size, size, font, page))
        x += width + 3 * size / 12
    return placed


def column(lines: list[str], x: float, top: float, page: int = 1) -> list[Word]:
    return [w for i, line in enumerate(lines) for w in words(line, x, top + 14 * i, page=page)]


LEFT = [f"left line {n:02d} fills its column with words" for n in range(1, 9)]
RIGHT = [f"right line {n:02d} fills its column with words" for n in range(1, 9)]


def texts(items) -> list[str]:
    return [item.text if isinstance(item, Segment) else "TABLE" for item in items]


def test_two_columns_read_one_after_the_other():
    page = words("Courier handbook", 200, 60, size=18, font=BOLD)
    page += column(LEFT, 72, 100) + column(RIGHT, 330, 100)
    assert texts(reading_order(page_lines(page))) == ["Courier handbook", *LEFT, *RIGHT]


def test_a_borderless_table_keeps_its_rows_and_header():
    page = words("Payment method", 72, 100) + words("When the refund arrives", 270, 100)
    page += words("UPI", 72, 118) + words("Usually within 48 hours of", 270, 118)
    page += words("approval", 270, 132)  # a wrapped cell
    page += words("Card", 72, 150) + words("5 to 7 working days", 270, 150)
    page += words("Refunds reach the original payment method, as the table shows.", 72, 180)
    items = reading_order(page_lines(page))
    assert isinstance(items[0], TableRegion)
    assert items[0].rows == [
        ["Payment method", "When the refund arrives"],
        ["UPI", "Usually within 48 hours of approval"],
        ["Card", "5 to 7 working days"],
    ]
    assert texts(items[1:]) == ["Refunds reach the original payment method, as the table shows."]


def settings_table(top: float) -> list[Word]:
    """A borderless table of three columns, its rows 18 points apart from ``top``."""
    rows = [
        ("Setting", "Value", "Notes"),
        ("Pressure", "1.2 bar", "daily"),
        ("Shot", "25 s", "taste"),
    ]
    return [
        w
        for i, row in enumerate(rows)
        for x, cell in zip((72, 200, 330), row, strict=True)
        for w in words(cell, x, top + 18 * i)
    ]


SETTINGS = [
    ["Setting", "Value", "Notes"],
    ["Pressure", "1.2 bar", "daily"],
    ["Shot", "25 s", "taste"],
]


def test_a_code_block_right_under_a_borderless_table_is_no_row_of_it():
    """Code follows the last row more closely than the rows follow each other, and its first line
    fits the first column: set in a monospaced font the cells are not, it is no wrapped cell."""
    page = settings_table(100)
    page += words("import os", 72, 152, 11, MONO)
    page += words("def home():", 72, 165, 11, MONO)
    page += words("return os.getcwd()", 98, 178, 11, MONO)  # indented: no column edge
    items = reading_order(page_lines(page))
    assert isinstance(items[0], TableRegion) and items[0].rows == SETTINGS
    assert texts(items[1:]) == ["import os", "def home():", "return os.getcwd()"]


def test_a_short_line_across_the_columns_of_a_borderless_table_is_no_row_of_it():
    """A line right under a table that reaches over a gap between its columns is no wrapped cell,
    even though it leaves the last gap open."""
    page = settings_table(100) + words("Prices change twice a year.", 72, 152)
    items = reading_order(page_lines(page))
    assert isinstance(items[0], TableRegion) and items[0].rows == SETTINGS
    assert texts(items[1:]) == ["Prices change twice a year."]


def test_running_headers_footers_and_page_numbers_are_dropped():
    pages, heights = [], []
    for number in (1, 2, 3):
        page = words("QuickBite handbook internal", 72, 30, page=number)
        page += column([f"Body text of page {number} that is read."] * 3, 72, 100, page=number)
        page += words(f"Page {number} of 3", 72, 760, page=number)
        pages.append(page_lines(page))
        heights.append(792.0)
    kept, dropped = drop_running_lines(pages, heights)
    assert dropped == 6
    assert [[segment.text for line in lines for segment in line] for lines in kept] == [
        [f"Body text of page {number} that is read."] * 3 for number in (1, 2, 3)
    ]


def test_a_line_near_the_edge_inside_the_body_is_kept():
    """A body line that happens to reach the bottom zone is no footer: no gap sets it apart."""
    pages = [page_lines(column([f"Same words on page {n}."] * 3, 72, 700, page=n)) for n in (1, 2)]
    kept, dropped = drop_running_lines(pages, [792.0, 792.0])
    assert dropped == 0 and kept == pages


def structure(*lines: tuple[str, float, float, str]) -> tuple[str | None, list]:
    """Events of one page of (text, top, size, font) lines."""
    placed = [w for text, top, size, font in lines for w in words(text, 72, top, size, font)]
    return StructureOutline([reading_order(page_lines(placed))]).events()


def test_headings_by_size_and_weight_title_and_numbering():
    title, events = structure(
        ("Courier handbook", 60, 20, BOLD),
        ("Couriers deliver food quickly and safely to every customer", 100, 12, BODY),
        ("who orders through the app, in every city.", 114, 12, BODY),
        ("Starting a shift", 140, 16, BOLD),
        ("Open the app and tap start before you leave the hub.", 166, 12, SERIF_BOLD),
        ("Check the bag before every order and keep it clean, dry", 180, 12, BODY),
        ("and closed.", 194, 12, BODY),
        ("Bags", 220, 14, BOLD),
        ("2.3 Cleaning the bag", 246, 12, BODY),
        ("Wipe the bag with a damp cloth every evening, then let", 272, 12, BODY),
        ("it dry.", 286, 12, BODY),
    )
    assert title == "Courier handbook"
    heads = [(e.level, e.text) for e in events if isinstance(e, Heading)]
    # The bold line under "Starting a shift" ends like a sentence: text, not a heading.
    assert heads == [(1, "Starting a shift"), (2, "Bags"), (2, "2.3 Cleaning the bag")]


def test_a_bold_line_inside_a_paragraph_is_not_a_heading():
    _, events = structure(
        ("Payouts are made every Monday for the orders of the previous", 100, 12, BODY),
        ("week, see Payouts and Deductions", 114, 12, BOLD),
        ("Payouts are held when bank details fail verification checks.", 144, 12, BODY),
    )
    assert not any(isinstance(e, Heading) for e in events)


def test_lists_code_and_paragraphs():
    _, events = structure(
        ("Steps to follow:", 100, 12, BODY),
        ("1. Check that you have a working internet connection.", 124, 12, BODY),
        ("2. Update the app to the latest version from your app", 140, 12, BODY),
        ("store.", 154, 12, BODY),
        ("adb logcat -d -s QuickBite:V", 180, 11, MONO),
        ("Send the file to support.", 204, 12, BODY),
    )
    assert events == [
        Block("paragraph", "Steps to follow:", 1),
        Block(
            "list",
            "1. Check that you have a working internet connection.\n"
            "2. Update the app to the latest version from your app store.",
            1,
        ),
        Block("code", "```\nadb logcat -d -s QuickBite:V\n```", 1),
        Block("paragraph", "Send the file to support.", 1),
    ]


def test_heading_ranks_are_a_total_order_without_the_family():
    styles = [
        (14.0, True, "DejaVuSans"),
        (16.0, False, "DejaVuSerif"),
        (14.0, True, "DejaVuSerif"),
        (16.0, True, "DejaVuSans"),
        (14.0, False, "DejaVuSans"),
    ]
    expected = {(16.0, True): 1, (16.0, False): 2, (14.0, True): 3, (14.0, False): 4}
    for order in itertools.permutations(styles):
        assert heading_ranks(order) == expected


def test_headings_in_two_font_families_are_one_level_and_one_heading():
    """A CJK heading set in a fallback font is the level of its neighbours, and a heading whose
    wrapped line is in another family stays one heading."""
    _, events = structure(
        ("Opening procedures", 100, 16, BOLD),
        ("Unlock the front door at seven and switch on the grinder first.", 126, 12, BODY),
        ("日本語のセクション", 152, 16, SERIF_BOLD),
        ("Clean the espresso machine every evening before closing.", 178, 12, BODY),
        ("Closing time and the steps", 204, 16, BOLD),
        ("に従ってください", 222, 16, SERIF_BOLD),
        ("Lock the door and switch off the lights before you leave.", 248, 12, BODY),
    )
    heads = [(e.level, e.text) for e in events if isinstance(e, Heading)]
    assert heads == [
        (1, "Opening procedures"),
        (1, "日本語のセクション"),
        (1, "Closing time and the steps に従ってください"),
    ]


def test_an_unmatched_bookmark_takes_the_layout_heading_styled_like_the_matched_ones():
    """The outline names "Rückerstattung", the page shows "Refunds" (another text layer): that
    heading, styled like the matched entries', takes the entry; the smaller one stays text."""
    from loader.ingest.readers.pdf import _outline_marks

    lines = [
        ("Orders", 100, 16, BOLD),
        ("Orders are packed at the hub and handed to the courier.", 126, 12, BODY),
        ("Refunds", 152, 16, BOLD),
        ("Refunds reach the original payment method within days.", 178, 12, BODY),
        ("Card refunds", 204, 14, BOLD),
        ("A card refund takes five to seven working days to arrive.", 230, 12, BODY),
        ("Couriers", 256, 16, BOLD),
        ("Couriers pick the orders up at the hub counter.", 282, 12, BODY),
    ]
    placed = [w for text, top, size, font in lines for w in words(text, 72, top, size, font)]
    outline = StructureOutline([reading_order(page_lines(placed))])
    entries = [(0, 1, "Orders"), (0, 1, "Rückerstattung"), (0, 1, "Couriers")]  # page, level
    marks = _outline_marks(outline, entries)
    heads = [(e.level, e.text) for e in outline.blocks(marks) if isinstance(e, Heading)]
    assert heads == [(1, "Orders"), (1, "Rückerstattung"), (1, "Couriers")]


def test_a_heading_wrapped_after_a_hyphen_joins_without_a_space():
    # A bookmark-less PDF gave "app- config.yaml" for a heading wrapped at its hyphen.
    _, events = structure(
        ("Editing the dynamic plugins app-", 100, 16, BOLD),
        ("config.yaml file", 118, 16, BOLD),
        ("Open the file and add the plugin entry, then restart the pods.", 150, 12, BODY),
        ("Step 2 - Restart", 180, 16, BOLD),
        ("Restart every pod of the instance after the change is saved.", 206, 12, BODY),
    )
    heads = [e.text for e in events if isinstance(e, Heading)]
    assert heads == ["Editing the dynamic plugins app-config.yaml file", "Step 2 - Restart"]
