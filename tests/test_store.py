"""The run key (``core.model.run.Run``) and the one store of results (``ui.store``), issue 37 item 3."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pytest
import torch

from core.model.run import Ablation, Run
from ui.store import DECLARED, Result, Store

ROOT = Path(__file__).resolve().parents[1]
RUN = Run("model-a", ("The cat sat.",), 64, Ablation(((0, 1),), "zero"), (("config.json", 10, 1),))


# --- the run key ------------------------------------------------------------------------------------------------


def test_equal_runs_give_equal_keys():
    twin = Run("model-a", ("The cat sat.",), 64, Ablation(((0, 1),), "zero"), (("config.json", 10, 1),))
    assert twin == RUN and hash(twin) == hash(RUN) and twin.digest == RUN.digest
    assert Store.key(twin, (3, 5)) == Store.key(RUN, (3, 5))
    assert RUN.ablated([(0, 1), (0, 1)], "zero") == RUN  # the same heads, listed twice: the same knock-out


@pytest.mark.parametrize("changed", [
    {"model": "model-b"},
    {"texts": ("The cat sat!",)},
    {"texts": ("The cat sat.", "A second text.")},
    {"max_tokens": 63},
    {"max_tokens": None},
    {"ablation": None},
    {"ablation": Ablation(((0, 2),), "zero")},
    {"ablation": Ablation(((0, 1),), "mean")},
    {"revision": (("config.json", 10, 2),)},
])
def test_runs_differing_in_any_field_give_different_keys(changed):
    other = replace(RUN, **changed)
    assert other != RUN and other.digest != RUN.digest
    assert Store.key(other, (3, 5)) != Store.key(RUN, (3, 5))


def test_every_field_of_a_run_is_covered_above():
    covered = {"model", "texts", "max_tokens", "ablation", "revision"}
    assert {f.name for f in fields(Run)} == covered  # a new field needs a case in the test above


def test_knockouts_are_the_same_run_in_any_order_and_no_heads_is_the_plain_run():
    plain = Run("m", ("t",))
    assert plain.ablated([(3, 5), (0, 1)], "zero") == plain.ablated([(0, 1), (3, 5)], "zero")
    assert plain.ablated([], "zero") == plain and plain.ablated([(1, 1)], "mean").plain() == plain
    assert plain.ablated([(3, 5), (0, 1)], "zero").ablation.heads == ((0, 1), (3, 5))


def test_the_digest_is_short_and_the_same_in_another_process():
    script = "from core.model.run import Ablation, Run; print(Run('model-a', ('The cat sat.',), 64, " \
             "Ablation(((0, 1),), 'zero'), (('config.json', 10, 1),)).digest)"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # hash() of a str differs between processes; the digest may not
    other = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert re.fullmatch(r"[0-9a-f]{12}", RUN.digest)
    assert other.stdout.strip() == RUN.digest


def test_a_run_refuses_a_list_of_texts_and_a_raw_ablation():
    with pytest.raises(TypeError):
        Run("m", ["a text"])
    with pytest.raises(TypeError):
        Run("m", ("a text",), ablation=(((0, 1),), "zero"))
    with pytest.raises(ValueError):
        _ = Run("m", ("one", "two")).text


# --- the store and the declarations ---------------------------------------------------------------------------


def _results(entries: int, max_bytes: int, name: str) -> tuple[Store, Result, Result]:
    """A fresh store and two declared kinds of result (names unique to the test: a kind is declared once)."""
    things = Result(f"test-things-{name}", lambda model, run: None, entries=entries, megabytes=max_bytes / 1e6,
                    reads="nothing", turn=False)
    others = Result(f"test-others-{name}", lambda model, run: None, entries=entries, megabytes=max_bytes / 1e6,
                    reads="nothing", turn=False)
    return Store(), things, others


def _put(store: Store, result: Result, run: Run, options: tuple, value) -> None:
    store.shelf(result).put(Store.key(run, options), value)


def _get(store: Store, result: Result, run: Run, options: tuple = ()):
    return store.shelf(result).get(Store.key(run, options))


def test_the_store_evicts_the_least_recent_past_its_entries():
    store, things, _ = _results(3, 10_000, "entries")
    runs = [Run("m", (f"text {i}",)) for i in range(4)]
    for run in runs[:3]:
        _put(store, things, run, (), np.zeros(10, dtype=np.int8))
    _get(store, things, runs[0])  # used again: the least recent is now text 1
    _put(store, things, runs[3], (), np.zeros(10, dtype=np.int8))
    assert len(store) == 3
    assert _get(store, things, runs[1]) is None
    assert all(_get(store, things, run) is not None for run in (runs[0], runs[2], runs[3]))


def test_the_store_evicts_past_its_bytes_and_keeps_nothing_larger_than_a_shelf():
    store, things, _ = _results(100, 1000, "bytes")
    runs = [Run("m", (f"text {i}",)) for i in range(3)]
    for run in runs:
        _put(store, things, run, (), np.zeros(400, dtype=np.int8))  # 400 bytes each: the third pushes out the first
    assert store.total_bytes == 800 and _get(store, things, runs[0]) is None and _get(store, things, runs[2]) is not None
    big = store.shelf(things).get_or_compute(Store.key(Run("m", ("big",))), lambda: np.zeros(1001, dtype=np.int8))
    assert big.nbytes == 1001 and _get(store, things, Run("m", ("big",))) is None  # returned, not kept
    _put(store, things, runs[0], (), torch.zeros(200, dtype=torch.float32))  # 800 bytes of tensor count too
    assert store.total_bytes == 800 and _get(store, things, runs[2]) is None


def test_shelves_are_bounded_apart_and_options_tell_views_apart():
    store, things, others = _results(1, 10_000, "apart")
    run = Run("m", ("t",))
    _put(store, things, run, (0, 1), "head 1")
    _put(store, others, run, (0, 1), "other shelf")
    _put(store, things, run, (0, 2), "head 2")  # one entry per shelf: head 1 goes, the other shelf keeps its own
    assert _get(store, things, run, (0, 1)) is None and _get(store, things, run, (0, 2)) == "head 2"
    assert _get(store, others, run, (0, 1)) == "other shelf"


def test_forgetting_one_model_leaves_the_others():
    store, things, others = _results(10, 10_000, "forget")
    for model in ("a", "b"):
        for text in ("one", "two"):
            _put(store, things, Run(model, (text,)), (), np.zeros(1))
            _put(store, others, Run(model, (text,)), (7,), np.zeros(1))
    store.forget("a")
    assert len(store) == 4
    assert all(_get(store, kind, Run("a", (t,)), p) is None for kind, p in ((things, ()), (others, (7,)))
               for t in ("one", "two"))
    assert all(_get(store, kind, Run("b", (t,)), p) is not None for kind, p in ((things, ()), (others, (7,)))
               for t in ("one", "two"))
    store.forget()
    assert len(store) == 0


def test_a_key_that_is_not_a_run_is_refused_and_a_kind_is_declared_once():
    with pytest.raises(TypeError):
        Store.key(("model-a", "The cat sat.", 64), ())
    with pytest.raises(TypeError):
        Store.key(RUN, [3, 5])
    _results(1, 1, "twice")
    with pytest.raises(ValueError, match="declared twice"):
        _results(1, 1, "twice")


def test_a_declared_result_is_computed_once_read_only_and_peeked_without_computing(tiny_bert_dir):
    calls = []
    doubled = Result("test-doubled", lambda model, run, factor: calls.append(factor) or np.arange(3) * factor,
                     entries=4, megabytes=1, reads="nothing", turn=False)
    assert doubled.peek(tiny_bert_dir, "a text", 2) is None and calls == []
    first = doubled(tiny_bert_dir, "a text", 2)
    assert doubled(tiny_bert_dir, "a text", 2) is first and calls == [2]  # kept: computed once
    assert doubled.peek(tiny_bert_dir, "a text", 2) is first
    assert doubled(tiny_bert_dir, "a text", 3)[2] == 6 and calls == [2, 3]  # another option, another result
    assert doubled(tiny_bert_dir, "other text", 2) is not first  # another text, another run
    with pytest.raises(ValueError):
        first[0] = 1  # shared by every session: read-only


def test_a_computation_holding_the_model_turn_may_not_wait_for_one_outside_it(tiny_bert_dir):
    """The turn rule of ui/store.py: another session could be computing the outside result and waiting for the turn."""
    outside = Result("test-outside", lambda model, run: "outside", entries=4, megabytes=1, reads="nothing",
                     turn=False)
    inside = Result("test-inside", lambda model, run: outside.at(run), entries=4, megabytes=1, reads="nothing")
    with pytest.raises(RuntimeError, match="inside the model turn"):
        inside(tiny_bert_dir, "a text")
    outside(tiny_bert_dir, "a text")
    assert inside(tiny_bert_dir, "a text") == "outside"  # kept already: read, never waited for


def test_the_documented_totals_are_the_declared_shelves():
    import ui.results  # noqa: F401 - every declaration, so that budget() counts them all

    declared = [result for kind, result in DECLARED.items() if not kind.startswith("test-")]
    entries, max_bytes = sum(r.entries for r in declared), sum(r.max_bytes for r in declared)
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert f"at most {entries:,} entries and {max_bytes / 1e9:.1f} GB" in text


# --- one place declares every result; nothing else touches the store --------------------------------------------

# ui/linked_texts.py keeps the texts links name by their content id (a text, not a result computed from a run: it
# belongs to no model and must outlive a model's results), in a BoundedCache of its own.
NOT_A_RESULT = {"ui/linked_texts.py": {"BoundedCache"}}
STORE_ONLY = {"BoundedCache", "bounded_store", "get_or_compute", "_items", "shelf"}
# a generation written a chunk at a time with Stop is not one computation: its writer takes the turn per chunk
TAKES_THE_TURN_BY_HAND = {"ui/lm_writer.py"}


def _sources():
    for folder in ("ui", "app_pages"):
        for path in sorted((ROOT / folder).glob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel not in ("ui/store.py", "ui/bounded_cache.py", "ui/models.py"):
                yield rel, ast.parse(path.read_text(encoding="utf-8"))


def _names(tree):
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if name is not None:
            yield node, name


def test_only_the_store_module_touches_a_bounded_cache():
    found = [f"{rel}:{node.lineno} {name}" for rel, tree in _sources() for node, name in _names(tree)
             if name in STORE_ONLY - NOT_A_RESULT.get(rel, set())]
    assert not found, "read results through their declaration in ui/results.py, not the store: " + ", ".join(found)
    importers = [f"{rel}:{node.lineno}" for rel, tree in _sources() if rel != "ui/results.py" for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module == "ui.store"]
    assert not importers, "only ui/results.py declares results over ui.store: " + ", ".join(importers)


def test_every_result_is_declared_in_one_place_and_no_page_takes_the_model_turn():
    declared = [f"{rel}:{node.lineno}" for rel, tree in _sources() if rel != "ui/results.py"
                for node, name in _names(tree) if name == "Result" and isinstance(node, ast.Name)]
    assert not declared, "declare every kind of result in ui/results.py: " + ", ".join(declared)
    by_hand = [f"{rel}:{node.lineno}" for rel, tree in _sources() if rel not in TAKES_THE_TURN_BY_HAND
               for node, name in _names(tree) if name in ("model_turn", "MODEL_RUNS")]
    assert not by_hand, "a computation that runs the model is a Result declared turn=True: " + ", ".join(by_hand)


# --- the model is resolved once; the recorded pass travels with its analysis --------------------------------------


def test_a_kept_view_loads_no_model_and_a_computed_one_resolves_it_once_per_result(tiny_bert_dir, monkeypatch):
    from ui import models, results

    loads = []
    load = models.load_once
    monkeypatch.setattr(models, "load_once", lambda name, signature: loads.append(name) or load(name, signature))
    text = "the cat sat on the mat and it was happy to be home"  # no other test reads this text
    results.attention_views(tiny_bert_dir, text, "norm-weighted", "show", False)
    # the trace, the analysis read from it and norm-weighted attention each resolve the model; the view does not
    assert loads == [tiny_bert_dir] * 3
    loads.clear()
    results.attention_views(tiny_bert_dir, text, "norm-weighted", "show", False)
    results.head_stats(tiny_bert_dir, text, "norm-weighted")  # reads the model's tokenizer, the rest is kept
    assert loads == [tiny_bert_dir]


def test_taking_a_head_apart_reads_the_pass_of_its_own_analysis(tiny_gpt2):
    from core.attention_heads.inside_head import compute_head
    from core.causal.effects import ablate_heads
    from core.model.inference import analyze, analyze_many

    model = tiny_gpt2
    text = "the cat sat on the mat"
    plain = analyze(model, text)
    knocked = ablate_heads(model, text, [(0, 0), (0, 1), (0, 2), (0, 3)], method="zero")  # same ids, another pass
    passes = []
    handle = model.model.register_forward_hook(lambda *_: passes.append(1))
    try:
        for analysis in (plain, knocked):
            for head in range(model.num_heads):
                # the model's own weights (output_attentions), an independent path from the recorded queries and keys
                np.testing.assert_allclose(compute_head(model, analysis, 1, head).weights,
                                           analysis.attentions[1, head], atol=1e-5)
        assert passes == []  # every head of both analyses came from the pass that made it
        assert not np.allclose(plain.attentions[1], knocked.attentions[1], atol=1e-4)
        [batched, _] = analyze_many(model, [text, "a bird flies"])
        assert batched.recorded is None
        passes.clear()
        compute_head(model, batched, 1, 0)
        assert passes == [1]  # a batch's analysis has no pass of its own: one recorded pass, not kept
    finally:
        handle.remove()


def test_an_analysis_kept_from_an_earlier_load_is_taken_apart_by_a_new_load(tiny_bert_dir, tiny_bert):
    """The store outlives a model evicted from Streamlit's model cache: the reloaded model must still read it."""
    from core.attention_heads.attention import norm_weighted
    from core.attention_heads.inside_head import compute_head
    from core.model.inference import analyze
    from core.model.models import load_model

    kept = analyze(tiny_bert, "the cat sat on the mat")
    reloaded = load_model(tiny_bert_dir)  # another object, the same weights
    np.testing.assert_allclose(norm_weighted(reloaded, kept), norm_weighted(tiny_bert, kept), atol=1e-5)
    np.testing.assert_allclose(compute_head(reloaded, kept, 1, 2).weights, kept.attentions[1, 2], atol=1e-5)


