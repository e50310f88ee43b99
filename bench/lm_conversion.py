"""Cold conversion of the bundled language models: each GGUF file converted by a new process into an empty cache.

Run with ``python -m bench lm_conversion``. ``BENCH_BEFORE=/path/to/another/checkout`` converts with that checkout's
code too, model by model right before this one's (the machine is shared, so its load changes), and says whether the
two caches hold the same bytes. Gemma's joined GGUF file is copied into each empty cache first: its assembly from the
chunk packages (joining, checking the SHA-256) is not part of the figure. Wall and CPU seconds are the whole process
(imports included); ``cached_folder_*`` the call after torch and transformers are imported (as in the app's server, which
has them), and ``conversion_s`` what the manifest records (``_convert_into`` alone).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from core.model.bundled_lm import BUNDLED_LMS, CACHE_ENV, MANIFEST, cache_root, gemma_gguf_path

PROJECT = Path(__file__).resolve().parent.parent
CHILD = """
import json, os, resource, sys, time
sys.path.insert(0, sys.argv[1])
started = time.perf_counter()
from core.model.bundled_lm import cached_folder
import torch, transformers  # imported before the conversion, as in the app's server
imported, cpu_imported = time.perf_counter(), time.process_time()
folder = cached_folder(sys.argv[2])
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall_s": time.perf_counter() - started, "cpu_s": usage.ru_utime + usage.ru_stime,
                  "cached_folder_wall_s": time.perf_counter() - imported, "cached_folder_cpu_s": time.process_time() - cpu_imported,
                  "peak_rss_mb": usage.ru_maxrss / 1024, "folder": str(folder)}))
"""


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.name != MANIFEST}


def convert_cold(project: Path, name: str) -> dict:
    """Convert ``name`` with ``project``'s code in a new process, into an empty temporary cache."""
    with tempfile.TemporaryDirectory(dir=cache_root().parent) as cache:
        if name == "gemma-3-270m":
            shutil.copy(gemma_gguf_path(), Path(cache) / gemma_gguf_path().name)
        load_before = os.getloadavg()[0]
        done = subprocess.run([sys.executable, "-c", CHILD, str(project), name], env={**os.environ, CACHE_ENV: cache},
                              capture_output=True, text=True, check=True)
        result = json.loads(done.stdout.strip().splitlines()[-1])
        folder = Path(result.pop("folder"))
        manifest = json.loads((folder / MANIFEST).read_text())
        return {**{k: round(v, 1) for k, v in result.items()}, "conversion_s": manifest["conversion_seconds"],
                "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)], "digests": _digests(folder)}


def main() -> dict:
    before = os.environ.get("BENCH_BEFORE")
    result = {"cpu_count": os.cpu_count()}
    for lm in BUNDLED_LMS:
        runs = {}
        if before:
            runs["before"] = convert_cold(Path(before), lm.name)
        runs["after"] = convert_cold(PROJECT, lm.name)
        if before:
            runs["same_bytes"] = runs["before"]["digests"] == runs["after"]["digests"]
        for run in runs.values():
            if isinstance(run, dict):
                run.pop("digests")
        result[lm.name] = runs
        print(lm.name, json.dumps(runs), flush=True)
    return result


if __name__ == "__main__":
    main()
