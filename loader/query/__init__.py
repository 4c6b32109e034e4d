"""The query path. ``request`` holds ``SearchRequest``, the one checked description of a search
that the library, ``loader search`` and ``loader serve`` share; ``search`` runs it through the
stored templates in named stages (rewrite, embed, retrieve and fuse with ``fusion``, rerank,
assemble context with ``context``) and returns the types of ``result``; ``rewrite`` turns a chat
turn into standalone queries; ``query_log`` records searches and events in the UBI shape
(``query_log = "ubi"``), and ``judgments`` keeps the query sets sampled from it and their grades.
The HTTP API over it and the judging page live in ``loader.serve``.

It may import ``loader.settings``, ``loader.errors``, ``loader.documents``, ``loader.cluster``,
``loader.models``, ``loader.index.render`` (the templates' names) and
``loader.index.search_params`` (their parameters); never ``ingest``, ``eval``, ``serve`` or the
CLI."""
