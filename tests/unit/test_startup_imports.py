"""What a command imports before it needs it decides how long a user waits for the first line:
`loader --help` imports none of the query, model or cluster code, and a search none of the
template engine (``apply`` renders templates; a search needs only their names). Checked in a
fresh interpreter, by what it imported, not by timing."""

from __future__ import annotations

import subprocess
import sys

from tests.paths import REPO


def imported_by(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        cwd=REPO,  # this checkout's package
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "cumulative" not in line
    }


def test_help_imports_no_query_model_or_cluster_code():
    modules = imported_by("-m", "loader", "--help")
    heavy = {"numpy", "jinja2", "opensearchpy", "loader.query.request", "loader.models.registry"}
    assert not modules & heavy


def test_a_search_imports_no_template_engine():
    assert "jinja2" not in imported_by("-c", "import loader.query.search, loader.cli")


def test_import_loader_imports_no_numpy_onnxruntime_or_opensearch_py():
    modules = imported_by("-c", "import loader; loader.__all__")
    assert not modules & {"numpy", "onnxruntime", "opensearchpy", "jinja2"}
    assert not {module for module in modules if module.startswith("loader.")}


def test_the_front_door_loads_each_entry_point_when_it_is_first_used():
    code = (
        "import sys, loader\n"
        "assert 'numpy' not in sys.modules\n"
        "from loader import search, apply_config, push, run_eval\n"
        "from loader.query.search import search as defined\n"
        "assert search is defined and 'loader.query.search' in sys.modules\n"
        "assert sorted(loader.__all__) == sorted(loader._ENTRY_POINTS)\n"
        "assert set(loader.__all__) <= set(dir(loader))\n"
        "try:\n"
        "    loader.no_such_thing\n"
        "except AttributeError as exc:\n"
        "    assert 'no_such_thing' in str(exc)\n"
        "else:\n"
        "    raise SystemExit('no AttributeError')\n"
    )
    imported_by("-c", code)  # it asserts; imported_by checks the exit code
