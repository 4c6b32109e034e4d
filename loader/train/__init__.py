"""Training code: what learns from judgments.

- ``clicks`` -> ``click_export``: `loader judgments clicks`, graded judgments from the query
  log's clicks (a position-based click model), written as an implicit ``questions`` file.

Imports: ``loader.query`` (the query log), ``loader.cluster`` and the shared modules; nothing but
``loader.cli`` imports ``loader.train``.
"""
