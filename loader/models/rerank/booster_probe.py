"""A LightGBM text model loaded and run in a process of its own: the script
``loader.models.rerank.learned_files.probe_booster`` starts (never imported by loader).

It reads the model on stdin, loads it and predicts a few rows (plain and ``pred_contrib``, as
the rerank and ``loader explain`` do): exit status 0 and the tree count on stdout; a LightGBM
error, status 1 and its message on stderr. A model that kills LightGBM kills only this process,
and the parent reads the signal as the model's fault. It imports only the standard library,
numpy and LightGBM, and it runs as a file (``python -P booster_probe.py``), so nothing of the
model's folder or the working directory is on its path.
"""

from __future__ import annotations

import sys

# LightGBM imports these when they are installed, for what a load and a predict never use:
# scikit-learn alone took 1.5 of the 2 s a probe cost.
_UNUSED = ("sklearn", "pandas", "dask", "pyarrow", "cffi", "graphviz", "matplotlib", "datatable")


def main(columns: int) -> int:
    for name in _UNUSED:
        sys.modules[name] = None  # type: ignore[assignment]  # `import name` raises ImportError
    import lightgbm
    import numpy as np

    text = sys.stdin.buffer.read().decode("ascii")
    rows = np.vstack(
        [
            np.zeros(columns),
            np.ones(columns),
            np.full(columns, -1.0),
            np.full(columns, np.nan),
            np.random.default_rng(0).random((4, columns)),
        ]
    )
    try:
        booster = lightgbm.Booster(model_str=text)
        booster.predict(rows, num_threads=1)
        booster.predict(rows, pred_contrib=True, num_threads=1)
    except lightgbm.basic.LightGBMError as exc:
        print(str(exc)[:500], file=sys.stderr)
        return 1
    print(booster.num_trees())
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
