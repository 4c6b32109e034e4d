"""Where the tests find the repository's files, wherever a test module sits."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"
SAMPLE_DOCS = REPO / "docs"
SCIFACT = REPO.parent / "shared" / "datasets" / "scifact"
