"""`loader doctor`: is the cluster set up the way the configuration says, and does it work?

One line per check -- ``ok``, ``warn`` or ``FAIL`` with its fix -- in the order a setup is built:

- ``report``: ``Check`` and ``DoctorReport`` (the lines, JSON, and the exit code's error class);
- ``checks``: the cluster, its plugins, the alias, the blocks on its index, the index against the
  rendered files (drift, dimension, engine), the pipelines and templates against what ``loader
  apply`` would store, the ml-commons model;
- ``probes``: what only running a query shows -- hybrid scores really fused by each pipeline,
  filters inside the k-NN search, chunks per tenant, chunks cut with other chunking settings;
- ``hybrid``: the hybrid query's hazards on OpenSearch before 3.8 and 3.9 -- a saved
  configuration setting ``search_type=dfs_query_then_fetch``, and DLS roles or nested fields that
  make each sub-query's scores wrong;
- ``documents``: half-written documents (a push stopped between two bulk requests), found by
  aggregating the chunks by document; and the version behind the alias against the kept version
  a `loader apply` copied it from (``loader.index.copy_check``, the check apply makes before its
  swap).

A room of its own above ``index``, ``ingest`` and ``query``, because it checks all of them: it may
import ``loader.cluster``, ``loader.index``, ``loader.ingest``, ``loader.models`` and the shared
modules; nothing imports it but the CLI.
"""
