"""Senses: time to project 500 and 2,000 points of 384 dimensions to 2-D (PCA, UMAP warm, UMAP cold).

"Cold" is UMAP's first call in a fresh Python process (``import umap`` plus numba's compilation),
measured in a subprocess; "warm" is a call after ``warm_up_umap`` in this process. Points are
seeded random vectors of all-MiniLM-L6-v2's width. Run with ``python -m bench senses``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SIZES = (500, 2_000)
HIDDEN = 384
REPEATS = 3
ROOT = Path(__file__).resolve().parent.parent

COLD = """
import json, sys, time
import numpy as np
from core.maths.projection import project
n, hidden = int(sys.argv[1]), int(sys.argv[2])
x = np.random.default_rng(0).standard_normal((n, hidden)).astype(np.float32)
started = time.perf_counter()
project(x, "umap")
print(json.dumps(time.perf_counter() - started))
"""


def points(n: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((n, HIDDEN)).astype(np.float32)


def best_of(repeats: int, run) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def cold_umap_seconds(n: int) -> float:
    out = subprocess.run(
        [sys.executable, "-c", COLD, str(n), str(HIDDEN)], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> dict:
    from core.maths.projection import project, warm_up_umap

    cold = {n: cold_umap_seconds(n) for n in SIZES}  # before this process has compiled anything
    started = time.perf_counter()
    warm_up_umap()
    warm_up = time.perf_counter() - started
    result: dict = {"hidden": HIDDEN, "warm_up_umap_seconds": round(warm_up, 2)}
    for n in SIZES:
        x = points(n)
        result[f"pca_{n}_seconds"] = round(best_of(REPEATS, lambda: project(x, "pca")), 3)
        result[f"umap_warm_{n}_seconds"] = round(best_of(1, lambda: project(x, "umap")), 2)
        result[f"umap_cold_{n}_seconds"] = round(cold[n], 2)
    for key, value in result.items():
        print(f"{key:>26}: {value}")
    return result


if __name__ == "__main__":
    main()
