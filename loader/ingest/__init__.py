"""`loader push`: files read into documents (``readers``), cut into chunks (``chunking``), planned
against the index (``plan``, pure) and synced in bulk (``sync``, ``bulk``).

Where things live:

- ``readers/``: a folder's files -> ``Document`` or ``Skipped`` (``iter_documents``);
- ``chunking/``: a ``Document`` -> ``Chunk`` objects within the model's limits (``chunk_document``);
- ``plan.py``: identity and hashes, and ``plan_push`` -> ``PushPlan`` (no cluster);
- ``sync.py``: ``push`` / ``sync_documents``: read the index state, plan, embed, write;
- ``index_state.py``: what the index holds of a push's scope (ids, hashes, reusable vectors);
- ``bulk.py``: batched bulk requests with retries and per-item errors (``send_bulk``);
- ``workers.py``: the chunks' embedding, in process or in ``push_workers`` processes.

``readers``, ``chunking`` and ``plan`` are pure (no cluster, no model loading); only ``sync``,
``index_state`` and ``bulk`` talk to OpenSearch. This package may import ``loader.documents``,
``loader.settings``, ``loader.errors``, ``loader.cluster`` and ``loader.models``, and
``loader.index`` only to check that an index can take a push and to relax and restore it for a bulk
load (``loader.index.bulk_load``); never ``loader.query`` or ``loader.eval``.

Example::

    report = push("docs/", settings)                 # loader.ingest.sync.push
    print(report.added, report.updated, report.deleted)
"""
