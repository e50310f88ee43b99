"""core.representations.contextuality: self-similarity, intra-sentence similarity and the token baseline against a direct computation."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import torch

from core.representations.contextuality import contextuality, intra_sentence_similarity, mean_cross_group_cosine

DOCUMENTS = [
    "The cat sat on the mat. The bank of a river.",
    "The cat was happy to be home at the bank.",
    "I will hike along the bank of the river. It was happy.",
    "The bass fish swims to the bank.",
    "The cat plays guitar at the bank.",
]


def _direct_hidden(model, text: str) -> tuple[np.ndarray, list[str], list[tuple[int, int]]]:
    """The raw transformers model on one text: ``[L + 1, T, D]`` float64, tokens, character offsets."""
    encoding = model.tokenizer(text, return_tensors="pt", return_offsets_mapping=True)
    with torch.no_grad():
        out = model.model(input_ids=encoding["input_ids"], attention_mask=encoding["attention_mask"], output_hidden_states=True)
    tokens = model.tokenizer.convert_ids_to_tokens(encoding["input_ids"][0])
    return torch.stack(out.hidden_states)[:, 0].double().numpy(), tokens, encoding["offset_mapping"][0].tolist()


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_self_similarity_matches_a_direct_computation(tiny_bert):
    result = contextuality(tiny_bert, DOCUMENTS, min_occurrences=5)
    # "the" and "bank" (5 times, 5 documents) are the only words seen 5 times or more.
    assert set(result.words["word"]) == {"the", "bank"}
    occurrences = {"the": [], "bank": []}
    for d, text in enumerate(DOCUMENTS):
        hidden, tokens, _ = _direct_hidden(tiny_bert, text)
        for i, token in enumerate(tokens):
            if token in occurrences:
                occurrences[token].append((d, hidden[:, i]))
    expected = {}
    for word, found in occurrences.items():
        per_layer = []
        for layer in range(tiny_bert.num_layers + 1):
            pairs = [_cos(a[layer], b[layer]) for (da, a), (db, b) in itertools.combinations(found, 2) if da != db]
            per_layer.append(np.mean(pairs))
        expected[word] = per_layer
        got = result.words[result.words["word"] == word].sort_values("layer")
        np.testing.assert_allclose(got["self_similarity"], per_layer, atol=1e-5)
        assert got["occurrences"].iloc[0] == len(found)
    np.testing.assert_allclose(result.table["self_similarity"], np.mean([expected["the"], expected["bank"]], axis=0), atol=1e-5)
    assert result.num_words == 2


def test_intra_sentence_and_baseline_direct():
    rng = np.random.default_rng(0)
    sentence = rng.normal(size=(4, 3, 5))
    mean = sentence.mean(axis=0)
    expected = [np.mean([_cos(w[k], mean[k]) for w in sentence]) for k in range(3)]
    np.testing.assert_allclose(intra_sentence_similarity(sentence), expected)
    groups = [0, 0, 1, 2]
    pairs = [(i, j) for i, j in itertools.combinations(range(4), 2) if groups[i] != groups[j]]
    direct = [np.mean([_cos(sentence[i, k], sentence[j, k]) for i, j in pairs]) for k in range(3)]
    np.testing.assert_allclose(mean_cross_group_cosine(sentence, groups), direct)
    assert np.isnan(mean_cross_group_cosine(sentence, [1, 1, 1, 1])).all()


def test_a_word_in_only_one_document_is_not_measured(tiny_bert):
    result = contextuality(tiny_bert, ["the cat the cat the cat the cat the cat.", "a river."], min_occurrences=5)
    assert result.num_words == 0 and result.table["self_similarity"].isna().all()
    # The baseline still compares words of different documents.
    assert result.table["anisotropy"].notna().all()


def test_table_has_every_hidden_state_and_adjusted_columns(tiny_model):
    result = contextuality(tiny_model, DOCUMENTS, min_occurrences=3)
    table = result.table
    assert list(table["layer"]) == list(range(tiny_model.num_layers + 1))
    np.testing.assert_allclose(table["self_similarity_adjusted"], table["self_similarity"] - table["anisotropy"])
    np.testing.assert_allclose(table["intra_sentence_adjusted"], table["intra_sentence"] - table["anisotropy"])
    assert result.num_sentences >= len(DOCUMENTS)


def test_empty_corpus_is_refused(tiny_bert):
    with pytest.raises(ValueError):
        contextuality(tiny_bert, [])


def test_sentence_is_written_from_the_numbers():
    import pandas as pd

    from core.representations.contextuality import contextuality_sentence

    table = pd.DataFrame({"layer": [0, 1, 2], "self_similarity": [0.9, 0.8, 0.5], "intra_sentence": [0.4, 0.5, 0.6],
                          "anisotropy": [0.05, 0.1, 0.03]})
    table["self_similarity_adjusted"] = table["self_similarity"] - table["anisotropy"]
    table["intra_sentence_adjusted"] = table["intra_sentence"] - table["anisotropy"]
    text = contextuality_sentence(table)
    assert "0.900 at hidden state 0 and 0.500 at hidden state 2, the last" in text and "0.030" in text
    assert "0.38 less alike" in text and "different vector in every context" in text
    flat = table.assign(self_similarity=[0.9, 0.9, 0.9], anisotropy=[0.1, 0.1, 0.1])
    flat["self_similarity_adjusted"] = flat["self_similarity"] - flat["anisotropy"]
    assert "changes little" in contextuality_sentence(flat)
    assert "often enough" in contextuality_sentence(table.assign(self_similarity=np.nan))


@pytest.mark.integration
def test_bundled_model_words_depend_on_context_on_the_sample_corpus(bundled):
    from core.representations.corpus import sample_corpus

    result = contextuality(bundled, [d.text for d in sample_corpus()])
    table = result.table
    assert result.num_words >= 30
    assert table["self_similarity"].iloc[0] > 0.8  # hidden state 0: one word, different positions
    assert table["self_similarity_adjusted"].iloc[-1] < table["self_similarity_adjusted"].iloc[0] - 0.2
    assert (table["self_similarity"] > table["anisotropy"]).all()


def test_figure_shows_baseline_beside_each_measure(tiny_bert):
    from viz.drift import contextuality_figure

    table = contextuality(tiny_bert, DOCUMENTS).table
    raw = contextuality_figure(table, adjusted=False, title="t")
    assert [trace.name.split(":")[0] for trace in raw.data] == ["self-similarity", "intra-sentence similarity", "baseline"]
    adjusted = contextuality_figure(table, adjusted=True, title="t")
    assert len(adjusted.data) == 2 and any(shape.y0 == 0 for shape in adjusted.layout.shapes)
    np.testing.assert_allclose(adjusted.data[0].y, table["self_similarity"] - table["anisotropy"])


def _counting_forwards(model):
    """``(calls, handle)``: ``calls`` grows by one per forward pass of ``model``'s module; ``handle.remove()`` stops it."""
    calls = []
    return calls, model.model.register_forward_hook(lambda *_: calls.append(1))


