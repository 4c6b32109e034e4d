"""The defaults of `loader fine-tune`, `loader adapt` and `loader learn`, declared once for the
library's request objects and the CLI's options: the CLI shows them in its help without importing
the training code (numpy, torch), so that `loader --help` stays fast. This module imports nothing.

``tests/unit/test_cli.py`` checks that every option of the training commands defaults to what its
request object defaults to.
"""

from __future__ import annotations

# How the trainer trains (``trainer.FineTuneOptions``): what lifted bge-small on SciFact.
EPOCHS = 1
LEARNING_RATE = 2e-5
BATCH_SIZE = 32
MAX_TOKENS = 256
SEED = 0

# `loader fine-tune` (``finetune.FineTuneRequest``).
SPLIT = "train"
TEST_SPLIT = "test"
CANDIDATES = 40
FINE_TUNE_NEGATIVES = 3
INDEX_PREFIX = "eval"

# `loader adapt` (``adapt.AdaptRequest``).
HELD_OUT_SHARE = 0.2
MAX_PAIRS = 2000
ADAPT_NEGATIVES = 1
# A chunk of another document that the stock model scores within 5 % of a pair's own passage is
# as likely another right answer as a wrong one (``adapt.wrong_candidates``).
NEGATIVE_MARGIN = 0.05
MIN_GAIN = 0.0
MIX = 1.0
# 128 tokens: what MiniLM was trained at, and half the memory of 256 (11 GB for bge-small).
ADAPT_MAX_TOKENS = 128

# `loader learn` (``learn.LearnRequest``): the fusions it chooses the model's base among when
# no --mode is given (``booster.choose_base``).
LEARN_BASE_MODES = ("hybrid-rrf", "hybrid-minmax", "hybrid-zscore")
