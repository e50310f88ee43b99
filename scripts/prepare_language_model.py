"""Convert the bundled language models (SmolLM2-135M-Instruct, gemma-3-270m) from their GGUF files into the app's
cache, once, so that choosing one in the app does not wait for the conversion: ``make setup`` and ``make run`` call
this. A sound cache is left as it is (this then takes well under a second); a missing package is reported, not an
error, since the app runs without that model.

Run with ``.venv/bin/python scripts/prepare_language_model.py``.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.model.bundled_lm import (  # after the project folder is on the path
    BUNDLED_LMS,
    BundledLMError,
    bundled_lm,
    cache_folder,
    cache_problem,
    cached_folder,
)


def prepare(lm) -> None:
    """Convert ``lm`` (a ``BundledLM``) unless its cache is sound; say what happened."""
    try:
        problem = cache_problem(cache_folder(lm.name), lm.source())
        if problem is None:
            print(f"{lm.name}: converted cache ready in {cache_folder(lm.name)}")
            return
        print(f"{lm.name}: converting its GGUF file into {cache_folder(lm.name)} ({problem}), once: {lm.wait}.", flush=True)
        started = time.perf_counter()
        cached_folder(lm.name)
    except BundledLMError as err:
        print(f"{lm.name} was not prepared: {err}", file=sys.stderr)
        return
    print(f"{lm.name}: converted in {time.perf_counter() - started:.0f} s.")


def prepare_named(name: str) -> None:
    prepare(bundled_lm(name))


def main() -> int:
    """Each model in a process of its own: a conversion is mostly one core's work (gguf's numpy dequantisation), so
    on two cores both finish in the time of the longer one."""
    with ProcessPoolExecutor(max_workers=len(BUNDLED_LMS), mp_context=get_context("spawn")) as pool:
        list(pool.map(prepare_named, [lm.name for lm in BUNDLED_LMS]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
