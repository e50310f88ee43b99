"""Library start-up work the first page does not need, done later or done once.

On a 2-core machine the server's CPU-seconds to the first figure are its start-up time. Three pieces of library
start-up work are avoidable, so the server (``ui.warmup``, ``serve.py``) changes them; each keeps its behaviour:

- transformers builds the table of every name it can import lazily by reading its 1,648 model files, once for
  ``import transformers`` and again for ``transformers.models``: the cache meant to share the work between the two
  holds 128 of the ~550 folders, so the second pass reads every file again (~0.35 CPU-s).
  ``structure_cache_unbounded`` gives that cache room for all of them; the function and its results are unchanged.
- transformers' model-loading code imports ``scipy.optimize`` (0.3-0.5 CPU-s with what it pulls in) for the
  Hungarian matching of its object-detection losses. ``loss_modules_without_scipy`` lets those modules import
  without it and gives each a ``linear_sum_assignment`` that imports SciPy's on its first call.
- Streamlit scans every installed package's metadata for v2 components when its runtime starts (~0.17 CPU-s for this
  project's ~110 packages). The app uses none; ``component_scan_deferred`` runs the same scan once the server has
  been idle (``ui.warmup.wait_until_idle``), so any such component still registers.

All three are version-guarded: when the library no longer has the names patched here, nothing is changed.
"""

from __future__ import annotations

import functools
import importlib.machinery
import logging
import sys
import threading
from contextlib import contextmanager

log = logging.getLogger("explorer")

LOSS_PACKAGE = "transformers.loss."
IMPORT_UTILS = "transformers.utils.import_utils"


def _unbound_structure_cache(import_utils) -> None:
    scan = getattr(import_utils, "create_import_structure_from_path", None)
    if scan is None or not hasattr(scan, "__wrapped__") or scan.cache_info().maxsize is None:
        return
    # The function recurses through its module-level name, so the folders below share this cache too.
    import_utils.create_import_structure_from_path = functools.lru_cache(maxsize=None)(scan.__wrapped__)


class _PatchAfterImport:
    """A one-shot ``sys.meta_path`` finder: imports module ``name`` as usual, then calls ``patch(module)`` before
    anything else runs (here: before ``transformers/__init__.py`` builds its table with the function patched)."""

    def __init__(self, name: str, patch) -> None:
        self.name, self.patch = name, patch

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module  # this spec's own loader instance

        def exec_then_patch(module) -> None:
            exec_module(module)
            self.patch(module)

        spec.loader.exec_module = exec_then_patch
        return spec


def structure_cache_unbounded() -> None:
    """Before transformers is imported (at once if it already is): its table of lazily importable names is built
    with one pass over its model files instead of two."""
    if IMPORT_UTILS in sys.modules:
        _unbound_structure_cache(sys.modules[IMPORT_UTILS])
    elif not any(isinstance(finder, _PatchAfterImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PatchAfterImport(IMPORT_UTILS, _unbound_structure_cache))


def linear_sum_assignment(*args, **kwargs):
    """``scipy.optimize.linear_sum_assignment``, imported on the first call."""
    from scipy.optimize import linear_sum_assignment as solve

    return solve(*args, **kwargs)


def _scipy_not_available() -> bool:
    return False


@contextmanager
def loss_modules_without_scipy():
    """While transformers' model-loading code is imported inside this block, its object-detection loss modules see no
    SciPy and so do not import ``scipy.optimize``; afterwards each of them sees SciPy again and calls SciPy's
    ``linear_sum_assignment`` through ``linear_sum_assignment`` above. A no-op when those modules or SciPy's
    optimiser are already imported, or when transformers no longer checks SciPy this way."""
    try:
        import transformers.utils as transformers_utils
    except ImportError:
        yield
        return
    scipy_available = getattr(transformers_utils, "is_scipy_available", None)
    already = "scipy.optimize" in sys.modules or any(name.startswith(LOSS_PACKAGE) for name in sys.modules)
    if scipy_available is None or already:
        yield
        return
    transformers_utils.is_scipy_available = _scipy_not_available
    try:
        yield
    finally:
        transformers_utils.is_scipy_available = scipy_available
        for name, module in list(sys.modules.items()):
            if getattr(module, "is_scipy_available", None) is not _scipy_not_available:
                continue
            module.is_scipy_available = scipy_available
            if name.startswith(LOSS_PACKAGE) and not hasattr(module, "linear_sum_assignment"):
                module.linear_sum_assignment = linear_sum_assignment


_deferred_scan = threading.Event()


def component_scan_deferred() -> None:
    """Once per process, before Streamlit's runtime starts: Streamlit's scan of installed packages for v2
    components runs in the background once the server is idle instead of before it serves anything."""
    try:
        from streamlit.components.v2.component_manager import BidiComponentManager
    except ImportError:
        return
    scan = getattr(BidiComponentManager, "discover_and_register_components", None)
    if scan is None or _deferred_scan.is_set():
        return
    _deferred_scan.set()

    def scan_when_idle(self, **kwargs) -> None:
        def run() -> None:
            from ui.warmup import wait_until_idle

            wait_until_idle()
            scan(self, **kwargs)
            log.info("registered installed Streamlit components (scan deferred from start-up)")

        threading.Thread(target=run, name="component-scan", daemon=True).start()

    BidiComponentManager.discover_and_register_components = scan_when_idle
