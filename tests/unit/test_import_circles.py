"""No two modules of loader/ import each other (issue #45): a name both sides need lives where
both can import it, and no import hides inside a function to dodge the circle, since the reading
below counts function-level imports too."""

from __future__ import annotations

from tests.unit.imports import imports_of, modules, two_module_circles


def test_no_two_modules_of_loader_import_each_other():
    circles = two_module_circles()
    assert not circles, "modules that import each other: " + "; ".join(
        f"{a} <-> {b}" for a, b in circles
    )


def test_the_reading_sees_function_level_and_from_package_imports():
    # export_model imports the embedder inside the function; the doctor imports
    # ``from loader.index import reindex_block``.
    assert "loader.models.embedding" in imports_of("loader.models.embedding_export")
    assert "loader.index.reindex_block" in imports_of("loader.doctor.checks")
    assert len(modules()) > 100
