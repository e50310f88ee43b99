"""Special-token hiding and word merging on hand-built and real attention."""

from __future__ import annotations

import numpy as np
import pytest

from core.attention_heads.attention import attention_view, merge_words, special_tokens, token_view, word_groups
from core.model.inference import analyze


def test_hide_drops_special_rows_and_columns(tiny_bert):
    a = analyze(tiny_bert, "the bank of a river")
    view = attention_view(a, special="hide")
    assert view.labels == ["the", "bank", "of", "a", "river"]
    assert view.matrices.shape == (2, 4, 5, 5)
    np.testing.assert_array_equal(view.matrices, a.attentions[:, :, 1:-1, 1:-1])
    assert np.all(view.matrices.sum(-1) < 1.0)


def test_renormalise_makes_rows_distributions_again(tiny_bert):
    a = analyze(tiny_bert, "the bank of a river")
    view = attention_view(a, special="renormalise")
    np.testing.assert_allclose(view.matrices.sum(-1), 1.0, atol=1e-6)
    raw = a.attentions[:, :, 1:-1, 1:-1]
    np.testing.assert_allclose(view.matrices, raw / raw.sum(-1, keepdims=True), rtol=1e-6)


def test_show_is_unchanged(tiny_gpt2):
    a = analyze(tiny_gpt2, "the bank <|endoftext|> river")
    view = attention_view(a, special="show")
    assert view.matrices is a.attentions and len(view.labels) == a.num_tokens
    hidden = attention_view(a, special="hide")
    assert "<|endoftext|>" not in hidden.labels and len(hidden.labels) == a.num_tokens - 1


def test_word_merge_sums_keys_and_averages_queries_by_hand(tiny_bert):
    # "zebra" is split into z ##e ##b ##r ##a by the tiny vocabulary
    a = analyze(tiny_bert, "zebra bank")
    groups = word_groups(a)
    assert groups[0] == [0] and groups[1] == [1, 2, 3, 4, 5] and groups[-1] == [a.num_tokens - 1]
    view = merge_words(a)
    assert view.labels == ["[CLS]", "zebra", "bank", "[SEP]"]
    m = a.attentions[1, 2]
    expected_row = np.array([m[1:6, g].sum(axis=1).mean() for g in groups])  # query "zebra": mean over its pieces
    np.testing.assert_allclose(view.matrices[1, 2, 1], expected_row, rtol=1e-6)
    np.testing.assert_allclose(view.matrices.sum(-1), 1.0, atol=1e-6)


def test_word_merge_then_hide(tiny_bert):
    a = analyze(tiny_bert, "zebra bank")
    view = attention_view(a, words=True, special="renormalise")
    assert view.labels == ["zebra", "bank"]
    np.testing.assert_allclose(view.matrices.sum(-1), 1.0, atol=1e-6)


def test_decoder_word_merge_keeps_the_future_masked(tiny_gpt2):
    a = analyze(tiny_gpt2, "the bank of a river")
    view = merge_words(a)
    n = len(view.labels)
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    assert np.all(view.matrices[..., upper] == 0.0)


def test_unknown_mode_is_rejected(tiny_bert):
    a = analyze(tiny_bert, "the bank")
    with pytest.raises(ValueError):
        special_tokens(token_view(a), "drop")  # type: ignore[arg-type]
