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
from ui.store import SHELVES, Shelf, Store

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


# --- the store --------------------------------------------------------------------------------------------------


def _store(entries: int, max_bytes: int) -> Store:
    return Store({"things": Shelf(entries, max_bytes), "others": Shelf(entries, max_bytes)})


def test_the_store_evicts_the_least_recent_past_its_entries():
    store = _store(3, 10_000)
    runs = [Run("m", (f"text {i}",)) for i in range(4)]
    for run in runs[:3]:
        store.put("things", run, (), np.zeros(10, dtype=np.int8))
    store.get("things", runs[0])  # used again: the least recent is now text 1
    store.put("things", runs[3], (), np.zeros(10, dtype=np.int8))
    assert len(store) == 3
    assert store.get("things", runs[1]) is None
    assert all(store.get("things", run) is not None for run in (runs[0], runs[2], runs[3]))


def test_the_store_evicts_past_its_bytes_and_keeps_nothing_larger_than_a_shelf():
    store = _store(100, 1000)
    runs = [Run("m", (f"text {i}",)) for i in range(3)]
    for run in runs:
        store.put("things", run, (), np.zeros(400, dtype=np.int8))  # 400 bytes each: the third pushes out the first
    assert store.total_bytes == 800 and store.get("things", runs[0]) is None and store.get("things", runs[2]) is not None
    big = store.get_or_compute("things", Run("m", ("big",)), (), lambda: np.zeros(1001, dtype=np.int8))
    assert big.nbytes == 1001 and store.get("things", Run("m", ("big",))) is None  # returned, not kept
    store.put("things", runs[0], (), torch.zeros(200, dtype=torch.float32))  # 800 bytes of tensor count too
    assert store.total_bytes == 800 and store.get("things", runs[2]) is None


def test_shelves_are_bounded_apart_and_params_tell_views_apart():
    store = _store(1, 10_000)
    run = Run("m", ("t",))
    store.put("things", run, (0, 1), "head 1")
    store.put("others", run, (0, 1), "other shelf")
    store.put("things", run, (0, 2), "head 2")  # one entry per shelf: head 1 goes, the other shelf keeps its own
    assert store.get("things", run, (0, 1)) is None and store.get("things", run, (0, 2)) == "head 2"
    assert store.get("others", run, (0, 1)) == "other shelf"


def test_forgetting_one_model_leaves_the_others():
    store = _store(10, 10_000)
    for model in ("a", "b"):
        for text in ("one", "two"):
            store.put("things", Run(model, (text,)), (), np.zeros(1))
            store.put("others", Run(model, (text,)), (7,), np.zeros(1))
    store.forget("a")
    assert len(store) == 4
    assert all(store.get(kind, Run("a", (t,)), p) is None for kind, p in (("things", ()), ("others", (7,)))
               for t in ("one", "two"))
    assert all(store.get(kind, Run("b", (t,)), p) is not None for kind, p in (("things", ()), ("others", (7,)))
               for t in ("one", "two"))
    store.forget()
    assert len(store) == 0


def test_a_key_that_is_not_a_run_is_refused():
    store = _store(10, 10_000)
    with pytest.raises(TypeError):
        store.get_or_compute("things", ("model-a", "The cat sat.", 64), (), lambda: 1)
    with pytest.raises(TypeError):
        store.get_or_compute("things", RUN, [3, 5], lambda: 1)
    with pytest.raises(KeyError, match="SHELVES"):
        store.get("no-such-kind", RUN)


def test_the_documented_totals_are_the_shelves():
    entries = sum(s.entries for s in SHELVES.values())
    gigabytes = sum(s.bytes for s in SHELVES.values()) / 1e9
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert f"at most {entries:,} entries and {gigabytes:.1f} GB" in text


# --- no cache key built by hand -----------------------------------------------------------------------------------

# ui/page_state.py keeps the texts links name by their content id (a text, not a result computed from a run: it
# belongs to no model and must outlive a model's results), in a BoundedCache of its own.
NOT_A_RESULT = {"ui/page_state.py": {"BoundedCache"}}
STORE_ONLY = {"BoundedCache", "bounded_store", "get_or_compute", "_items", "shelf"}


def _sources():
    for folder in ("ui", "app_pages"):
        for path in sorted((ROOT / folder).glob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel not in ("ui/store.py", "ui/bounded_cache.py"):
                yield rel, ast.parse(path.read_text(encoding="utf-8"))


def test_only_the_store_module_touches_a_bounded_cache():
    found = []
    for rel, tree in _sources():
        allowed = NOT_A_RESULT.get(rel, set())
        for node in ast.walk(tree):
            name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
            if name in STORE_ONLY - allowed:
                found.append(f"{rel}:{node.lineno} {name}")
    assert not found, "cache results through ui.store (cached / stored with a Run), not by hand: " + ", ".join(found)


def test_no_stored_result_is_keyed_by_a_tuple_built_by_hand():
    found = []
    for rel, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("cached", "stored"):
                if len(node.args) > 1 and isinstance(node.args[1], ast.Tuple):
                    found.append(f"{rel}:{node.lineno}")
    assert not found, "the second argument of cached()/stored() is a Run: " + ", ".join(found)


# --- the model is resolved once; the recorded pass travels with its analysis --------------------------------------


def test_a_view_resolves_its_model_name_once(tiny_bert_dir, monkeypatch):
    from ui import cache

    loads = []
    load = cache.load_cached_model
    monkeypatch.setattr(cache, "load_cached_model", lambda name, signature: loads.append(name) or load(name, signature))
    text = "the cat sat on the mat and it was happy to be home"  # no other test reads this text
    cache.cached_attention_view(tiny_bert_dir, text, None, "norm-weighted", "show", False)
    assert loads == [tiny_bert_dir]  # the analysis, norm-weighted attention and the view: one lookup
    loads.clear()
    cache.cached_head_stats(tiny_bert_dir, text, None, "norm-weighted")
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
