"""The public names checks outside the repository call (issue 49 item 2): each at exactly its documented path, with its
documented signature, and docs/architecture.md's table of them agreeing with the code."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"

# Written here by hand from the list (not read from the code or the doc): the path and the call each check makes.
CONTRACT = {
    "core.model.models.load_model": "load_model(name=None, *, device=None)",
    "core.model.inference.analyze": "analyze(model, text, *, max_tokens=None, on_demand=None)",
    "core.model.inference.analyze_many":
        "analyze_many(model, texts, *, max_tokens=None, batch_size=16, attentions=True, progress=None)",
    "core.model.seq2seq.analyze_pair": "analyze_pair(model, source, target=None, *, max_tokens=None)",
    "core.model.recording.is_recordable": "is_recordable(model)",
    "core.model.trace.record": "record(model, text, *, max_tokens=None, progress=None)",
    "core.errors.UserFacingError": "class UserFacingError(Exception)",
    "core.errors.AnalysisError": "class AnalysisError(UserFacingError, ValueError)",
    "core.attention_heads.attention.top_attended": "top_attended(analysis, layer, *, head=None, skip_special=True)",
    "core.attention_heads.attention.rollout": "rollout(analysis)",
    "core.attention_heads.attention.norm_weighted": "norm_weighted(model, analysis)",
    "core.attention_heads.attention.head_attention": "head_attention(model, analysis, layer, head)",
    "core.attention_heads.inside_head.compute_head": "compute_head(model, analysis, layer, head)",
    "core.attention_heads.induction.induction_scores": "induction_scores(model, *, length=40, seed=0)",
    "core.attention_heads.retrieval.retrieval_scores":
        "retrieval_scores(lm, haystack, needle, question, answer, depth)",
    "core.attention_heads.qk_map.query_key_map": "query_key_map(model, texts, layer, head, *, method='pca', rotary=True, "
                                                  "max_tokens=None, corpus=None, random_state=0)",
    "core.causal.effects.ablate_heads": "ablate_heads(model, text, heads, *, method='zero', max_tokens=None)",
    "core.causal.effects.head_importance": "head_importance(model, text, *, measure='embedding', method='zero', "
                                           "target=None, progress=None, max_tokens=None)",
    "core.causal.patching.patch_residual": "patch_residual(lm, clean, corrupted, answer, wrong, *, progress=None)",
    "core.causal.patching.patch_heads": "patch_heads(lm, clean, corrupted, answer, wrong, *, progress=None)",
    "core.causal.logit_attribution.direct_logit_attribution": "direct_logit_attribution(lm, text, answer, wrong=None)",
    "core.causal.flow.contributions": "contributions(model, text, *, max_tokens=None, progress=None)",
    "core.outputs.lens.logit_lens": "logit_lens(model, analysis, *, k=5, start=0)",
    "core.outputs.predictions.load_language_model": "load_language_model(model)",
    "core.outputs.predictions.predict": "predict(lm, text, top_k=10, *, max_tokens=None)",
    "core.outputs.generation.next_token_distribution":
        "next_token_distribution(lm, text, *, temperature=1.0, top_k=0, top_p=1.0)",
    "core.representations.drift.layer_similarity": "layer_similarity(model, documents, *, reference='static', "
                                                   "pooling='mean', batch_size=16, max_tokens=None, progress=None)",
    "core.representations.senses.separation": "separation(vectors, labels)",
    "core.representations.senses.parse_labelled_lines": "parse_labelled_lines(text)",
    "core.representations.senses.find_word": "find_word(text, word)",
    "core.representations.senses.occurrence_embeddings":
        "occurrence_embeddings(model, sentences, word, *, batch_size=16, progress=None)",
    "core.representations.senses.builtin_words": "builtin_words()",
    "core.representations.senses.builtin_set": "builtin_set(word)",
    "core.maths.projection.project": "project(vectors, method='umap', random_state=0)",
}


def call_form(obj) -> str:
    """How a caller sees ``obj``: ``name(params)`` with defaults and markers, no annotations; ``class Name(Bases)``."""
    if inspect.isclass(obj):
        return f"class {obj.__name__}({', '.join(base.__name__ for base in obj.__bases__)})"
    params = [p.replace(annotation=inspect.Parameter.empty) for p in inspect.signature(obj).parameters.values()]
    return f"{obj.__name__}{inspect.Signature(params)}"


def documented() -> dict[str, str]:
    """``{path: call form}`` from docs/architecture.md's table of public names."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text[text.index("**Public names.**"):]
    section = section[:section.index("\n\n", section.index("| module |"))]
    rows = re.findall(r"^\| `([\w.]+)` \| `(.+)` \|$", section, flags=re.M)
    found = {}
    for module, form in rows:
        name = re.match(r"(?:class )?(\w+)", form).group(1)
        assert f"{module}.{name}" not in found, f"{module}.{name} is listed twice"
        found[f"{module}.{name}"] = form
    return found


def _resolve(path: str):
    module, name = path.rsplit(".", 1)
    return importlib.import_module(module), name


@pytest.mark.parametrize("path", sorted(CONTRACT))
def test_each_public_name_lives_at_its_path_with_its_signature(path):
    module, name = _resolve(path)
    obj = getattr(module, name)
    assert obj.__module__ == module.__name__, f"{path} is re-exported from {obj.__module__}, not defined there"
    assert call_form(obj) == CONTRACT[path]


def test_the_architecture_table_lists_exactly_these_names_and_signatures():
    assert documented() == CONTRACT


def test_the_table_reader_reads_rows_and_refuses_a_name_listed_twice(tmp_path, monkeypatch):
    """The check itself can fail: a row it reads is one name, and a doubled row is reported."""
    doc = tmp_path / "architecture.md"
    rows = "| `core.a` | `f(x, *, k=1)` |\n| `core.errors` | `class E(Exception)` |\n"
    doc.write_text(f"**Public names.** text\n\n| module | public name and signature |\n| --- | --- |\n{rows}\nafter\n")
    monkeypatch.setitem(globals(), "ARCHITECTURE", doc)
    assert documented() == {"core.a.f": "f(x, *, k=1)", "core.errors.E": "class E(Exception)"}
    doc.write_text(doc.read_text().replace(rows, rows + rows))
    with pytest.raises(AssertionError, match="listed twice"):
        documented()


def test_call_form_shows_what_a_caller_must_pass():
    def f(a, b=2, *, c: int = 3, d="x"):
        return a

    class Base(Exception):
        pass

    class Child(Base, ValueError):
        pass

    assert call_form(f) == "f(a, b=2, *, c=3, d='x')"
    assert call_form(Child) == "class Child(Base, ValueError)"


@pytest.mark.parametrize("module", ["core.models", "core.inference", "core.flow", "core.attention", "core.heads"])
def test_the_old_flat_paths_are_gone(module):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(module)


def test_inference_gives_no_seq2seq_names_on_demand():
    """The module-level ``__getattr__`` that lent ``analyze_pair`` to ``core.model.inference`` is gone (one address)."""
    inference = importlib.import_module("core.model.inference")
    assert not hasattr(inference, "__getattr__")
    with pytest.raises(AttributeError):
        _ = inference.analyze_pair
