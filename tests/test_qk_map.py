"""core.attention_heads.qk_map: one head's queries and keys over a corpus on one map (issue 38).

Expected values come from the checkpoint loaded plainly (eager attention, forward hooks on the query and key
projections, the rotary embedding applied by hand in numpy) and from numpy by hand, never from core.attention_heads.qk_map itself.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from transformers import AutoModel

from core.attention_heads.qk_map import CorpusQueriesKeys, QueryKeyMap, QueryKeyMapError, normalise, query_key_map, record_corpus
from core.attention_heads.qk_map_quality import nearest_key_agreement, position_order
from core.model.models import load_model
from tests.lm_factory import build_tiny_llama_lm
from tests.model_factory import build_tiny_gpt_neo

# Texts of different lengths, so the batched pass pads some of them.
TEXTS = ("The cat sat on the mat.", "I will hike along the bank of a river with my dog today.", "Paris is big.")


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    """(LoadedModel, the same checkpoint loaded plainly with eager attention): 2 layers, 4 query heads sharing
    2 key/value heads, rotary."""
    folder = build_tiny_llama_lm(tmp_path_factory.mktemp("qk") / "tiny-llama")
    return load_model(str(folder)), AutoModel.from_pretrained(folder, attn_implementation="eager").eval()


def _hooked_projections(plain, ids, layer, names):
    """The outputs of ``names`` (the attention module's query/key projections) of ``layer`` for one text alone."""
    attention = plain.layers[layer].self_attn if hasattr(plain, "layers") else None
    kept = {}
    handles = [getattr(attention, name).register_forward_hook(
        lambda module, args, out, name=name, kept=kept: kept.__setitem__(name, out[0].detach().double().numpy())) for name in names]
    try:
        with torch.no_grad():
            out = plain(torch.tensor([ids]), output_attentions=True)
    finally:
        for handle in handles:
            handle.remove()
    return kept, out.attentions[layer][0].double().numpy()


def _rotary_by_hand(x: np.ndarray, theta: float) -> np.ndarray:
    """``x`` ``[T, H, d]`` rotated as Llama does (halves, not interleaved): x·cos + rotate_half(x)·sin."""
    t, _, d = x.shape
    inv_freq = 1.0 / theta ** (np.arange(0, d, 2) / d)
    angles = np.arange(t)[:, None] * inv_freq[None]  # [T, d/2]
    cos = np.cos(np.concatenate([angles, angles], axis=1))[:, None]
    sin = np.sin(np.concatenate([angles, angles], axis=1))[:, None]
    rotated_half = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], axis=-1)
    return x * cos + rotated_half * sin


def _plain_queries_keys(model, plain, corpus: CorpusQueriesKeys, layer: int, text: int):
    """(queries [T, Hq, d], keys [T, Hkv, d] after rotary, before rotary, the eager attention [Hq, T, T]) by hooks."""
    config = plain.config
    d = config.hidden_size // config.num_attention_heads
    ids = model.tokenizer(TEXTS[text])["input_ids"]
    kept, attention = _hooked_projections(plain, ids, layer, ("q_proj", "k_proj"))
    q = kept["q_proj"].reshape(len(ids), config.num_attention_heads, d)
    k = kept["k_proj"].reshape(len(ids), config.num_key_value_heads, d)
    theta = config.rope_parameters["rope_theta"]
    return _rotary_by_hand(q, theta), _rotary_by_hand(k, theta), q, k, attention


@pytest.fixture(scope="module")
def llama_corpus(tiny_llama):
    model, _ = tiny_llama
    return record_corpus(model, TEXTS, batch_size=2)


def test_recorded_queries_and_keys_equal_hooks_on_the_plain_model(tiny_llama, llama_corpus):
    model, plain = tiny_llama
    corpus = llama_corpus
    assert corpus.texts_used == len(TEXTS) and corpus.num_tokens == sum(len(model.tokenizer(t)["input_ids"]) for t in TEXTS)
    for layer in range(model.num_layers):
        recorded = corpus.layers[layer]
        assert recorded.has_rotary
        for text in range(len(TEXTS)):
            rows = slice(corpus.starts[text], corpus.starts[text + 1])
            q_rot, k_rot, q_raw, k_raw, _ = _plain_queries_keys(model, plain, corpus, layer, text)
            np.testing.assert_array_equal(corpus.position[rows], np.arange(len(q_rot)))
            assert (corpus.text_index[rows] == text).all()
            for head in range(model.num_heads):
                kv = head // 2  # 4 query heads share 2 key/value heads
                q, k = recorded.head(head)
                np.testing.assert_allclose(q[rows], q_rot[:, head], atol=2e-5)
                np.testing.assert_allclose(k[rows], k_rot[:, kv], atol=2e-5)
                q, k = recorded.head(head, rotary=False)
                np.testing.assert_allclose(q[rows], q_raw[:, head], atol=2e-5)
                np.testing.assert_allclose(k[rows], k_raw[:, kv], atol=2e-5)


