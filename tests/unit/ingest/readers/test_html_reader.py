"""HTML: page furniture dropped, pre and tables kept, sloppy and deep HTML survive."""

from __future__ import annotations

from pathlib import Path

from loader.ingest.readers import read_document


def read(tmp_path: Path, html: str, name: str = "page.html"):
    path = tmp_path / name
    path.write_text(html, encoding="utf-8")
    return read_document(path, tmp_path, 10_000_000)


PAGE = """<!DOCTYPE html><html lang="en"><head>
<title>Delivery areas | QuickBite</title>
<style>.x { color: red }</style><script>var secret = "script text";</script>
</head><body>
<header><a href="/">Home</a><nav><a>Orders</a> <a>Payments</a></nav></header>
<h1>Delivery areas</h1>
<p>We deliver   within
   8 km &amp; more.</p>
<h2>Fees</h2>
<table><thead><tr><th>Distance</th><th>Fee</th></tr></thead>
<tbody><tr><td>Up to 3 km</td><td>25 rupees</td></tr>
<tr><td>3 to 6 km</td><td>40 | 45</td></tr></tbody></table>
<h3>Surge</h3><p>Rain adds a fee.</p>
<pre><code class="language-bash">curl -s https://api.example/fees
  | jq .surge</code></pre>
<ul><li>Airports are excluded.</li><li>Gates are fine<ol><li>inner</li></ol></li></ul>
<aside>Related articles</aside><noscript>Enable JS</noscript><template><p>hidden</p></template>
<footer>Copyright</footer>
</body></html>"""


def test_html_structure_and_dropped_furniture(tmp_path: Path) -> None:
    doc = read(tmp_path, PAGE)
    assert doc.title == "Delivery areas"
    assert doc.metadata == {"lang": "en"}
    assert [s.heading_path for s in doc.sections] == [(), ("Fees",), ("Fees", "Surge")]
    assert [(b.kind, b.text) for b in doc.sections[0].blocks] == [
        ("paragraph", "We deliver within 8 km & more.")
    ]
    assert doc.sections[1].blocks[0].kind == "table"
    assert doc.sections[1].blocks[0].text == (
        "| Distance | Fee |\n| --- | --- |\n| Up to 3 km | 25 rupees |\n| 3 to 6 km | 40 \\| 45 |"
    )
    surge = [(b.kind, b.text) for b in doc.sections[2].blocks]
    assert surge == [
        ("paragraph", "Rain adds a fee."),
        ("code", "```bash\ncurl -s https://api.example/fees\n  | jq .surge\n```"),
        ("list", "- Airports are excluded.\n- Gates are fine\n  1. inner"),
    ]
    everything = "\n".join(s.text for s in doc.sections)
    for dropped in (
        "Home",
        "Orders",
        "script text",
        "color",
        "Related",
        "Enable JS",
        "hidden",
        "Copyright",
    ):
        assert dropped not in everything


def test_malformed_html_still_yields_text(tmp_path: Path) -> None:
    doc = read(
        tmp_path,
        "<title>Broken</title><p>First <b>bold</p><p>Second</div></span><li>stray item"
        "<table><tr><td>cell</table><h2>Heading without end<p>After heading",
    )
    text = "\n".join(s.text for s in doc.sections)
    for expected in ("First bold", "Second", "stray item", "cell", "After heading"):
        assert expected in text
    assert "Secondstray" not in text
    assert doc.sections[-1].heading_path == ("Heading without end",)


def test_very_deep_nesting_does_not_crash(tmp_path: Path) -> None:
    depth = 5000
    doc = read(tmp_path, "<div>" * depth + "<p>Deep text.</p>" + "</div>" * depth, name="deep.htm")
    assert doc.sections[0].text == "Deep text."
    unclosed = read(tmp_path, "<span><div>" * depth + "Unclosed text.", name="unclosed.html")
    assert unclosed.sections[0].text == "Unclosed text."


def test_title_tag_wins_when_it_is_not_the_h1(tmp_path: Path) -> None:
    doc = read(tmp_path, "<title>Help centre</title><h1>Payments</h1><p>Text.</p>")
    assert doc.title == "Help centre"
    assert doc.sections[0].heading_path == ("Payments",)
