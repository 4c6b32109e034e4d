"""Every script under ``benchmarks/`` has a smoke run, and those that need no cluster run here;
the commands the guide cites use options the scripts take.

The cases are ``tests/benchmark_cases.py``'s tables. Placeholders of ``LOCAL_CASES``:
``{dataset}`` a tiny BEIR folder, ``{tmp}`` the test's own folder, ``{onnx}`` the default
model's ONNX file and ``{onnx_copy}`` a link to it in ``{tmp}`` (two files to compare).
"""

from __future__ import annotations

import re

import pytest

from tests import benchmark_cases as cases
from tests.paths import REPO


def test_every_script_has_a_smoke_run():
    covered = {**cases.LOCAL_CASES, **cases.CLUSTER_CASES}
    missing = [
        script for script in cases.scripts() if script not in covered and script not in cases.RUN_BY
    ]
    assert missing == [], (
        f"benchmarks without a smoke run: {missing}; add each to LOCAL_CASES or CLUSTER_CASES "
        "in tests/benchmark_cases.py"
    )
    gone = [name for name in [*covered, *cases.RUN_BY] if name not in cases.scripts()]
    assert gone == [], f"smoke runs of scripts that are not in benchmarks/: {gone}"
    assert set(cases.RUN_BY.values()) <= set(covered), "a module's runner has no smoke run"
    assert not set(cases.LOCAL_CASES) & set(cases.CLUSTER_CASES)


def test_a_case_fills_its_placeholders_and_leading_environment():
    env, args = cases.fill(("LOADER_X=a {b}", "{b}", "--k=1"), {"b": "B"})
    assert env == {"LOADER_X": "a B"} and args == ["B", "--k=1"]
    assert cases.placeholders([("{a}", "x{b}y"), ("--c",)]) == {"a", "b"}


@pytest.fixture
def dataset(tmp_path):
    return str(cases.write_tiny_beir(tmp_path / "scifact"))


@pytest.fixture
def tmp(tmp_path):
    return str(tmp_path)


@pytest.fixture(scope="module")
def onnx():
    from pathlib import Path

    from loader.models.embedding import resolve_model_path
    from loader.models.onnx_file import local_onnx_export

    name = "all-MiniLM-L6-v2"
    return str(local_onnx_export(name, Path(resolve_model_path(name))))


@pytest.fixture
def onnx_copy(onnx, tmp_path):
    copy = tmp_path / "b" / "model.onnx"
    copy.parent.mkdir()
    copy.symlink_to(onnx)
    return str(copy)


@pytest.mark.parametrize("script", sorted(cases.LOCAL_CASES))
def test_the_script_runs_on_a_tiny_input(script, request, tmp_path):
    runs = cases.LOCAL_CASES[script]
    values = {name: request.getfixturevalue(name) for name in cases.placeholders(runs)}
    for run in runs:
        env, args = cases.fill(run, values)
        done = cases.run_script(script, args, cwd=tmp_path, env=env)
        assert done.returncode in {0, *cases.ALSO_FINE.get(script, ())}, (
            f"{script} {' '.join(args)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        )
        assert done.stdout.strip(), f"{script} printed nothing"


def cited_commands(text: str) -> list[tuple[str, str]]:
    """(script, the rest of its command) for every ``benchmarks/<script>`` run a page cites: in
    fenced blocks, line by line (``\\`` continues a line; ``#`` starts a comment), and in inline
    code spans, which may wrap."""
    found = []
    fenced = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
    for block in fenced.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            found += _commands(line.split(" #")[0])
    for span in re.findall(r"`([^`]+)`", fenced.sub("", text)):
        found += _commands(span.replace("\n", " "))
    return found


def _commands(text: str) -> list[tuple[str, str]]:
    pieces = re.split(r"benchmarks/(\w+\.py)", text)
    return [(pieces[i], re.split(r"&&|;|\|", pieces[i + 1])[0]) for i in range(1, len(pieces), 2)]


def test_the_guide_cites_only_options_the_scripts_take():
    pages = [*sorted((REPO / "guide").glob("*.md")), REPO / "README.md"]
    wrong = []
    for page in pages:
        for script, rest in cited_commands(page.read_text(encoding="utf-8")):
            path = cases.BENCHMARKS / script
            if not path.is_file():
                wrong.append(f"{page.name}: benchmarks/{script} does not exist")
                continue
            source = path.read_text(encoding="utf-8")
            if "harness_arguments(" in source:  # the shared options of the SciFact harness
                source += (cases.BENCHMARKS / "learned_rerank_scifact.py").read_text("utf-8")
            for option in re.findall(r"(?<![\w-])--[a-z][\w-]*", rest):
                if f'"{option}"' not in source:
                    wrong.append(f"{page.name}: benchmarks/{script} has no {option}")
    assert wrong == []


def test_a_cited_command_is_read_to_its_end_and_no_further():
    page = (
        "Run `python3 benchmarks/a.py --x 1\n--y` and:\n\n```bash\n"
        "LOADER_M=b python3 benchmarks/b.py --z \\\n  --w 2   # or --v\n"
        "python3 benchmarks/c.py && loader eval --q\n```\n"
    )
    cited = {script: re.findall(r"--\w+", rest) for script, rest in cited_commands(page)}
    assert cited == {"a.py": ["--x", "--y"], "b.py": ["--z", "--w"], "c.py": []}