def test_the_normalisation_keeps_every_querys_attention(tiny_llama, llama_corpus):
    """softmax(scale · q·k) of the normalised vectors, causal mask, over each text's own keys = the plain eager
    model's attention (output_attentions), for every head; and the normalisation does what it says."""
    model, plain = tiny_llama
    for layer in range(model.num_layers):
        for head in range(model.num_heads):
            qmap = query_key_map(None, None, layer, head, corpus=llama_corpus)
            assert qmap.kv_head == head // 2
            assert qmap.coords.shape == (2 * qmap.num_tokens, 2)
            norms_q, norms_k = np.linalg.norm(qmap.queries, axis=1), np.linalg.norm(qmap.keys - qmap.shift, axis=1)
            assert norms_q.mean() == pytest.approx(norms_k.mean(), rel=1e-5)
            np.testing.assert_allclose(qmap.queries.mean(axis=0), qmap.keys.mean(axis=0), atol=1e-5)
            for text in range(len(TEXTS)):
                rows = slice(qmap.starts[text], qmap.starts[text + 1])
                *_, eager = _plain_queries_keys(model, plain, llama_corpus, layer, text)
                q, k = qmap.queries[rows].astype(np.float64), qmap.keys[rows].astype(np.float64)
                t = len(q)
                logits = np.where(np.tril(np.ones((t, t), bool)), qmap.scale * q @ k.T, -np.inf)
                weights = np.exp(logits - logits.max(axis=1, keepdims=True))
                weights /= weights.sum(axis=1, keepdims=True)
                np.testing.assert_allclose(weights, eager[head], atol=1e-5)
                for i in range(t):
                    keys, w = qmap.attention(qmap.starts[text] + i)
                    np.testing.assert_array_equal(keys, qmap.starts[text] + np.arange(i + 1))
                    np.testing.assert_allclose(w, eager[head, i, :i + 1], atol=1e-5)


def test_a_pass_for_one_layer_stops_early_and_equals_the_full_pass(tiny_llama, llama_corpus):
    model, _ = tiny_llama
    calls = []
    handle = model.model.layers[1].register_forward_hook(lambda *a: calls.append(1))
    try:
        first = record_corpus(model, TEXTS, layers={0}, batch_size=2)
    finally:
        handle.remove()
    assert calls == [] and list(first.layers) == [0]  # layer 1 never ran
    np.testing.assert_array_equal(first.layers[0].queries, llama_corpus.layers[0].queries)
    np.testing.assert_array_equal(first.layers[0].keys, llama_corpus.layers[0].keys)


def test_the_corpus_is_cut_at_the_token_budget(tiny_llama):
    model, _ = tiny_llama
    sizes = [len(model.tokenizer(t)["input_ids"]) for t in TEXTS]
    corpus = record_corpus(model, TEXTS, max_corpus_tokens=sizes[0] + sizes[1] - 1)
    assert corpus.texts_used == 1 and corpus.num_texts == 3 and corpus.num_tokens == sizes[0]
    cut = record_corpus(model, TEXTS, max_tokens=5)
    assert cut.truncated == sum(size > 5 for size in sizes) and cut.num_tokens == sum(min(5, size) for size in sizes)


def test_normalise_by_hand():
    queries = np.array([[2.0, 0.0], [0.0, 2.0]])
    keys = np.array([[8.0, 0.0], [8.0, 8.0]])
    q, k, c, shift = normalise(queries, keys)
    # mean |q| = 2, mean |k| = (8 + 8√2) / 2, c = sqrt(mean|k| / mean|q|)
    expected_c = np.sqrt((8 + 8 * np.sqrt(2)) / 2 / 2)
    assert c == pytest.approx(expected_c)
    np.testing.assert_allclose(q, queries * expected_c, rtol=1e-6)
    np.testing.assert_allclose(k.mean(axis=0), q.mean(axis=0), atol=1e-5)
    np.testing.assert_allclose(q @ (k - shift).T, queries @ keys.T, atol=1e-5)


