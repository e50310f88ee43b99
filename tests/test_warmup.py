"""Start-up work stays out of the pages' way: background warm-up waits for an idle server, and what lives as long
as the process (libraries, loaded models) is kept out of the garbage collector's full collections."""

from __future__ import annotations

import gc
import threading

from ui import idle, warmup


def _waiter(**kwargs) -> tuple[threading.Thread, threading.Event]:
    done = threading.Event()

    def wait():
        idle.wait_until_idle(**kwargs)
        done.set()

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread, done


def test_idle_wait_lasts_while_a_page_runs_and_ends_after_it():
    with idle.page_running():
        thread, done = _waiter(idle_seconds=0.05)
        thread.join(timeout=0.5)
        assert not done.is_set(), "background work started while a page was running"
    thread.join(timeout=10)
    assert done.is_set(), "background work never started after the page finished"


def test_idle_wait_counts_every_running_page():
    first, second = idle.page_running(), idle.page_running()
    first.__enter__()
    second.__enter__()
    thread, done = _waiter(idle_seconds=0.05)
    first.__exit__(None, None, None)
    thread.join(timeout=0.5)
    assert not done.is_set(), "one page finished, another still runs: the wait must go on"
    second.__exit__(None, None, None)
    thread.join(timeout=10)
    assert done.is_set()


def test_a_page_that_needs_the_work_ends_the_wait():
    wake = threading.Event()
    with idle.page_running():
        thread, done = _waiter(wake=wake, idle_seconds=0.05)
        thread.join(timeout=0.3)
        assert not done.is_set()
        wake.set()
        idle.wake_idle_waiters()
        thread.join(timeout=10)
        assert done.is_set(), "the page asking for the work now was not answered while it ran"


def test_a_page_run_that_raises_still_counts_as_finished():
    try:
        with idle.page_running():
            raise RuntimeError("st.stop() or st.rerun() end a run with an exception")
    except RuntimeError:
        pass
    thread, done = _waiter(idle_seconds=0.05)
    thread.join(timeout=10)
    assert done.is_set()


def test_a_loaded_model_is_frozen_out_of_full_collections(tiny_bert_dir):
    from ui.cache import cached_model, load_cached_model

    load_cached_model.clear()
    before = gc.get_freeze_count()
    try:
        model = cached_model(tiny_bert_dir)
        assert gc.get_freeze_count() > before
        # The model's own objects are among the frozen ones: a full collection no longer walks them.
        assert not any(obj is model.model for obj in gc.get_objects(generation=2))
    finally:
        gc.unfreeze()
        load_cached_model.clear()


def test_a_fragment_rerun_counts_as_a_page_run(monkeypatch):
    """A click reruns only a fragment (not ``app.py``, which wraps page runs): it must keep background work waiting
    too, or UMAP's compilation starts in the middle of a learner's clicks."""
    import streamlit as st

    from ui import errors

    # the fragment's body, as Streamlit calls it on a rerun
    monkeypatch.setattr(st, "fragment", lambda func=None, **_options: func if func is not None else (lambda f: f))
    seen = []

    @errors.friendly_fragment
    def pick_a_head():
        thread, done = _waiter(idle_seconds=0.05)
        thread.join(timeout=0.5)
        seen.append(done.is_set())

    pick_a_head()
    assert seen == [False], "background work started while a fragment was running"


def test_the_collector_is_off_while_the_warm_up_imports_and_loads_and_on_after(monkeypatch):
    """Start-up: full collections over the freshly imported libraries cost ~0.9 CPU-s, so the warm-up runs with the
    cyclic collector off; it must be on again afterwards, also when the model could not be loaded."""
    import ui.cache
    import ui.cache_senses

    seen = []

    def load(name):
        seen.append(gc.isenabled())
        raise RuntimeError("the bundled model could not be loaded")

    monkeypatch.setattr(ui.cache, "cached_model", load)
    monkeypatch.setattr(ui.cache_senses, "start_umap_warmup", lambda: seen.append("umap"))
    monkeypatch.setattr(warmup, "_started", threading.Event())
    assert gc.isenabled()
    thread = warmup.start_warmup()
    assert thread is not None
    thread.join(timeout=30)
    assert seen == [False, "umap"], "the model was loaded with the collector on, or UMAP's warm-up was not started"
    assert gc.isenabled(), "the collector stayed off after the warm-up"
    assert warmup.wait_for_imports(timeout=0)
    assert warmup.start_warmup() is None, "a second call must not start another warm-up"


