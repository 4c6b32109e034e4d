"""The wheel works outside the checkout: it carries the configuration templates.

Build the wheel, install it (without dependencies) into a fresh venv, and run ``loader apply
--dry-run`` and ``loader apply`` from an empty folder that is not the checkout. The venv sees the
machine's installed dependencies through a plain path entry, never the checkout's editable
install (whose import hook would hide the wheel).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from tests.paths import REPO


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(work / "dist"), str(REPO)],
        check=True, timeout=300,
    )  # fmt: skip
    (wheel,) = (work / "dist").glob("loader-*.whl")
    env_dir = work / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    # Dependencies from the machine's site-packages as a plain path: its .pth hooks (the
    # editable install of the checkout) are not run for a path listed in a .pth file.
    (Path(site) / "machine-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", site, str(wheel)],
        check=True, timeout=300,
    )  # fmt: skip
    return env_dir


def run_loader(env_dir: Path, cwd: Path, url: str, alias: str, *args: str):
    env = {**os.environ, "OPENSEARCH_URL": url, "LOADER_INDEX_NAME": alias}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "loader", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_the_wheel_carries_every_config_template(wheel_venv, tmp_path):
    listed = subprocess.run(
        [str(wheel_venv / "bin" / "python"), "-c",
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


def test_apply_from_a_folder_outside_the_checkout(wheel_venv, tmp_path, opensearch_url, client,
                                                  unique_name):  # fmt: skip
    dry = run_loader(wheel_venv, tmp_path, opensearch_url, unique_name, "apply", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"create index {unique_name}-v1" in dry.stdout
    assert f"create search template {unique_name}-hybrid" in dry.stdout
    assert not client.indices.exists(index=f"{unique_name}-v1")

    applied = run_loader(wheel_venv, tmp_path, opensearch_url, unique_name, "apply")
    assert applied.returncode == 0, applied.stderr
    assert client.indices.exists_alias(name=unique_name)
    assert client.get_script(id=f"{unique_name}-hybrid")["found"]
    again = run_loader(wheel_venv, tmp_path, opensearch_url, unique_name, "apply", "--dry-run")
    assert again.returncode == 0 and "no changes" in again.stdout.lower(), again.stdout
