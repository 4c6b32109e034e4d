"""The reStructuredText reader on docutils' doctree."""

from __future__ import annotations

import logging
import re

import pytest

from loader.ingest.readers.common import Rejected
from loader.ingest.readers.rst import read_rst

DOC = """Refund policy
=============

:date: 2024-05-02
:tags: refunds, orders
:lang: en

Intro with a Sphinx role :ref:`late <late-deliveries>`.

Late deliveries
---------------

Orders **late** by more than 45 minutes are refunded.

- first item
- second item

  1. nested

.. code-block:: python

   refund(order)

Timelines
~~~~~~~~~

.. list-table::
   :header-rows: 1

   * - Method
     - Days
   * - UPI
     - 2

=======  =====
Method   Fee
=======  =====
Card     0
=======  =====

.. toctree::

   other
"""


def test_sections_blocks_and_docinfo(caplog):
    with caplog.at_level(logging.WARNING):
        document = read_rst(DOC, "refunds.rst", "refunds")
    assert document.title == "Refund policy"
    assert document.metadata == {"tags": ["refunds", "orders"], "lang": "en",
                                 "published": "2024-05-02"}  # fmt: skip
    assert [s.heading_path for s in document.sections] == [
        (),
        ("Late deliveries",),
        ("Late deliveries", "Timelines"),
    ]
    assert document.sections[0].blocks[0].text == "Intro with a Sphinx role late."
    late = document.sections[1].blocks
    assert [block.kind for block in late] == ["paragraph", "list", "code"]
    assert late[1].text == "- first item\n- second item\n  1. nested"
    assert late[2].text == "```python\nrefund(order)\n```"
    tables = [b.text for b in document.sections[2].blocks if b.kind == "table"]
    assert tables == [
        "| Method | Days |\n| --- | --- |\n| UPI | 2 |",
        "| Method | Fee |\n| --- | --- |\n| Card | 0 |",
    ]
    assert "read as plain text: ref, toctree" in caplog.text


# A grid table on lines 4 to 8 whose row on line 7 has no right border.
MALFORMED_TABLE = "Title\n=====\n\n+---+---+\n| a | b |\n+===+===+\n| 1 | 2\n+---+---+\n"
REFUSAL = re.compile(r"reStructuredText error on line (?P<line>\d+): (?P<reason>.+)")


def test_a_malformed_table_refuses_the_file_naming_the_line():
    """The reader's contract, not docutils' wording: docutils 0.19 names the table's first line
    ("Malformed table."), 0.23 the broken row and why ("... Right border not aligned or
    missing."); either way the file is refused, a line of the table is named and the reason says
    the table is malformed."""
    with pytest.raises(Rejected) as refused:
        read_rst(MALFORMED_TABLE, "bad.rst", "bad")
    named = REFUSAL.fullmatch(str(refused.value))
    assert named, refused.value
    assert 4 <= int(named["line"]) <= 8, refused.value
    assert "malformed table" in named["reason"].lower(), refused.value


def test_include_is_disabled(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("vault code 7731")
    with pytest.raises(Rejected):  # "include" directive disabled: a warning, then no text
        read_rst(f".. include:: {secret}\n", "x.rst", "x")


def test_a_date_that_is_not_iso_is_left_out_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        document = read_rst("Title\n=====\n\n:date: May 2024\n\nText.\n", "d.rst", "d")
    assert "published" not in document.metadata
    assert "d.rst: date 'May 2024' is not an ISO date" in caplog.text