def test_a_text_that_fits_under_two_limits_is_read_from_one_trace(tiny_gpt2_dir):
    """Home reads the model's limit and Attention its own: a short text fits under both, so both read one trace (the
    issue's count: Attention ran a second pass over the same text); a text cut by a limit keeps a trace of its own."""
    from ui import results

    text = "one short text read under two token limits, no other test reads it"
    under_a_limit = results.analyses(tiny_gpt2_dir, text, max_tokens=64)
    whole = results.analyses(tiny_gpt2_dir, text)
    assert under_a_limit is whole and not whole.truncated
    assert results.traces(tiny_gpt2_dir, text, max_tokens=64) is results.traces(tiny_gpt2_dir, text) is whole.trace
    cut = results.analyses(tiny_gpt2_dir, text, max_tokens=4)
    assert cut.num_tokens == 4 and cut.truncated and cut.trace is not whole.trace


def test_a_model_loaded_again_after_its_cache_let_it_go_drops_the_results_of_the_old_one(tiny_bert_dir):
    """A trace calls its model's blocks again: kept past the model it was read from (``ui.models.load_once`` holds
    ``MAX_MODELS`` and lets the oldest go), it could only say the model "was loaded again". So loading a name again
    drops its kept results, as a folder saved again does, and they are computed from the new model."""
    from core.model.trace import record
    from ui.models import load_once, loaded_model

    traced = Result("test-traced", lambda model, run: record(model, run.text), entries=4, megabytes=10)
    first = traced(tiny_bert_dir, "a text")
    assert traced(tiny_bert_dir, "a text") is first
    load_once.clear()  # as when other models push it out of the cache
    assert loaded_model(tiny_bert_dir) is not None
    assert traced.peek(tiny_bert_dir, "a text") is None  # dropped with the old model
    again = traced(tiny_bert_dir, "a text")
    assert again is not first
    assert again.attention("self", 0).shape[0] > 0  # the new trace reads its (live) model's blocks
