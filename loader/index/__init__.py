"""`loader apply`: the configuration files rendered into bodies (``render``), the cluster read
(``state``), compared into typed changes (``diff`` and ``plan``, pure), then executed
(``apply``), with the ml-commons embedding model for server-side embedding (``ml_model``; its
ONNX export is ``loader.models.embedding_export``).

May import ``loader.cluster``, ``loader.models``, ``settings``, ``errors`` and ``documents``;
never ``ingest``, ``query`` or ``eval``, which build on it."""
