"""core.representations.drift: layer similarity against a direct computation, batching, baselines, [CLS] and pooler."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from core.model.inference import analyze_many
from core.representations.drift import CorpusEmbeddings, baseline_table, cls_table, drift_table, embed_corpus, layer_similarity

DOCUMENTS = [
    "The cat sat on the mat.",
    "I will hike along the bank of a river, and then the cat was happy to be home.",
    "A bass fish swims.",
    "I will open a new account at my bank and deposit some money.",
    "Spring water.",
]


def _direct_hidden_states(model, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """One text alone through the raw transformers model: ([L + 1, T, D], special mask [T], pooler or None)."""
    encoding = model.tokenizer(text, return_tensors="pt", return_special_tokens_mask=True)
    with torch.no_grad():
        out = model.model(
            input_ids=encoding["input_ids"], attention_mask=encoding["attention_mask"], output_hidden_states=True
        )
    hidden = torch.stack(out.hidden_states)[:, 0].numpy().astype(np.float64)
    pooler = getattr(out, "pooler_output", None)
    return hidden, encoding["special_tokens_mask"][0].bool().numpy(), None if pooler is None else pooler[0].numpy()


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _direct_pool(hidden: np.ndarray, special: np.ndarray, pooling: str) -> np.ndarray:
    if pooling == "mean":
        return hidden.sum(axis=1) / hidden.shape[1]
    if pooling == "mean_no_special":
        return hidden[:, ~special].sum(axis=1) / (~special).sum()
    if pooling == "cls":
        return hidden[:, 0]
    return hidden.max(axis=1)


@pytest.mark.parametrize("pooling", ["mean", "mean_no_special", "cls", "max"])
@pytest.mark.parametrize("reference", ["static", "previous"])
def test_layer_similarity_equals_a_direct_computation(tiny_model, reference, pooling):
    table = layer_similarity(tiny_model, DOCUMENTS, reference=reference, pooling=pooling, batch_size=2)
    assert list(table.columns) == ["document", "layer", "cosine_similarity"]
    layers = tiny_model.num_layers
    assert len(table) == len(DOCUMENTS) * layers
    for d, text in enumerate(DOCUMENTS):  # noqa: B007 - d is read by the query below (@d)
        hidden, special, _ = _direct_hidden_states(tiny_model, text)
        pooled = _direct_pool(hidden, special, pooling)
        for k in range(1, layers + 1):
            expected = _cos(pooled[0 if reference == "static" else k - 1], pooled[k])
            got = table.query("document == @d and layer == @k")["cosine_similarity"].item()
            assert got == pytest.approx(expected, abs=1e-5)


def test_mean_pooling_includes_special_tokens_and_no_special_excludes_them(tiny_bert):
    with_special = layer_similarity(tiny_bert, DOCUMENTS[:1], pooling="mean")
    without = layer_similarity(tiny_bert, DOCUMENTS[:1], pooling="mean_no_special")
    assert not np.allclose(with_special["cosine_similarity"], without["cosine_similarity"])


def test_batched_with_padding_equals_one_document_at_a_time(tiny_model):
    one = layer_similarity(tiny_model, DOCUMENTS, batch_size=1)
    batched = layer_similarity(tiny_model, DOCUMENTS, batch_size=4)
    pd.testing.assert_frame_equal(one, batched, atol=1e-5, rtol=0)


def test_progress_reports_every_document(tiny_bert):
    calls = []
    embed_corpus(tiny_bert, DOCUMENTS, batch_size=2, progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (len(DOCUMENTS), len(DOCUMENTS))
    assert len(calls) == 3


def test_truncation_is_reported_per_document(tiny_bert):
    long_text = "the cat sat on the mat " * 30  # far more than the tiny model's 64 positions
    embeddings = embed_corpus(tiny_bert, [DOCUMENTS[0], long_text])
    assert embeddings.truncated.tolist() == [False, True]
    assert embeddings.num_tokens[1] == tiny_bert.max_tokens == 64
    assert embeddings.num_input_tokens[1] > 64
    assert embeddings.num_input_tokens[0] == embeddings.num_tokens[0] == 9  # [CLS] 6 words . [SEP]


def test_unknown_options_are_refused(tiny_bert):
    with pytest.raises(ValueError, match="pooling"):
        layer_similarity(tiny_bert, DOCUMENTS, pooling="median")
    with pytest.raises(ValueError, match="reference"):
        layer_similarity(tiny_bert, DOCUMENTS, reference="first")


def _hand_embeddings(vectors: np.ndarray, pooler: np.ndarray | None = None) -> CorpusEmbeddings:
    """CorpusEmbeddings whose every pooling is ``vectors`` ``[N, L + 1, D]``."""
    n = vectors.shape[0]
    return CorpusEmbeddings(
        "hand",
        False,
        {p: vectors.astype(np.float32) for p in ("mean", "mean_no_special", "cls", "max")},
        pooler,
        np.full(n, 3),
        np.full(n, 3),
        np.zeros(n, dtype=bool),
    )


def test_baseline_by_hand():
    # 3 documents, layers 0 and 1, 2-d vectors. Layer 0: e1, e1, e2. Layer 1: e1, e2, e2.
    e1, e2 = [1.0, 0.0], [0.0, 1.0]
    vectors = np.array([[e1, e1], [e1, e2], [e2, e2]])
    table = baseline_table(_hand_embeddings(vectors), reference="static")
    # anisotropy of layer 1: pairs (0,1)=0, (0,2)=0, (1,2)=1 → 1/3 (ordered pairs give the same mean)
    assert table["anisotropy"].tolist() == pytest.approx([1 / 3])
    # baseline: cos(layer 0 of i, layer 1 of j), i ≠ j: (0,1)=0 (0,2)=0 (1,0)=1 (1,2)=0 (2,0)=0 (2,1)=1 → 2/6
    assert table["baseline"].tolist() == pytest.approx([1 / 3])
    full = drift_table(_hand_embeddings(vectors), reference="static")
    # own similarity: doc 0: 1, doc 1: 0, doc 2: 1
    assert full["cosine_similarity"].tolist() == pytest.approx([1, 0, 1])
    assert full["adjusted_similarity"].tolist() == pytest.approx([2 / 3, -1 / 3, 2 / 3])


def test_single_document_has_no_baseline():
    table = drift_table(_hand_embeddings(np.ones((1, 3, 2))))
    assert table["baseline"].isna().all() and len(table) == 2


def test_cls_against_last_layer_and_never_against_the_pooler(tiny_bert):
    embeddings = embed_corpus(tiny_bert, DOCUMENTS)
    table = cls_table(embeddings)
    # pooler_output lives in another space: its cosine with a hidden state is not a drift measure
    assert table["comparison"].unique().tolist() == ["hidden_states[0] vs hidden_states[2] (last layer)"]
    assert embeddings.pooler_output is not None  # the tiny BERT's checkpoint has pooler weights
    for d, text in enumerate(DOCUMENTS):
        hidden, _, pooler = _direct_hidden_states(tiny_bert, text)
        rows = table[table["document"] == d]["cosine_similarity"]
        assert rows.iloc[0] == pytest.approx(_cos(hidden[0, 0], hidden[-1, 0]), abs=1e-5)
        np.testing.assert_allclose(embeddings.pooler_output[d], pooler, atol=1e-5)
        # the pooler is not the [CLS] hidden state
        assert not np.allclose(pooler, hidden[-1, 0], atol=1e-3)


def test_a_pooler_missing_from_the_checkpoint_gives_no_pooler_output(tmp_path):
    from core.model.models import load_model
    from tests.model_factory import build_tiny_bert_mlm

    model = load_model(str(build_tiny_bert_mlm(tmp_path / "mlm")))  # a masked-LM checkpoint has no pooler weights
    embeddings = embed_corpus(model, DOCUMENTS[:2])
    assert embeddings.pooler_output is None
    assert all(a.pooler_output is None for a in analyze_many(model, DOCUMENTS[:2]))


def test_decoder_has_no_pooler_and_its_first_token_ignores_the_rest(tiny_gpt2):
    embeddings = embed_corpus(tiny_gpt2, ["The cat sat on the mat.", "The bank of a river."])
    assert embeddings.pooler_output is None
    assert cls_table(embeddings)["comparison"].nunique() == 1
    # causal attention: the first token sees only itself, so both documents share its vectors
    np.testing.assert_allclose(embeddings.pooled["cls"][0], embeddings.pooled["cls"][1], atol=1e-5)


def test_cached_arrays_are_read_only(tiny_bert):
    embeddings = embed_corpus(tiny_bert, DOCUMENTS[:2])
    with pytest.raises(ValueError):
        embeddings.pooled["mean"][0, 0, 0] = 1.0


@pytest.mark.integration
def test_bundled_model_moves_documents_and_layers_are_anisotropic(bundled):
    from core.representations.corpus import sample_corpus

    texts = [doc.text for doc in sample_corpus()[:12]]
    table = drift_table(embed_corpus(bundled, texts), reference="static", pooling="mean")
    per_layer = table.groupby("layer")[["cosine_similarity", "anisotropy"]].mean()
    assert per_layer["cosine_similarity"].iloc[-1] < per_layer["cosine_similarity"].iloc[0]
    assert (per_layer["anisotropy"] > 0).all()


def _drift_page(model: str):
    """AppTest on the drift page with ``model``, reached from Home as a visitor would."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=180)
    at.query_params["model"] = model
    at.run()
    at.switch_page("app_pages/drift.py").run()
    return at


