"""ui.startup_shims: library start-up work the server defers or does once must keep the libraries' behaviour.

Imports are process-wide, so each check runs in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_python(code: str) -> dict:
    """Run ``code`` in a fresh interpreter from the project root; it prints one JSON object as its last line."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


SCIPY_IMPORTS = r"""
import json, re, sys
import numpy as np
import transformers
from ui.startup_shims import loss_modules_without_scipy, linear_sum_assignment
with loss_modules_without_scipy():
    import transformers.modeling_utils
imported_optimize = "scipy.optimize" in sys.modules
import transformers.utils as tu
# Every module transformers imported that imports names from SciPy when it is available must have them now.
missing, checked = [], []
guarded = re.compile(r"^if is_scipy_available\(\):\n((?:[ \t]+from scipy[^\n]*\n)+)", re.M)
for name, module in sorted(sys.modules.items()):
    path = getattr(module, "__file__", None) or ""
    if not name.startswith("transformers.") or not path.endswith(".py"):
        continue
    for block in guarded.findall(open(path, encoding="utf-8").read()):
        for names in re.findall(r"import ([\w, ]+)", block):
            for wanted in (n.strip() for n in names.split(",")):
                checked.append(f"{name}.{wanted}")
                if not callable(getattr(module, wanted, None)):
                    missing.append(f"{name}.{wanted}")
still_fake = [n for n, m in sys.modules.items() if n.startswith("transformers") and
              getattr(m, "is_scipy_available", None) is not None and not m.is_scipy_available()]
cost = np.random.default_rng(0).random((7, 5))
from transformers.loss import loss_for_object_detection as detection
deferred = [a.tolist() for a in detection.linear_sum_assignment(cost)]
from scipy.optimize import linear_sum_assignment as scipy_lsa
expected = [a.tolist() for a in scipy_lsa(cost)]
print(json.dumps({"imported_optimize": imported_optimize, "missing": missing, "checked": checked,
                  "still_fake": still_fake, "deferred": deferred, "expected": expected,
                  "uses_shim": detection.linear_sum_assignment is linear_sum_assignment,
                  "available": tu.is_scipy_available()}))
"""


def test_transformers_loads_without_importing_scipy_and_its_losses_still_solve_assignments():
    result = run_python(SCIPY_IMPORTS)
    assert result["imported_optimize"] is False
    assert result["checked"], "no transformers module imported SciPy names: the shim no longer has anything to do"
    assert result["missing"] == []
    assert result["still_fake"] == []
    assert result["available"] is True
    assert result["uses_shim"] is True
    assert result["deferred"] == result["expected"]


IMPORT_TABLE = r"""
import json, sys
shim = {shim}
if shim:
    from ui.startup_shims import structure_cache_unbounded
    structure_cache_unbounded()
import transformers
import transformers.utils.import_utils as iu
from transformers import AutoConfig
first_pass = iu.create_import_structure_from_path.cache_info()
import transformers.models as models
table = iu.define_import_structure(models.__file__)
canonical = sorted((sorted(backends), sorted((module, sorted(names)) for module, names in entries.items()))
                   for backends, entries in table.items())
print(json.dumps({{"table": canonical, "hits": first_pass.hits, "misses": first_pass.misses,
                  "maxsize": first_pass.maxsize}}))
"""


def test_transformers_builds_the_same_table_of_lazy_names_in_one_pass_over_its_files():
    plain = run_python(IMPORT_TABLE.format(shim=False))
    shimmed = run_python(IMPORT_TABLE.format(shim=True))
    assert shimmed["table"] == plain["table"]
    assert len(plain["table"]) > 1 and sum(len(entries) for _, entries in plain["table"]) > 1000
    assert shimmed["maxsize"] is None
    # ``import transformers`` and ``transformers.models`` each walk the ~550 model folders: the second walk now
    # finds every folder cached, where the bounded cache had kept only the last 128.
    assert shimmed["hits"] >= 500
    assert plain["hits"] < 200 and plain["misses"] > 1000


def test_the_import_table_fix_applies_once_and_only_before_the_module_is_imported():
    result = run_python(
        r"""
        import json, sys
        from ui.startup_shims import structure_cache_unbounded, _PatchAfterImport
        structure_cache_unbounded(); structure_cache_unbounded()
        hooks_before = sum(isinstance(f, _PatchAfterImport) for f in sys.meta_path)
        import transformers.utils.import_utils as iu
        hooks_after = sum(isinstance(f, _PatchAfterImport) for f in sys.meta_path)
        print(json.dumps({"before": hooks_before, "after": hooks_after,
                          "maxsize": iu.create_import_structure_from_path.cache_info().maxsize}))
        """
    )
    assert result == {"before": 1, "after": 0, "maxsize": None}


@pytest.fixture
def deferred_scan(monkeypatch):
    """Streamlit's component scan deferred, with a recording scanner and a one-second idle wait."""
    import streamlit.components.v2.manifest_scanner as scanner
    from streamlit.components.v2.component_manager import BidiComponentManager

    import ui.startup_shims as shims
    import ui.warmup as warmup

    calls: list[str] = []
    scanned = threading.Event()

    def recording_scan(*args, **kwargs):
        calls.append(threading.current_thread().name)
        scanned.set()
        return []

    monkeypatch.setattr(scanner, "scan_component_manifests", recording_scan)
    monkeypatch.setattr(BidiComponentManager, "discover_and_register_components",
                        BidiComponentManager.discover_and_register_components)
    monkeypatch.setattr(shims, "_deferred_scan", threading.Event())
    monkeypatch.setattr(warmup, "IDLE_SECONDS", 1.0)
    shims.component_scan_deferred()
    shims.component_scan_deferred()  # once per process: a second call must not wrap the wrapper
    return BidiComponentManager, calls, scanned


def test_streamlits_component_scan_waits_for_an_idle_server_and_then_runs_once(deferred_scan):
    from ui.warmup import page_running

    manager_class, calls, scanned = deferred_scan
    with page_running():  # a page view: the scan must not run beside it
        manager_class().discover_and_register_components(start_file_watching=False)
        assert not scanned.wait(1.5)
    assert scanned.wait(10)
    assert calls == ["component-scan"]
