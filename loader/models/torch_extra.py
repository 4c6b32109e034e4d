"""Whether the ``torch`` extra is installed: torch and sentence-transformers are left out of the
base install (PyPI's torch pulls about 5 GB of CUDA libraries), so what needs them says so, with
the command that installs them, before it tries to import them.

Example::

    require_torch_extra("loader fine-tune")
    # ModelError: loader fine-tune needs torch and sentence-transformers, which the base
    #   install leaves out: pip install 'loader[torch]'
"""

from __future__ import annotations

import importlib.util

from loader.errors import ModelError

INSTALL = "pip install 'loader[torch]'"


def torch_extra_missing() -> list[str]:
    """The packages of the ``torch`` extra that are not installed (found without importing)."""
    return [name for name in ("torch", "sentence_transformers") if not _installed(name)]


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ValueError:  # a module left in sys.modules without a spec (tests remove packages)
        return False


def require_torch_extra(purpose: str) -> None:
    """Raise, naming ``purpose`` and the extra, when torch or sentence-transformers is missing.

    Raises:
        ModelError: exit code 6.
    """
    if torch_extra_missing():
        raise ModelError(
            f"{purpose} needs torch and sentence-transformers, which the base install leaves "
            f"out: {INSTALL}"
        )