@pytest.mark.app
def test_page_options_never_rerun_the_model(tiny_bert_dir):
    from ui import results

    at = _drift_page(tiny_bert_dir)
    assert not at.exception and not at.error
    runs = results.corpus_passes.computed()
    assert runs >= 1
    at.radio(key="drift.reference").set_value("previous").run()
    at.selectbox(key="drift.pooling").set_value("cls").run()
    at.toggle(key="drift.adjust").set_value(True).run()
    assert not at.exception and not at.error
    assert results.corpus_passes.computed() == runs
    assert any("more tokens than" in w.value for w in at.warning)  # the tiny model reads 64 tokens


def test_one_pass_over_a_corpus_gives_both_results_equal_to_their_own_computations(tiny_bert_dir):
    from core.representations.contextuality import contextuality
    from ui import results
    from ui.models import loaded_model

    texts = tuple(f"{text} (one pass)" for text in DOCUMENTS)  # keys no other test has cached
    model = loaded_model(tiny_bert_dir)
    forwards, progress = [], []
    handle = model.model.register_forward_hook(lambda *_: forwards.append(1))
    try:
        embeddings, context = results.corpus_passes(tiny_bert_dir, texts, progress=lambda *done: progress.append(done))
        again = results.corpus_passes(tiny_bert_dir, texts, progress=lambda *done: progress.append(done))
    finally:
        handle.remove()
    assert len(forwards) == 1, "the corpus went through the model more than once"
    assert progress == [(len(texts), len(texts))] and again[0] is embeddings and again[1] is context
    np.testing.assert_allclose(embeddings.pooled["mean"], embed_corpus(model, texts).pooled["mean"], atol=1e-6)
    pd.testing.assert_frame_equal(context.table, contextuality(model, texts).table, atol=1e-6, rtol=0)


