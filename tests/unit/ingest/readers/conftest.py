"""Files made by LibreOffice (headless, a private profile) once per test session.

LibreOffice writes what these readers must cope with, and what no hand-made file shows: PDFs
whose bookmarks name headings the extracted text spells differently (Hebrew comes out in visual
order), headings of one size and weight in two font families, a borderless table with a code block
right under it, and ``.docx`` packages whose core-properties relationship python-docx does not
recognise. Two conversions in all (one to PDF, one to ``.docx``); ``scripts/setup.sh`` installs
``pandoc`` and ``soffice``.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

HANDBOOK = """---
title: Café handbook
lang: en-GB
---

Welcome to the café handbook. It covers opening the café and the espresso machine.

# Opening procedures

Unlock the front door at seven. Switch on the grinder and let it warm up for ten minutes.

## Cash register

Count the float and record it in the ledger before the first customer arrives.

# Espresso machine

| Setting | Value | Notes |
| --- | --- | --- |
| Boiler pressure | 1.2 bar | check daily |
| Shot time | 25–30 s | taste test |

```python
def dial_in(grams_in, grams_out):
    ratio = grams_out / grams_in
    return round(ratio, 1)
```

# Emoji policy

Use emoji on the menu board only, never in text that customers read.

# עברית

יש לנקות את מכונת הקפה בכל ערב.

# Closing time

Clean the machine every evening before you lock the door.
"""
# The heading LibreOffice sets in another family than the other headings, at their size and weight.
SERIF_HEADING = "Emoji policy"
HANDBOOK_PATHS = [
    (),
    ("Opening procedures",),
    ("Opening procedures", "Cash register"),
    ("Espresso machine",),
    ("Emoji policy",),
    ("עברית",),
    ("Closing time",),
]

_FLAT_ODT = """<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"
 xmlns:dc="http://purl.org/dc/elements/1.1/"
 xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0"
 office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.text">
<office:meta>{meta}</office:meta>
<office:body><office:text>
<text:p>{intro}</text:p>
<text:h text:style-name="Heading_20_{level}" text:outline-level="{level}">{heading}</text:h>
<text:p>{body}</text:p>
</office:text></office:body></office:document>
"""


@dataclass(frozen=True)
class LibreOfficeFiles:
    handbook_pdf: Path  # HANDBOOK with bookmarks (LibreOffice's default PDF export)
    handbook_layout_pdf: Path  # the same PDF with its outline removed
    titled_docx: Path  # core title "Règles du café", language fr-FR, keywords "café, règles"
    untitled_docx: Path  # no core title, no Title paragraph, no Heading 1


def _tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is missing: scripts/setup.sh installs it (Debian)"
    return path


def _soffice(files: list[Path], outdir: Path, profile: Path, export: str) -> None:
    subprocess.run(
        [_tool("soffice"), f"-env:UserInstallation={profile.as_uri()}", "--headless",
         "--convert-to", export, "--outdir", str(outdir), *map(str, files)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    suffix = "." + export.split(":")[0]
    missing = [f.name for f in files if not (outdir / f.with_suffix(suffix).name).exists()]
    assert not missing, f"LibreOffice made no {suffix} of {missing}"


def _handbook_docx(folder: Path) -> Path:
    """HANDBOOK through pandoc, with SERIF_HEADING's runs set in DejaVu Serif (the other
    headings are DejaVu Sans)."""
    import docx

    markdown = folder / "handbook.md"
    markdown.write_text(HANDBOOK, encoding="utf-8")
    path = folder / "handbook.docx"
    subprocess.run([_tool("pandoc"), str(markdown), "-o", str(path)], check=True, timeout=60)
    document = docx.Document(str(path))
    heading = next(p for p in document.paragraphs if p.text == SERIF_HEADING)
    for run in heading.runs:
        run.font.name = "DejaVu Serif"
    document.save(str(path))
    return path


@pytest.fixture(scope="session")
def libreoffice_files(tmp_path_factory: pytest.TempPathFactory) -> LibreOfficeFiles:
    from pypdf import PdfWriter

    root = tmp_path_factory.mktemp("libreoffice")
    profile, sources, out = root / "profile", root / "sources", root / "out"
    sources.mkdir()
    _soffice([_handbook_docx(sources)], out, profile, "pdf")
    titled = sources / "rules.fodt"
    titled.write_text(
        _FLAT_ODT.format(
            meta="<dc:title>Règles du café</dc:title><dc:language>fr-FR</dc:language>"
            "<meta:keyword>café, règles</meta:keyword>",
            intro="Bienvenue au café.",
            level=1,
            heading="Ouverture",
            body="Ouvrir la porte à sept heures.",
        ),
        encoding="utf-8",
    )
    untitled = sources / "untitled-notes.fodt"
    untitled.write_text(
        _FLAT_ODT.format(
            meta="",
            intro="Notes without a title.",
            level=2,
            heading="Closing",
            body="Lock the door.",
        ),
        encoding="utf-8",
    )
    _soffice([titled, untitled], out, profile, "docx")  # LibreOffice's "Office Open XML Text"
    layout = PdfWriter(clone_from=out / "handbook.pdf")
    del layout.root_object["/Outlines"]
    with (out / "handbook-layout.pdf").open("wb") as handle:
        layout.write(handle)
    return LibreOfficeFiles(
        handbook_pdf=out / "handbook.pdf",
        handbook_layout_pdf=out / "handbook-layout.pdf",
        titled_docx=out / "rules.docx",
        untitled_docx=out / "untitled-notes.docx",
    )
