"""The frameworks are optional: the base install does not depend on any, ``import loader``
(and the CLI, and the retrievers' core) imports none, and each extra brings its framework and
opensearch-py's async client; the test extra brings all three, so CI runs their tests."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

from tests.paths import REPO

FRAMEWORK_PACKAGES = {
    "langchain": "langchain-core",
    "llamaindex": "llama-index-core",
    "haystack": "haystack-ai",
}
FRAMEWORK_MODULES = ("langchain_core", "llama_index", "haystack")


def requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0] for requirement in requirements}


def test_importing_loader_imports_no_framework() -> None:
    code = (
        "import sys, loader, loader.cli, loader.query.search, loader.integrations.core\n"
        f"found = [m for m in sys.modules if m.split('.')[0] in {set(FRAMEWORK_MODULES)!r}]\n"
        "assert not found, found\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_base_install_pulls_no_framework_and_each_extra_its_own() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    frameworks = set(FRAMEWORK_PACKAGES.values())
    assert not requirement_names(project["dependencies"]) & (frameworks | {"aiohttp"})
    for extra, package in FRAMEWORK_PACKAGES.items():
        assert package in requirement_names(extras[extra]), extra
        assert any(r.startswith("opensearch-py[async]") for r in extras[extra]), extra
        assert all(re.search(r">=[\d.]+,\s*<[\d.]+", r) for r in extras[extra]), extras[extra]
    assert "loader[langchain,llamaindex,haystack]" in extras["test"]
