"""Per-head statistics on hand-built attention matrices, on tiny models, and their figures."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from core.attention_heads.head_statistics import (
    STATISTICS,
    TokenRoles,
    analysis_statistics,
    corpus_statistics,
    head_statistics,
    is_punctuation,
    rank_heads,
    sink_names,
    sink_token_ids,
    statistic_grid,
    token_roles,
)
from core.model.inference import analyze
from viz.head_stats import head_heatmap, head_heatmaps


def encoder_roles(t: int, punctuation: tuple[int, ...] = ()) -> TokenRoles:
    """[CLS] w1 … w(t-2) [SEP]: queries are the words; start = [CLS], end = [SEP]."""
    query = np.ones(t, dtype=bool)
    query[[0, -1]] = False
    start = np.zeros(t, dtype=bool)
    start[0] = True
    end = np.zeros(t, dtype=bool)
    end[-1] = True
    punct = np.zeros(t, dtype=bool)
    punct[list(punctuation)] = True
    return TokenRoles(query=query, start=start, end=end, punctuation=punct, causal=False)


def decoder_roles(t: int) -> TokenRoles:
    """GPT-2 style: no special tokens; the first token is the start sink and is not a query."""
    query = np.ones(t, dtype=bool)
    query[0] = False
    start = np.zeros(t, dtype=bool)
    start[0] = True
    return TokenRoles(query, start, np.zeros(t, bool), np.zeros(t, bool), causal=True, start_is_first_token=True)


def one_head(matrix: np.ndarray) -> np.ndarray:
    return np.asarray(matrix, dtype=np.float32)[None, None]


def only_row(table: pd.DataFrame) -> pd.Series:
    assert len(table) == 1
    return table.iloc[0]


def previous_token_head(t: int) -> np.ndarray:
    m = np.zeros((t, t))
    m[0, 0] = 1.0  # the first token has no previous token; it looks at itself
    for i in range(1, t):
        m[i, i - 1] = 1.0
    return m


@pytest.mark.parametrize("roles", [encoder_roles(6), decoder_roles(6)], ids=["encoder", "decoder"])
def test_a_pure_previous_token_head_scores_one_on_previous(roles):
    row = only_row(head_statistics(one_head(previous_token_head(6)), roles))
    assert row["previous"] == pytest.approx(1.0)
    assert row["next"] == pytest.approx(0.0)
    assert row["self"] == pytest.approx(0.0)
    assert row["distance"] == pytest.approx(1.0)
    assert row["entropy"] == pytest.approx(0.0)


def test_a_pure_next_token_head_scores_one_on_next_not_previous():
    t = 5
    m = np.zeros((t, t))
    for i in range(t - 1):
        m[i, i + 1] = 1.0
    m[t - 1, t - 1] = 1.0
    row = only_row(head_statistics(one_head(m), encoder_roles(t)))
    assert row["next"] == pytest.approx(1.0)
    assert row["previous"] == pytest.approx(0.0)
    # the last word (position 3) looks at [SEP]: 1 of the 3 query words
    assert row["end"] == pytest.approx(1 / 3)


def test_a_uniform_encoder_head_has_entropy_ln_n():
    t = 7
    row = only_row(head_statistics(one_head(np.full((t, t), 1 / t)), encoder_roles(t)))
    assert row["entropy"] == pytest.approx(math.log(7), rel=1e-6)
    assert row["uniform_entropy"] == pytest.approx(math.log(7))
    assert row["first"] == pytest.approx(1 / 7, rel=1e-6)
    assert row["self"] == pytest.approx(1 / 7, rel=1e-6)


def test_a_uniform_decoder_head_matches_the_mean_of_ln_i_plus_1():
    t = 4
    m = np.tril(np.ones((t, t)))
    m /= m.sum(axis=1, keepdims=True)
    row = only_row(head_statistics(one_head(m), decoder_roles(t)))
    expected = (math.log(2) + math.log(3) + math.log(4)) / 3  # queries 1, 2, 3 see 2, 3, 4 keys
    assert row["entropy"] == pytest.approx(expected, rel=1e-6)
    assert row["uniform_entropy"] == pytest.approx(expected)
    assert row["next"] == pytest.approx(0.0)  # a decoder cannot see the next token


def test_identity_head_is_all_self():
    row = only_row(head_statistics(one_head(np.eye(5)), encoder_roles(5)))
    assert (row["self"], row["distance"], row["entropy"], row["first"]) == pytest.approx((1.0, 0.0, 0.0, 0.0))


def test_first_end_and_punctuation_shares_by_hand():
    # [CLS] hi , there ! [SEP]; each word query: 0.5 to [CLS], 0.2 to ",", 0.2 to "!", 0.1 to [SEP]
    t = 6
    m = np.zeros((t, t))
    m[:, 0], m[:, 2], m[:, 4], m[:, 5] = 0.5, 0.2, 0.2, 0.1
    row = only_row(head_statistics(one_head(m), encoder_roles(t, punctuation=(2, 4))))
    assert row["first"] == pytest.approx(0.5)
    assert row["end"] == pytest.approx(0.1)
    assert row["punctuation"] == pytest.approx(0.4)
    # queries 1..4 each: self share is the weight on their own column
    assert row["self"] == pytest.approx((0 + 0.2 + 0 + 0.2) / 4)


def test_mean_distance_by_hand():
    t = 4
    m = np.zeros((t, t))
    m[1] = [0.5, 0.0, 0.0, 0.5]  # |1-0| and |1-3|: 0.5·1 + 0.5·2
    m[2] = [0.5, 0.0, 0.0, 0.5]  # |2-0| and |2-3|: 0.5·2 + 0.5·1
    row = only_row(head_statistics(one_head(m), encoder_roles(t)))
    assert row["distance"] == pytest.approx(1.5)


def test_rows_are_compared_as_shares_of_their_sum():
    m = previous_token_head(5) * 3.0  # e.g. norm-weighted rows that do not sum to 1
    row = only_row(head_statistics(one_head(m), encoder_roles(5)))
    assert row["previous"] == pytest.approx(1.0)


def test_every_layer_and_head_gets_its_own_row():
    t = 5
    matrices = np.stack([np.stack([np.eye(t), previous_token_head(t)]), np.stack([np.full((t, t), 1 / t), np.eye(t)])])
    table = head_statistics(matrices, encoder_roles(t))
    assert list(zip(table["layer"], table["head"])) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    grid = statistic_grid(table, "previous")
    np.testing.assert_allclose(grid, [[0.0, 1.0], [0.2, 0.0]])
    assert set(STATISTICS) <= set(table.columns)
    ranked = rank_heads(table, "self", top=2)
    assert [(r.layer, r.head) for r in ranked.itertuples()] == [(0, 0), (1, 1)]


def test_no_query_tokens_gives_nan_not_an_error():
    roles = decoder_roles(1)
    row = only_row(head_statistics(one_head(np.ones((1, 1))), roles))
    assert math.isnan(row["entropy"]) and math.isnan(row["previous"])


def test_roles_must_match_the_matrices():
    with pytest.raises(ValueError):
        head_statistics(one_head(np.eye(4)), encoder_roles(5))


@pytest.mark.parametrize(
    ("text", "expected"),
    [(".", True), ("...", True), ("¿", True), ("«", True), (" ,", True), ("a.", False), ("'s", False), ("", False), (" ", False), ("$", False)],
)
def test_punctuation_is_unicode_category_p(text, expected):
    assert is_punctuation(text) is expected


def test_bert_roles_come_from_the_special_mask_and_tokenizer(tiny_bert):
    a = analyze(tiny_bert, "the bank , river .")
    assert a.tokens == ["[CLS]", "the", "bank", ",", "river", ".", "[SEP]"]
    start_ids, end_ids = sink_token_ids(tiny_bert.tokenizer)
    roles = token_roles(a, start_ids=start_ids, end_ids=end_ids)
    assert roles.start.tolist() == [True] + [False] * 6
    assert roles.end.tolist() == [False] * 6 + [True]
    assert roles.punctuation.tolist() == [False, False, False, True, False, True, False]
    assert roles.query.tolist() == [False, True, True, True, True, True, False]
    assert not roles.start_is_first_token and not roles.causal


def test_gpt2_has_a_first_token_sink_and_typed_endoftext_is_an_end_token(tiny_gpt2):
    a = analyze(tiny_gpt2, "the bank <|endoftext|> river")
    start_ids, end_ids = sink_token_ids(tiny_gpt2.tokenizer)
    assert start_ids == set()  # bos == eos: <|endoftext|> counts as an end token
    roles = token_roles(a, start_ids=start_ids, end_ids=end_ids)
    assert roles.start_is_first_token and roles.start.tolist() == [True] + [False] * (a.num_tokens - 1)
    endoftext = a.tokens.index("<|endoftext|>")
    assert np.flatnonzero(roles.end).tolist() == [endoftext]
    assert not roles.query[0] and not roles.query[endoftext] and roles.causal


@pytest.mark.parametrize("family, first, end", [
    ("bert", "[CLS] / the first token", "[SEP] / end tokens"),  # [CLS] text [SEP]
    ("bart", "<s> / the first token", "</s> / end tokens"),  # <s> text </s>
    ("t5", "the first token", "</s> / end tokens"),  # text </s>: no start token
    ("gpt2", "the first token", "end-of-text tokens"),  # adds nothing
])
def test_sink_names_come_from_the_special_tokens_the_tokenizer_adds(family, first, end, request):
    tokenizer = request.getfixturevalue(f"tiny_{family}").tokenizer
    names = sink_names(tokenizer)
    assert (names.first, names.end) == (first, end)
    with_specials = tokenizer("river bank")["input_ids"]
    without = tokenizer("river bank", add_special_tokens=False)["input_ids"]
    assert len(names.added) == len(with_specials) - len(without)


def test_real_attention_gives_finite_statistics_in_range(tiny_model):
    a = analyze(tiny_model, "The cat sat on the mat. It was happy to be home.")
    table, _ = analysis_statistics(a, tiny_model.tokenizer)
    assert len(table) == tiny_model.num_layers * tiny_model.num_heads
    shares = table[["first", "end", "punctuation", "self", "previous", "next"]].to_numpy()
    assert np.all((shares >= -1e-9) & (shares <= 1 + 1e-9))
    # no row can be more spread than uniform over the keys it sees
    assert np.all(table["entropy"] <= table["uniform_entropy"] + 1e-6)


def test_corpus_statistics_are_the_mean_of_per_text_values(tiny_model):
    texts = ["The cat sat on the mat.", "I will hike along the bank of a river.", "Money, money!"]
    seen = []
    corpus = corpus_statistics(tiny_model, texts, batch_size=2, progress=lambda done, total: seen.append((done, total)))
    per_text = [analysis_statistics(analyze(tiny_model, t), tiny_model.tokenizer)[0] for t in texts]
    for name in [*STATISTICS, "uniform_entropy"]:
        expected = np.mean([statistic_grid(t, name) for t in per_text], axis=0)
        np.testing.assert_allclose(statistic_grid(corpus, name), expected, rtol=1e-4, atol=1e-6, err_msg=name)
    assert seen == [(2, 3), (3, 3)]


def test_heatmap_has_layers_as_rows_and_heads_as_columns():
    grid = np.arange(6, dtype=float).reshape(2, 3) / 10
    fig = head_heatmap(grid, title="Share to <b>x</b>", colorbar="share", share=True)
    trace = fig.data[0]
    np.testing.assert_array_equal(np.asarray(trace.z), grid)
    assert list(trace.x) == [0, 1, 2] and list(trace.y) == [0, 1]
    assert fig.layout.coloraxis.cmin == 0.0 and fig.layout.coloraxis.cmax == pytest.approx(0.5)
    assert "<b>" not in fig.layout.annotations[0].text  # titles are escaped


def test_side_by_side_heatmaps_share_one_colour_scale():
    fig = head_heatmaps([np.zeros((2, 2)), np.ones((2, 2)) * 0.8], titles=["attention", "norm-weighted"], colorbar="share", share=True)
    assert [t.coloraxis for t in fig.data] == ["coloraxis", "coloraxis"]
    assert fig.layout.coloraxis.cmax == pytest.approx(0.8)
    with pytest.raises(ValueError):
        head_heatmaps([np.zeros((2, 2)), np.zeros((3, 2))], titles=["a", "b"], colorbar="x")


@pytest.mark.app
@pytest.mark.parametrize(("over", "expected"),
                         [("example sentences", "6 texts from the example sentences"), ("corpus", "texts from the sample corpus")])
@pytest.mark.parametrize("model_fixture", ["tiny_bert_dir", "tiny_gpt2_dir"])
def test_stats_page_averages_over_many_texts(over, expected, model_fixture, request):
    from tests.test_app import open_app, page_errors

    at = open_app({"model": request.getfixturevalue(model_fixture), "over": over, "stat": "previous token"}, page="app_pages/stats.py")
    assert not page_errors(at)
    figures = at.get("plotly_chart")
    assert len(figures) == 1  # norm-weighted attention is shown for a single text only
    spec = figures[0].proto.spec
    assert expected in spec and "Share to the previous token" in spec


@pytest.mark.app
def test_gpt2_has_no_end_tokens_to_rank_and_a_first_token_sink(tiny_gpt2_dir):
    from tests.test_app import open_app, page_errors

    at = open_app({"model": tiny_gpt2_dir, "text": "the cat sat on the mat", "stat": "first token"}, page="app_pages/stats.py")
    assert not page_errors(at)
    assert any("No head attends to these tokens here." == c.value for c in at.caption)
    assert any("it is the first token, a well-known attention sink" in c.value for c in at.caption)


@pytest.mark.integration
def test_norm_weighting_shrinks_the_cls_sink_of_the_bundled_model(bundled):
    from core.attention_heads.attention import norm_weighted

    a = analyze(bundled, "I will hike along the bank of a river.")
    raw, roles = analysis_statistics(a, bundled.tokenizer)
    weighted, _ = analysis_statistics(a, bundled.tokenizer, norm_weighted(bundled, a))
    assert not roles.start_is_first_token
    # Kobayashi et al. 2020: much of the attention parked on special tokens moves little
    assert weighted["first"].mean() < 0.5 * raw["first"].mean()
    assert raw["previous"].max() > 0.9  # MiniLM has a previous-token head, as Clark et al. found in BERT