def test_two_sessions_asking_at_once_share_one_pass(tiny_bert_dir):
    import threading
    import time

    from ui import results
    from ui.models import MODEL_RUNS, loaded_model, model_turn

    texts = tuple(f"{text} (two sessions)" for text in DOCUMENTS)
    model = loaded_model(tiny_bert_dir)
    forwards, found = [], {}
    handle = model.model.register_forward_hook(lambda *_: forwards.append(1))
    sessions = [threading.Thread(target=lambda i=i: found.setdefault(i, results.corpus_passes(tiny_bert_dir, texts)))
                for i in range(2)]
    try:
        with model_turn():  # the first session misses the store and queues for the model behind this one
            for session in sessions:
                session.start()
            deadline = time.monotonic() + 30
            while not MODEL_RUNS.waiting() and time.monotonic() < deadline:
                time.sleep(0.01)
        for session in sessions:
            session.join(60)
    finally:
        handle.remove()
    assert len(found) == 2 and found[0] is found[1] and len(forwards) == 1


@pytest.mark.app
def test_the_first_view_runs_one_pass_over_the_corpus(tiny_bert_dir, monkeypatch):
    import core.representations.drift
    from ui.store import store

    store().forget()
    passes = []
    # every pass over a corpus, for either result, is core.representations.drift.run_over_corpus's
    original = core.representations.drift.iter_analyses
    monkeypatch.setattr(core.representations.drift, "iter_analyses", lambda *a, **k: passes.append(1) or original(*a, **k))
    at = _drift_page(tiny_bert_dir)
    assert not at.exception and not at.error
    assert len(passes) == 1  # embeddings and self-similarity from one pass of the model over the corpus


