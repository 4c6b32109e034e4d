"""The query path: a search request (``request``) run through the stored templates and fused
(``search``, ``fusion``), reranked, and assembled into context (``context``); query rewriting
(``rewrite``); the HTTP API over it (``serve``)."""
