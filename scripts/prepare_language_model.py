"""Convert the bundled language model (SmolLM2-135M-Instruct) from its GGUF file into the app's cache, once, so that
choosing it in the app does not wait for the conversion: ``make setup`` and ``make run`` call this. A sound cache
is left as it is (this then takes well under a second); a missing package is reported, not an error, since the
app runs without that model.

Run with ``.venv/bin/python scripts/prepare_language_model.py``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.bundled_lm import (  # noqa: E402 - after the project folder is on the path
    LM_NAME, WAIT, BundledLMError, cache_folder, cache_problem, cached_folder, gguf_path,
)


def main() -> int:
    try:
        problem = cache_problem(cache_folder(), gguf_path())
        if problem is None:
            print(f"{LM_NAME}: converted cache ready in {cache_folder()}")
            return 0
        print(f"{LM_NAME}: converting its GGUF file into {cache_folder()} ({problem}): {WAIT}, "
              "once.", flush=True)
        started = time.perf_counter()
        cached_folder()
    except BundledLMError as err:
        print(f"{LM_NAME} was not prepared: {err}", file=sys.stderr)
        return 0
    print(f"{LM_NAME}: converted in {time.perf_counter() - started:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