# --- baseline sentences written from the numbers --------------------------------------------


def _anisotropy(values):
    return pd.DataFrame({"layer": range(1, len(values) + 1), "anisotropy": values})


def test_baseline_sentence_follows_a_falling_anisotropy():
    from core.representations.drift import baseline_sentences

    text = baseline_sentences(_anisotropy([0.735, 0.709, 0.637, 0.627, 0.660, 0.075]))
    assert "0.735 at hidden state 1" in text and "0.075 at hidden state 6, the last" in text
    assert "nearly isotropic" in text and "falls towards the top" in text
    # The old fixed sentence claimed the opposite for every model.
    assert "high cosine in deep layers" not in text and "share one direction" not in text


def test_baseline_sentence_follows_a_rising_anisotropy_and_names_the_word_baseline():
    from core.representations.drift import baseline_sentences

    words = pd.DataFrame({"layer": [0, 1, 2], "anisotropy": [0.05, 0.12, 0.61]})
    text = baseline_sentences(_anisotropy([0.3, 0.8]), words, pooling="cls")
    assert "share one direction" in text and "grows towards the top" in text and "cls pooling" in text
    assert "0.120 at hidden state 1 and 0.610 at hidden state 2" in text
    assert "at least two" in baseline_sentences(_anisotropy([np.nan, np.nan]))


@pytest.mark.integration
def test_bundled_model_last_layer_is_nearly_isotropic_on_the_sample_corpus(bundled):
    """The measured fact the drift page's sentence rests on (mean pooling, sample corpus)."""
    from core.representations.corpus import sample_corpus
    from core.representations.drift import baseline_sentences

    embeddings = embed_corpus(bundled, [d.text for d in sample_corpus()])
    table = baseline_table(embeddings)
    assert table["anisotropy"].iloc[0] > 0.6 and table["anisotropy"].iloc[-1] < 0.2
    assert "nearly isotropic" in baseline_sentences(table)


@pytest.mark.app
def test_one_pasted_document_has_no_baseline_line_no_empty_chart_and_is_one_document(tiny_bert_dir):
    """Issue 28: "1 documents", a "baseline" line at 0 beside "there is no baseline", an empty self-similarity chart."""
    import json

    from core.representations.corpus import documents_from_text
    from ui.corpus_state import CORPUS_KEY, CORPUS_NAME_KEY, SOURCES

    at = _drift_page(tiny_bert_dir)
    at.segmented_control(key="corpus_source").set_value(SOURCES[2]).run()
    # what "Use these documents" stores for one pasted document
    at.session_state[CORPUS_KEY] = tuple(documents_from_text("The bank of the river was steep and green."))
    at.session_state[CORPUS_NAME_KEY] = "the pasted documents"
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    captions = [c.value for c in at.caption]
    assert any(c.startswith("1 document from") for c in captions), captions
    assert not any("1 documents" in c for c in captions)
    figures = {json.loads(c.proto.spec)["layout"].get("title", {}).get("text", ""): json.loads(c.proto.spec)
               for c in at.get("plotly_chart")}
    violins = next(f for title, f in figures.items() if "cosine similarity per document" in title)
    assert not violins["layout"].get("shapes") and not violins["layout"].get("annotations")  # no zero "baseline"
    assert not [t for t in figures if t.startswith("Self-similarity")]
    assert any("no self-similarity to show" in i.value for i in at.info)
    assert any("no baseline" in m.value for m in list(at.markdown) + list(at.caption))


def test_the_zero_baseline_line_is_drawn_only_for_adjusted_values():
    from viz.drift import documents_phrase, layer_violin_figure

    table = pd.DataFrame({"layer": [1, 2], "document": [0, 0], "cosine_similarity": [0.9, 0.8]})
    raw = layer_violin_figure(table, ["one"], value="cosine_similarity", value_label="cosine", title="t")
    assert not raw.layout.shapes  # one document: no baseline, so no line called "baseline"
    adjusted = layer_violin_figure(table, ["one"], value="cosine_similarity", value_label="c", title="t", adjusted=True)
    assert len(adjusted.layout.shapes) == 1 and adjusted.layout.shapes[0].y0 == 0
    assert (documents_phrase(1), documents_phrase(2)) == ("1 document", "2 documents")
