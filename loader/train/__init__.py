"""Training: models learned from the index and from judged questions, each kept only when a
guard on held-out data finds it better than what it would replace. ``learn`` (`loader learn`:
the learned reranker, over ``loader.models.rerank.features``) reads its judged questions through
``sources``. Imports the library below it (``loader.query``, ``loader.eval``, ``loader.models``);
nothing there imports it."""