def _hand_map(coords: np.ndarray, queries: np.ndarray, keys: np.ndarray, starts, keep) -> QueryKeyMap:
    n = len(queries)
    text_index = np.repeat(np.arange(len(starts) - 1), np.diff(starts))
    return QueryKeyMap(0, 0, 0, False, "pca", queries.astype(np.float32), keys.astype(np.float32), 1.0, None, 1.0,
                       np.zeros(queries.shape[1]), coords.astype(np.float32), keep, tuple("abcdefgh"[:n]), text_index,
                       np.arange(n) - np.asarray(starts)[text_index], np.asarray(starts))


def test_nearest_key_agreement_by_hand():
    """Two texts of 3 and 2 tokens, all keys visible. Attention: q·k with k on the axes.
    text 0: keys k0=(4,0), k1=(0,4), k2=(-4,0); q0=(1,0) → top k0; q1=(0,1) → top k1; q2=(-1,0) → top k2.
    text 1: keys k3=(0,4), k4=(0,-4); q3=(0,1) → top k3; q4=(1,0) → tie (both 0) → lowest index k3.
    The map (coords) puts q0 next to k1 (a miss), q1 next to k1 (hit), q2 next to k2 (hit), q3 next to k4 (miss),
    q4 next to k3 (hit): 3 of 5 on the map. In the 2-D space itself: nearest by Euclidean distance:
    q0→k0 (|(-3,0)|=3 vs |(1,-4)|≈4.1), q1→k1, q2→k2, q3→k3, q4: |(1,-4)| = |(1,4)| tie → k3 (hit): 5 of 5.
    Chance: mean(1/3, 1/3, 1/3, 1/2, 1/2) = 0.4."""
    queries = np.array([[1, 0], [0, 1], [-1, 0], [0, 1], [1, 0]], dtype=float)
    keys = np.array([[4, 0], [0, 4], [-4, 0], [0, 4], [0, -4]], dtype=float)
    q_xy = np.array([[0, 0], [0.6, 1], [10, 0], [20, 0], [30, 0]], dtype=float)
    k_xy = np.array([[3, 0], [0.5, 0], [10.2, 0], [29, 0], [20.1, 0]], dtype=float)
    qmap = _hand_map(np.concatenate([q_xy, k_xy]), queries, keys, [0, 3, 5], np.ones((3, 3), bool))
    found = nearest_key_agreement(qmap)
    assert found.count == 5
    assert found.on_map == pytest.approx(3 / 5)
    assert found.in_space == pytest.approx(1.0)
    assert found.chance == pytest.approx((1 / 3 * 3 + 1 / 2 * 2) / 5)


def test_nearest_key_agreement_leaves_out_queries_with_one_key():
    """Causal mask: the first query of a text sees only itself, so it has nothing to choose and is not counted."""
    queries = np.array([[1, 0], [0, 1], [1, 0]], dtype=float)
    keys = np.array([[1, 0], [0, 1], [5, 0]], dtype=float)
    coords = np.array([[0, 0], [1, 0], [2, 0], [0, 0], [1, 0], [9, 0]], dtype=float)  # q1 near k1 (top), q2 near k1 (top is k2)
    found = nearest_key_agreement(_hand_map(coords, queries, keys, [0, 3], np.tril(np.ones((3, 3), bool))))
    assert found.count == 2 and found.on_map == pytest.approx(0.5) and found.chance == pytest.approx((1 / 2 + 1 / 3) / 2)


def test_position_order():
    position = np.arange(40) % 20
    ordered = np.stack([position + 0.01 * np.arange(40) % 1, np.zeros(40)], axis=1).astype(float)
    assert position_order(ordered, position) > 0.95
    shuffled = np.random.default_rng(0).permutation(ordered)
    assert abs(position_order(shuffled, position)) < 0.4


def test_an_unrecorded_model_is_refused_with_a_sentence(tmp_path):
    """GPT-Neo's attention does not go through transformers' interface, so it is not recorded: a sentence."""
    model = load_model(str(build_tiny_gpt_neo(tmp_path / "neo")))
    with pytest.raises(QueryKeyMapError, match="recording attention"):
        record_corpus(model, TEXTS)