def test_a_freeze_while_the_collector_is_off_keeps_every_object_without_a_pass_over_them(monkeypatch):
    """At start-up every object is young (the collector is off): a collection before freezing would walk them all."""
    from ui.cache import freeze_long_lived

    collections = []
    monkeypatch.setattr(gc, "collect", lambda generation=2: collections.append(generation) or 0)
    monkeypatch.setattr(gc, "get_freeze_count", lambda: 0)
    monkeypatch.setattr(gc, "freeze", lambda: collections.append("freeze"))
    monkeypatch.setattr(gc, "isenabled", lambda: False)
    freeze_long_lived()
    assert collections == ["freeze"]
    monkeypatch.setattr(gc, "isenabled", lambda: True)
    collections.clear()
    freeze_long_lived()
    assert collections == [1, "freeze"], "with the collector on, the young generations are collected first"
    monkeypatch.setattr(gc, "get_freeze_count", lambda: 1000)
    collections.clear()
    freeze_long_lived()
    assert collections == [2, "freeze"], "later (another model loaded while pages ran) garbage is collected first"


def test_waiting_for_the_imports_can_be_bounded(monkeypatch):
    lock = threading.Lock()
    monkeypatch.setattr(warmup, "_importing", lock)
    lock.acquire()
    assert warmup.wait_for_imports(timeout=0.05) is False
    assert lock.locked(), "a bounded wait must leave the lock as it found it"
    threading.Timer(0.1, lock.release).start()
    assert warmup.wait_for_imports() is True
    assert not lock.locked() and warmup.wait_for_imports(timeout=0) is True


def test_the_warm_up_leaves_a_collector_that_was_off_off(monkeypatch):
    """A host that switched the collector off itself (a notebook, a profiler) keeps it off after the warm-up."""
    import ui.cache
    import ui.cache_senses

    monkeypatch.setattr(ui.cache, "cached_model", lambda name: None)
    monkeypatch.setattr(ui.cache_senses, "start_umap_warmup", lambda: None)
    monkeypatch.setattr(warmup, "_started", threading.Event())
    gc.disable()
    try:
        warmup.start_warmup().join(timeout=30)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_warm_up_converts_the_bundled_language_model_once_and_the_sidebar_says_how_long(monkeypatch, tmp_path):
    """Issue 40, item 15: a starting server converts SmolLM2 into its cache (a stand-in for the real conversion
    here), says meanwhile that it is converting, and leaves a cache its load accepts."""
    from core.model import bundled_lm
    from ui.sidebar import language_model_wait

    monkeypatch.setenv(bundled_lm.CACHE_ENV, str(tmp_path / "cache"))
    said = []

    def convert(target, source, name=bundled_lm.LM_NAME):
        said.append(language_model_wait())  # what the sidebar's help says while it converts
        (target / "config.json").write_text("{}")
        bundled_lm.write_manifest(target, source, conversion_seconds=0.0, name=name)

    monkeypatch.setattr(bundled_lm, "_convert_into", convert)
    assert ("its first load converts its weights once, about 40 s (measured on a 2-core machine busy with other work; "
            "less on a quiet one)") in language_model_wait()
    assert warmup.prepare_language_model() is not None
    assert "being converted since the server started" in said[0]
    assert bundled_lm.cache_ready() and "converted on this machine already" in language_model_wait()
    assert warmup.prepare_language_model() is None and len(said) == 1  # a sound cache is not converted again
