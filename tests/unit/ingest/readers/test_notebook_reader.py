"""The Jupyter notebook reader."""

from __future__ import annotations

import json

import pytest

from loader.ingest.readers.common import Rejected
from loader.ingest.readers.notebook import read_notebook


def notebook(cells, language="python") -> str:
    metadata = {"kernelspec": {"language": language, "name": "k"}}
    return json.dumps({"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5})


CELLS = [
    {"cell_type": "markdown", "source": ["# Refund analysis\n", "\n", "Why refunds happen."]},
    {"cell_type": "markdown", "source": "## Late orders\n\nOrders over 45 minutes."},
    {
        "cell_type": "code",
        "source": [
            "late = orders[orders.minutes > 45]\n",
            "\n",
            "def share(df):\n",
            "    return len(df) / len(orders)\n",
        ],
        "outputs": [{"output_type": "stream", "text": ["SECRET OUTPUT 0.12\n"]}],
    },  # fmt: skip
    {"cell_type": "raw", "source": "raw text"},
]


def test_markdown_cells_give_headings_and_code_cells_stay_whole():
    document = read_notebook(notebook(CELLS), "analysis.ipynb", "analysis")
    assert document.title == "Refund analysis"
    assert [s.heading_path for s in document.sections] == [(), ("Late orders",)]
    code = document.sections[1].blocks[1]
    assert code.kind == "code"
    assert code.text == (
        "```python\nlate = orders[orders.minutes > 45]\n\ndef share(df):\n"
        "    return len(df) / len(orders)\n```"
    )
    assert code.statement_lines == (1, 3, 4)
    texts = " ".join(s.text for s in document.sections)
    assert "SECRET OUTPUT" not in texts  # outputs are left out
    assert "raw text" in texts


def test_the_kernel_language_names_the_fence():
    cells = [{"cell_type": "code", "source": "println(1)", "outputs": []}]
    document = read_notebook(notebook(cells, language="scala"), "s.ipynb", "s")
    assert document.sections[0].blocks[0].text == "```scala\nprintln(1)\n```"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"cells": [', "not a Jupyter notebook: invalid JSON on line 1 column 12"),
        ("[1, 2]", "not a Jupyter notebook: no 'cells' list at the top level"),
        ('{"worksheets": []}', "nbformat 3 notebook"),
        ('{"cells": [{"cell_type": "code", "source": 3}]}', "cell 1: 'source' is neither"),
        ('{"cells": [{"cell_type": "code", "source": ""}]}', "no text found"),
        # json's RecursionError and its plain ValueError past the int-string limit were
        # "unexpected error: RecursionError: maximum recursion depth exceeded ..."
        ("[" * 100_000, "not a Jupyter notebook: invalid JSON: nested too deeply"),
        ('{"cells": [' + "9" * 5000 + "]}", "not a Jupyter notebook: invalid JSON: a number has"),
    ],
)
def test_broken_notebooks_are_refused_with_a_clear_reason(text, reason):
    with pytest.raises(Rejected) as caught:
        read_notebook(text, "broken.ipynb", "broken")
    assert caught.value.reason.startswith(reason)
