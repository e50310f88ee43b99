"""The test-only workaround for streamlit/streamlit#15488 in ``tests/conftest.py``: Streamlit's scan of the installed
packages for v2 components runs once per test process instead of once per ``AppTest``.

It relies on a name inside Streamlit (``streamlit.components.v2.manifest_scanner.scan_component_manifests``, called by
``BidiComponentManager.discover_and_register_components``, which ``AppTest.run`` calls for each new AppTest). These
tests fail when a Streamlit release moves that name or stops calling it through the module, so that the workaround
is seen to have stopped working (or to be no longer needed) instead of silently doing nothing.
"""

from __future__ import annotations

import inspect

import pytest
from streamlit.components.v2 import manifest_scanner
from streamlit.components.v2.component_manager import BidiComponentManager
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.app


def _workaround():
    scan = manifest_scanner.scan_component_manifests
    assert hasattr(scan, "streamlit_scan") and hasattr(scan, "scans"), "tests/conftest.py's workaround is not in place"
    return scan


def test_streamlits_scan_is_still_a_function_of_that_module_with_that_signature():
    original = _workaround().streamlit_scan
    assert inspect.isfunction(original)
    assert original.__module__ == "streamlit.components.v2.manifest_scanner" and original.__name__ == "scan_component_manifests"
    assert list(inspect.signature(original).parameters) == ["max_workers"]


def test_the_manager_scans_through_the_module_once_per_process():
    scan = _workaround()
    scan.scans.cache_clear()
    for _ in range(3):
        BidiComponentManager().discover_and_register_components(start_file_watching=False)
    info = scan.scans.cache_info()
    # Streamlit's scan ran once and was answered from the kept list twice: the manager calls the module's name
    assert (info.misses, info.hits) == (1, 2), info


def test_each_new_apptest_still_discovers_components_and_gets_its_own_manager():
    scan = _workaround()
    scan.scans.cache_clear()
    managers = []
    for _ in range(2):
        at = AppTest.from_string("import streamlit as st\nst.write('hello')").run()
        assert not at.exception and at.markdown[0].value == "hello"
        managers.append(at._bidi_component_manager)  # the per-AppTest attribute Streamlit 1.67 keeps it in
    info = scan.scans.cache_info()
    assert (info.misses, info.hits) == (1, 1), info  # each AppTest asked for the scan; Streamlit's ran once
    assert all(isinstance(m, BidiComponentManager) for m in managers) and managers[0] is not managers[1]


def test_the_kept_list_is_what_streamlits_own_scan_finds():
    scan = _workaround()
    fresh = [(manifest.name, str(root)) for manifest, root in scan.streamlit_scan()]
    assert [(manifest.name, str(root)) for manifest, root in scan()] == fresh
