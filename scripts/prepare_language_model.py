"""Convert the bundled language models (SmolLM2-135M-Instruct, gemma-3-270m) from their GGUF files into the app's
cache, once, so that choosing one in the app does not wait for the conversion: ``make setup`` and ``make run`` call
this. A sound cache is left as it is (this then takes well under a second); a missing package is reported, not an
error, since the app runs without that model.

Run with ``.venv/bin/python scripts/prepare_language_model.py``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.model.bundled_lm import BUNDLED_LMS, BundledLMError, cache_folder, cache_problem, cached_folder  # after the project folder is on the path


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


def main() -> int:
    for lm in BUNDLED_LMS:
        prepare(lm)
    return 0


if __name__ == "__main__":
    sys.exit(main())
