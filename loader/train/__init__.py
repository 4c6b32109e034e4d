"""Training: models learned from the corpus and from judged questions, each kept only when a
guard on held-out data finds it better than what it would replace; above ``eval/`` and
``models/``, below ``cli/``.

- ``trainer``: the contrastive training loop (in-batch and hard negatives) and WiSE-FT mixing;
- ``finetune``: `loader fine-tune`, examples mined from a BEIR dataset's eval index;
- ``pairs`` -> ``negatives`` -> ``guard`` -> ``adapt``: `loader adapt`, pairs mined from a
  tenant's indexed chunks alone, the adapted model kept only when the guard measures it better;
- ``sources`` -> ``learn``: `loader learn`, the learned reranker (over
  ``loader.models.rerank.features``) trained on judged questions;
- ``clicks`` -> ``click_export``: `loader judgments clicks`, graded judgments from the query
  log's clicks (a position-based click model), written as an implicit ``questions`` file;
- ``defaults``: the defaults the CLI shows, importing nothing (start-up stays fast).

Imports: these modules may import ``loader.query`` (the query log), ``loader.eval``,
``loader.models``, ``loader.cluster`` and the shared modules; nothing but ``loader.cli`` imports
``loader.train``.
"""
