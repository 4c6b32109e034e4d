"""The heading prefix's budget: the innermost heading first, then the title, then the other
headings from the inside out; the whole trail stays on the chunk (fit_prefix, stored_trail,
make_frame).

Most tests count words (each ``>`` and ``…`` is one), so the budgets can be checked by hand; the
last ones use the real MiniLM tokenizer on a path as deep as a product guide's.
"""

from __future__ import annotations

from loader.documents import PATH_SEPARATOR, Block, Document, Section
from loader.ingest.chunking import ChunkingConfig, chunk_document
from loader.ingest.chunking.limits import ELLIPSIS, MAX_PREFIX_SHARE, fit_prefix, stored_trail

TITLE = "Admin guide"
PATH = ("Setup steps", "Network config", "Proxy", "Certificates")
# "Admin guide > Setup steps > Network config > Proxy > Certificates": 12 words.


def words(text: str) -> int:
    return len(text.split())


def test_a_path_that_fits_is_the_whole_trail() -> None:
    assert fit_prefix(TITLE, PATH, 12, 1000, words) == PATH_SEPARATOR.join((TITLE, *PATH))
    assert fit_prefix("SciFact title", (), 12, 1000, words) == "SciFact title"


def test_outer_headings_are_dropped_first() -> None:
    # 9 words: the title and the two innermost headings (8), not the third (11).
    assert fit_prefix(TITLE, PATH, 9, 1000, words) == "Admin guide > … > Proxy > Certificates"
    # 7 words: the title and the innermost heading only.
    assert fit_prefix(TITLE, PATH, 7, 1000, words) == "Admin guide > … > Certificates"


def test_the_title_gives_way_when_it_does_not_fit_beside_the_innermost() -> None:
    title = "The very long complete administration guide of the product"  # 9 words
    assert fit_prefix(title, PATH, 6, 1000, words) == "… > Proxy > Certificates"
    assert fit_prefix(title, PATH, 3, 1000, words) == "… > Certificates"


def test_only_an_innermost_heading_that_alone_does_not_fit_is_cut() -> None:
    inner = "How to renew every certificate of the proxy before it expires"  # 11 words
    prefix = fit_prefix(TITLE, (*PATH[:-1], inner), 6, 1000, words)
    assert prefix == "How to renew every certificate of" + ELLIPSIS
    assert words(prefix) <= 6


def test_a_title_alone_over_the_budget_keeps_its_first_words() -> None:
    title = " ".join(f"word{i}" for i in range(40))
    prefix = fit_prefix(title, (), 10, 1000, words)
    assert prefix.startswith("word0 word1") and prefix.endswith(ELLIPSIS)
    assert words(prefix) <= 10


def test_one_enormous_word_is_cut_by_characters() -> None:
    def characters(text: str) -> int:  # a tokenizer that sees every character
        return len(text)

    prefix = fit_prefix(TITLE, ("x" * 500,), 20, 1000, characters)
    assert prefix == "x" * 19 + ELLIPSIS


def test_the_character_cap_holds_for_a_huge_heading_line() -> None:
    huge = "h" * 2_000_000
    prefix = fit_prefix(TITLE, (huge, "Inner"), 60, 1000, words)
    assert prefix == "Admin guide > … > Inner"
    prefix = fit_prefix(TITLE, ("Outer", huge), 60, 1000, words)
    assert len(prefix) <= 1000 and prefix.startswith("hhhh") and prefix.endswith(ELLIPSIS)


def test_the_stored_trail_is_whole_unless_absurd() -> None:
    assert stored_trail(TITLE, PATH, 4000) == (TITLE, PATH)
    title, path = stored_trail(TITLE, ("h" * 2_000_000, "Inner"), 4000)
    assert (title, path[1]) == (TITLE, "Inner")
    assert len(PATH_SEPARATOR.join((title, *path))) <= 4000
    assert path[0].startswith("hhhh") and path[0].endswith(ELLIPSIS)


# --- with the real tokenizer ---------------------------------------------------------------------

GUIDE_TITLE = "Northwind Fleet Telematics Gateway Administrator and Integration Guide"
GUIDE_PATH = (
    "Part III: Deploying the gateway in customer-managed cloud environments",
    "Chapter 12: Networking, proxies and outbound connectivity requirements",
    "12.4 Configuring an authenticating HTTP proxy for telemetry uploads",
    "12.4.3 Troubleshooting certificate pinning failures behind TLS-inspecting proxies",
)


def guide_document() -> Document:
    body = "Add the proxy's root certificate to the gateway trust store and restart the uploader."
    return Document("gateway.md", GUIDE_TITLE, [Section(GUIDE_PATH, [Block("paragraph", body)])])


def test_a_deep_guide_path_keeps_the_innermost_heading_and_the_whole_trail(count_tokens) -> None:
    config = ChunkingConfig()  # all-MiniLM-L6-v2: 254 tokens, the prefix a quarter of them
    cap = config.max_tokens // MAX_PREFIX_SHARE
    assert count_tokens(PATH_SEPARATOR.join((GUIDE_TITLE, *GUIDE_PATH))) > cap  # the premise

    (chunk,) = chunk_document(guide_document(), config, count_tokens)

    assert (chunk.title, chunk.heading_path) == (GUIDE_TITLE, GUIDE_PATH)
    assert chunk.prefix == PATH_SEPARATOR.join((GUIDE_TITLE, ELLIPSIS, *GUIDE_PATH[-2:]))
    assert count_tokens(chunk.prefix) <= cap
    assert chunk.text == f"{chunk.prefix}\n\n{chunk.body}"
    assert ELLIPSIS not in chunk.title + "".join(chunk.heading_path)


def test_every_strategy_keeps_the_whole_trail(count_tokens, embed) -> None:
    from loader.ingest.chunking import STRATEGIES

    for strategy in STRATEGIES:
        config = ChunkingConfig(strategy=strategy)
        chunks = chunk_document(guide_document(), config, count_tokens, embed)
        assert chunks, strategy
        for chunk in chunks:
            assert (chunk.title, chunk.heading_path) == (GUIDE_TITLE, GUIDE_PATH), strategy
            assert chunk.prefix.endswith(GUIDE_PATH[-1]), strategy
