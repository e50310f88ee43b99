"""Workshop-server settings and the byte-bounded cache."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from core.model.settings import SettingsError, load_settings
from ui.bounded_cache import BoundedCache, nbytes_of


def test_laptop_mode_allows_any_model():
    s = load_settings(environ={})
    assert not s.server_mode and s.model_allowed("gpt2") and s.model_allowed(None)
    assert s.max_tokens is None  # the model's own window (issue 41)
    assert load_settings(environ={"EXPLORER_MAX_TOKENS": "300"}).max_tokens == 300


def test_server_mode_allows_only_the_bundled_model_by_default():
    s = load_settings(environ={"EXPLORER_MODE": "server"})
    assert s.server_mode
    assert s.model_allowed(None) and s.model_allowed("all-MiniLM-L6-v2")
    assert not s.model_allowed("gpt2") and not s.model_allowed("/tmp/some-folder")
    assert s.max_tokens == 256 and s.max_upload_bytes == 2 * 1024 * 1024


@pytest.mark.parametrize("allowed", [None, "gpt2", ""])
def test_server_mode_always_allows_both_bundled_models_by_any_name(allowed):
    environ = {"EXPLORER_MODE": "server"} | ({} if allowed is None else {"EXPLORER_ALLOWED_MODELS": allowed})
    s = load_settings(environ=environ)
    for name in ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", "SmolLM2-135M-Instruct",
                 "HuggingFaceTB/SmolLM2-135M-Instruct"):
        assert s.model_allowed(name), name
    assert not s.model_allowed("HuggingFaceTB/SmolLM2-360M-Instruct")
    assert s.model_allowed("gpt2") == (allowed == "gpt2")


def test_allowlist_and_limits_from_environment_win_over_secrets():
    s = load_settings(
        secrets={"EXPLORER_MODE": "server", "EXPLORER_MAX_TOKENS": "64", "EXPLORER_ALLOWED_MODELS": "gpt2"},
        environ={"EXPLORER_MAX_TOKENS": "128"},
    )
    assert s.server_mode and s.max_tokens == 128
    assert s.model_allowed("gpt2") and not s.model_allowed("bert-base-uncased")


@pytest.mark.parametrize(
    "environ",
    [{"EXPLORER_MODE": "cloud"}, {"EXPLORER_MAX_TOKENS": "many"}, {"EXPLORER_MAX_UPLOAD_MB": "0"}],
)
def test_bad_settings_name_the_setting(environ):
    with pytest.raises(SettingsError, match="EXPLORER_"):
        load_settings(environ=environ)


def test_cache_is_bounded_in_entries_and_bytes():
    cache: BoundedCache[np.ndarray] = BoundedCache(max_entries=3, max_bytes=1000)
    for i in range(5):
        cache.put(i, np.zeros(100, dtype=np.int8))  # 100 bytes each
    assert len(cache) == 3 and cache.get(0) is None and cache.get(4) is not None
    cache.put("big", np.zeros(450, dtype=np.int8))
    cache.put("big2", np.zeros(450, dtype=np.int8))
    assert cache.total_bytes <= 1000
    cache.put("huge", np.zeros(5000, dtype=np.int8))
    assert cache.get("huge") is None  # larger than the whole budget: returned by compute, never kept


def test_cache_evicts_least_recently_used():
    cache: BoundedCache[np.ndarray] = BoundedCache(max_entries=2, max_bytes=10_000)
    cache.put("a", np.zeros(1))
    cache.put("b", np.zeros(1))
    cache.get("a")
    cache.put("c", np.zeros(1))
    assert cache.get("a") is not None and cache.get("b") is None


def test_concurrent_requests_compute_once():
    cache: BoundedCache[np.ndarray] = BoundedCache(max_entries=4, max_bytes=10_000)

    def slow():
        time.sleep(0.2)
        return np.ones(3)

    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.get_or_compute("k", slow))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.computed == 1 and len(results) == 8 and all(r is results[0] for r in results)


def test_nbytes_of_counts_arrays_in_objects():
    class Holder:
        def __init__(self):
            self.a = np.zeros(10, dtype=np.float32)
            self.b = [np.zeros(5, dtype=np.float64)]
            self.name = "x"

    assert nbytes_of(Holder()) == 40 + 40


def test_server_caps_apply_to_uploaded_corpora(monkeypatch):
    from core.representations.corpus import CorpusError, Document
    from ui.corpus_state import within_deployment_limits

    docs = [Document(f"d{i}", "some text") for i in range(5)]
    monkeypatch.setenv("EXPLORER_MODE", "server")
    monkeypatch.setenv("EXPLORER_MAX_CORPUS_DOCS", "4")
    with pytest.raises(CorpusError, match="at most 4"):
        within_deployment_limits(docs, 100, "The file x.csv")
    with pytest.raises(CorpusError, match="at most 2 MB"):
        within_deployment_limits(docs[:2], 3 * 1024 * 1024, "The file x.csv")
    assert within_deployment_limits(docs[:4], 100, "The file x.csv") == docs[:4]


def test_model_turns_are_first_come_first_served_and_reentrant():
    from ui.models import model_turn

    served: list[int] = []
    first_inside = threading.Event()
    release = threading.Event()

    def first():
        with model_turn():
            with model_turn():  # a model run inside a model run does not wait for itself
                first_inside.set()
                release.wait(5)
            served.append(0)

    def later(i):
        with model_turn():
            served.append(i)

    threads = [threading.Thread(target=first)]
    threads[0].start()
    first_inside.wait(5)
    for i in range(1, 6):  # arrive one after another while the first holds the turn
        t = threading.Thread(target=later, args=(i,))
        t.start()
        threads.append(t)
        time.sleep(0.05)
    release.set()
    for t in threads:
        t.join(5)
    assert served == [0, 1, 2, 3, 4, 5]
