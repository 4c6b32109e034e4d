"""`loader eval`: retrieval quality of every search mode and chunking strategy, side by side.

What lives here, in the order a run uses it:

- ``datasets``: the file formats -- BEIR folders and questions files in, TREC runs out;
- ``tasks``: what is evaluated -- ``load_task`` turns a BEIR folder, or a questions file over a
  folder of one tenant's documents, into an ``EvalTask`` (documents, queries, judgements), and
  refuses a task whose judged documents are mostly not in its corpus;
- ``configs``: what is run -- ``--sweep`` parsing and the configurations (strategy x mode x
  rerank x swept value), the index alias of each; which settings change the index;
- ``indexes``: each eval index applied and pushed once, its pipelines kept in step with a sweep;
- ``runner``: the runs -- ``evaluate`` searches every query of every configuration; ``run_eval``
  is the whole command behind one ``EvalRequest`` (what the CLI calls);
- ``metrics``: pure scoring -- chunk hits to document rankings, recall@k, MRR@k, nDCG@k, latency;
- ``report``: the ``EvalReport`` and its outputs (Markdown table, JSON, TREC runs, PNG chart);
- ``compare``: a run against a previous results file, and the regression gate;
- ``agreement``: how far the raters of a judged query set agree (Cohen's kappa, what to settle).

Imports: these modules may import ``loader.ingest``, ``loader.index``, ``loader.query``,
``loader.models``, ``loader.cluster`` and the shared modules; nothing below imports ``loader.eval``.
"""