def test_bert_queries_keys_equal_hooks_and_keep_attention(tiny_bert_dir):
    model = load_model(tiny_bert_dir)
    plain = AutoModel.from_pretrained(tiny_bert_dir, attn_implementation="eager").eval()
    corpus = record_corpus(model, TEXTS, batch_size=2)
    config = plain.config
    d = config.hidden_size // config.num_attention_heads
    for layer in range(model.num_layers):
        attention = plain.encoder.layer[layer].attention.self
        for text in range(len(TEXTS)):
            ids = model.tokenizer(TEXTS[text])["input_ids"]
            kept = {}
            handles = [getattr(attention, name).register_forward_hook(
                lambda module, args, out, name=name, kept=kept: kept.__setitem__(name, out[0].double().numpy())) for name in ("query", "key")]
            try:
                with torch.no_grad():
                    eager = plain(torch.tensor([ids]), output_attentions=True).attentions[layer][0].double().numpy()
            finally:
                for handle in handles:
                    handle.remove()
            rows = slice(corpus.starts[text], corpus.starts[text + 1])
            for head in range(model.num_heads):
                q, k = corpus.layers[layer].head(head)
                np.testing.assert_allclose(q[rows], kept["query"].reshape(len(ids), -1, d)[:, head], atol=2e-5)
                np.testing.assert_allclose(k[rows], kept["key"].reshape(len(ids), -1, d)[:, head], atol=2e-5)
                qmap = query_key_map(None, None, layer, head, corpus=corpus)
                for i in range(len(ids)):
                    _, w = qmap.attention(qmap.starts[text] + i)
                    np.testing.assert_allclose(w, eager[head, i], atol=1e-5)


@pytest.mark.integration
def test_smollm2_map_keeps_the_models_attention(bundled_lm):
    """The bundled SmolLM2 (9 query heads sharing 3 key/value heads): the normalised map's attention equals the
    model's own weights (its eager attention with output_attentions, one text at a time)."""
    from core.model.inference import analyze

    texts = TEXTS[:2]
    corpus = record_corpus(bundled_lm, texts, layers={2})
    for head in (0, 4, 8):
        qmap = query_key_map(None, None, 2, head, corpus=corpus)
        assert qmap.kv_head == head // 3 and qmap.rotary
        for text, sentence in enumerate(texts):
            own = analyze(bundled_lm, sentence).attentions[2, head]
            for i in range(len(own)):
                keys, w = qmap.attention(qmap.starts[text] + i)
                assert len(keys) == i + 1
                np.testing.assert_allclose(w, own[i, :i + 1], atol=2e-5)
    assert 0 <= nearest_key_agreement(qmap).on_map <= 1


def test_sentences_from_the_numbers():
    from core.attention_heads.qk_map_quality import Agreement, agreement_sentence, order_sentence, rotary_sentence

    better = agreement_sentence(Agreement(0.40, 0.55, 0.10, 1000), "PCA", 64, 0.2)
    assert "40% of the 1,000 queries" in better and "more often than a key picked at random (10%)" in better
    assert "55%" in better and "sink" not in better
    worse = agreement_sentence(Agreement(0.01, 0.30, 0.08, 2000), "UMAP", 64, 0.8)
    assert "less often than" in worse and "loses most" in worse and "80% of these queries" in worse
    # issue 50, item 3: L3H5 of SmolLM2, 10 % in the full space against chance 16 %, the map at 3 %: the full space
    # is no better than chance either, so it must not be credited with what the picture loses
    below = agreement_sentence(Agreement(0.03, 0.10, 0.16, 3000), "PCA", 64, 0.9)
    assert "loses most" not in below and "less often than a key picked at random, too" in below
    # 0.11 against 0.10 over 100 queries is within two standard errors (0.06)
    assert "about as often as" in agreement_sentence(Agreement(0.11, 0.11, 0.10, 100), "PCA", 8, 0.0)
    assert order_sentence([(0, 0, 0.2), (0, 1, 0.9), (1, 0, float("nan"))]) == \
        "Maps ordered by position, most first: 0.1 (ρ = 0.90), 0.0 (ρ = 0.20)."
    many = order_sentence([(0, h, h / 10) for h in range(8)])
    assert many.startswith("Most ordered by position: 0.7 (ρ = 0.70), 0.6") and many.endswith("0.2 (ρ = 0.20).")
    assert "orders it more by position" in rotary_sentence(0.8, 0.3)
    assert "changes its order by position little" in rotary_sentence(0.5, 0.52)