def test_one_pass_gives_both_results_with_half_the_forward_passes(tiny_model):
    from core.representations.contextuality import embed_corpus_and_contextuality
    from core.representations.drift import POOLINGS, embed_corpus

    calls, handle = _counting_forwards(tiny_model)
    try:
        embeddings = embed_corpus(tiny_model, DOCUMENTS, batch_size=2)
        context = contextuality(tiny_model, DOCUMENTS, batch_size=2)
        separate = len(calls)
        calls.clear()
        progress = []
        joint_embeddings, joint_context = embed_corpus_and_contextuality(
            tiny_model, DOCUMENTS, batch_size=2, progress=lambda done, total: progress.append((done, total)))
        joint = len(calls)
    finally:
        handle.remove()
    assert (separate, joint) == (6, 3)  # 5 documents in batches of 2: once per batch, not twice
    assert progress == [(2, 5), (4, 5), (5, 5)]
    for p in POOLINGS:
        np.testing.assert_allclose(joint_embeddings.pooled[p], embeddings.pooled[p], atol=1e-6)
    for field in ("num_input_tokens", "num_tokens", "truncated"):
        np.testing.assert_array_equal(getattr(joint_embeddings, field), getattr(embeddings, field))
    assert (joint_embeddings.pooler_output is None) == (embeddings.pooler_output is None)
    if embeddings.pooler_output is not None:
        np.testing.assert_allclose(joint_embeddings.pooler_output, embeddings.pooler_output, atol=1e-6)
    pd.testing.assert_frame_equal(joint_context.table, context.table, atol=1e-6, rtol=0)
    pd.testing.assert_frame_equal(joint_context.words, context.words, atol=1e-6, rtol=0)
    assert (joint_context.num_words, joint_context.num_sentences) == (context.num_words, context.num_sentences)


def test_the_one_pass_batches_as_each_function_does_by_default():
    """The page's results equal the two functions called alone only if all three batch alike."""
    import inspect

    from core.representations.contextuality import embed_corpus_and_contextuality
    from core.representations.drift import embed_corpus

    defaults = {f.__name__: inspect.signature(f).parameters["batch_size"].default
                for f in (embed_corpus, contextuality, embed_corpus_and_contextuality)}
    assert len(set(defaults.values())) == 1, defaults


def test_mean_cross_group_cosine_equals_the_pairwise_mean_on_many_anisotropic_words():
    """The sum-of-vectors form against every cross-group pair's cosine, on vectors sharing a common direction (as a
    layer's hidden states do) and groups given in no order, as the random-word baseline passes them."""
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(300, 4, 32)) + 6.0  # cosines near 0.97
    groups = rng.integers(0, 9, size=300)
    unit = vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)
    cosines = np.einsum("ild,jld->lij", unit, unit)
    upper = np.triu(groups[:, None] != groups[None, :], k=1)
    np.testing.assert_allclose(mean_cross_group_cosine(vectors, groups), cosines[:, upper].mean(axis=1), rtol=1e-12)
