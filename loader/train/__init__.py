"""Training: what learns from judgments or the corpus; above ``eval/`` and ``models/``, below
``cli/``.

- ``trainer``: the contrastive training loop (in-batch and hard negatives) and WiSE-FT mixing;
- ``finetune``: `loader fine-tune`, examples mined from a BEIR dataset's eval index;
- ``pairs`` -> ``negatives`` -> ``guard`` -> ``adapt``: `loader adapt`, pairs mined from a
  tenant's indexed chunks alone, the adapted model kept only when the guard measures it better;
- ``clicks`` -> ``click_export``: `loader judgments clicks`, graded judgments from the query
  log's clicks (a position-based click model), written as an implicit ``questions`` file;
- ``defaults``: the defaults the CLI shows, importing nothing (start-up stays fast).

Imports: these modules may import ``loader.query`` (the query log), ``loader.eval``,
``loader.models``, ``loader.cluster`` and the shared modules; nothing but ``loader.cli`` imports
``loader.train``.
"""
