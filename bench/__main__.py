"""Run the benchmarks: ``python -m bench`` (all) or ``python -m bench NAME …``.

Each benchmark is a module ``bench/NAME.py`` with a ``main() -> dict`` that prints
its figures; the results are also written to ``bench/results/NAME.json``.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if not m.name.startswith("_"))


def main(names: list[str]) -> None:
    names = names or available()
    RESULTS.mkdir(exist_ok=True)
    for name in names:
        if name not in available():
            raise SystemExit(f"unknown benchmark {name!r}; available: {', '.join(available())}")
        print(f"== {name}", flush=True)
        result = importlib.import_module(f"bench.{name}").main()
        (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