PAGE = "app_pages/qk-map.py"
HOSTILE = "<img src=x onerror=alert(1)>"


def _charts(at):
    """The page's figures (not the empty chart the start-up screen draws to load Plotly)."""
    return [spec for chart in at.get("plotly_chart") if (spec := json.loads(chart.proto.spec))["layout"].get("title")]


@pytest.mark.app
def test_page_draws_the_map_the_chosen_querys_lines_and_the_matrix(tiny_llama):
    """Pasted documents (one with a hostile token) through a link: the map, the matrix of every head of the layer, a
    chosen query's lines to the keys it attends to most (the top one as the plain eager model says), hovers escaped."""
    from tests.test_app import open_app

    model, plain = tiny_llama
    docs = f"{TEXTS[0]}\n\n{TEXTS[1]} {HOSTILE}"
    at = open_app({"model": model.source, "corpus": "Your documents", "docs": docs, "layer": "1", "head": "3",
                   "query": "4"}, page=PAGE)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    charts = _charts(at)
    assert len(charts) == 2
    spec = json.dumps(charts[0])
    assert "<img" not in spec, spec[spec.find("<img") - 300:spec.find("<img") + 60]
    assert "&lt;" in spec and "&gt;" in spec  # the hostile tokens are shown, never interpreted
    names = [trace.get("name") for trace in charts[0]["data"]]
    assert "keys it attends to most" in names and "chosen query" in names
    assert len(charts[1]["data"]) == 2 * model.num_heads  # queries and keys of every head of layer 1
    # query 4 is "the" of the first document (position 4); its top key and weight from the plain model
    ids = model.tokenizer(TEXTS[0])["input_ids"]
    _, eager = _hooked_projections(plain, ids, 1, ())
    row = eager[3, 4, :5]
    listed = next(m.value for m in at.markdown if "attends most to" in m.value)
    assert f"({row.max():.2f})" in listed.replace("\\", "")
    assert "ordered by position, most first: 1." in "".join(m.value for m in at.markdown).replace("\\", "")
    # issue 50, item 14: a decoder has no "Every layer" switch, and the page says why, with this model's numbers
    assert not [t for t in at.toggle if t.label == "Every layer"]
    why = [c.value.replace("\\", "") for c in at.caption if "Every layer" in c.value]
    assert len(why) == 1 and f"all {model.num_layers} layers and {model.num_layers * model.num_heads} maps" in why[0]


@pytest.mark.app
def test_page_on_a_model_that_is_not_recorded_says_so(tmp_path):
    from tests.test_app import open_app

    at = open_app({"model": str(build_tiny_gpt_neo(tmp_path / "neo"))}, page=PAGE)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error and any("recording attention" in i.value for i in at.info)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["umap", "tsne"])
def test_neighbourhood_maps_are_deterministic_and_keep_the_vectors(llama_corpus, method):
    """UMAP (in process) and t-SNE (in its helper process) draw every query and key, the same way twice; the
    normalised vectors do not depend on the projection."""
    first = query_key_map(None, None, 1, 2, method=method, corpus=llama_corpus)
    again = query_key_map(None, None, 1, 2, method=method, corpus=llama_corpus)
    pca = query_key_map(None, None, 1, 2, corpus=llama_corpus)
    assert first.coords.shape == (2 * llama_corpus.num_tokens, 2) and np.isfinite(first.coords).all()
    assert np.ptp(first.coords, axis=0).min() > 0
    np.testing.assert_array_equal(first.coords, again.coords)
    np.testing.assert_array_equal(first.queries, pca.queries)
    np.testing.assert_array_equal(first.keys, pca.keys)


def test_a_huge_pasted_document_is_named_by_a_few_words_in_one_sentence():
    """Issue 50, item 15: a 100,000-character document pasted on Queries and keys came back as a red box 20,816 px
    tall that repeated the whole document as its name ("Document 1 (1. mynbiqpm…) of The pasted text has …")."""
    from core.representations.corpus import CorpusError, documents_from_text

    for text in ("mynbiqpm" * 12_500, " ".join(["word"] * 20_000), "short first\n\n" + "x" * 100_000):
        with pytest.raises(CorpusError) as caught:
            documents_from_text(text)
        message = str(caught.value)
        assert len(message) < 300, message[:400]
        assert " of The " not in message and ". " not in message and message.endswith("."), message  # one sentence
        assert "100,000 characters" in message or "99,999 characters" in message, message
