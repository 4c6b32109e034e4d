"""The chunking fingerprint: which settings cut a chunk, stored with it (the ``chunking`` field).

A document's ``doc_hash`` mixes its text with the chunking settings into one digest, so the index
alone cannot tell whether a document was cut with today's settings. Every chunk therefore also
carries this fingerprint of the settings that decide chunks and vectors (the registry's ``model``
and ``chunking`` scopes, and the chunkers' ``CHUNKING_VERSION``): ``loader doctor`` counts the
documents whose fingerprint differs from the settings' -- the ones the next push re-chunks.

Example::

    chunking_fingerprint(settings)   # 'c1-5f0c9a2b7e41d3a8'
"""

from __future__ import annotations

import hashlib

from loader.ingest.plan import CHUNKING_VERSION
from loader.settings import Settings, settings_in_scope

FINGERPRINT_FIELD = "chunking"


def chunking_fingerprint(settings: Settings) -> str:
    """``c<CHUNKING_VERSION>-<16 hex digits>`` over the chunking and model settings' values."""
    digest = hashlib.sha256()
    for name in settings_in_scope("model", "chunking"):
        digest.update(f"{name}={getattr(settings, name)!r}\x00".encode())
    return f"c{CHUNKING_VERSION}-{digest.hexdigest()[:16]}"
