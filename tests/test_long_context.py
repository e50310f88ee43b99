"""Long-context views (core.attention_heads.long_context) against eager attention (``output_attentions``) of plainly loaded tiny models,
reduced by numpy by hand: a Gemma 3 with a 4-token sliding window in its first layer, a Llama without one, a BERT."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoModelForCausalLM

from core.attention_heads.long_context import bin_labels, distance_edges, long_context_profile, sliding_windows
from core.errors import AnalysisError
from core.model.models import load_model
from core.model.trace import record
from tests.model_factory import build_tiny_bert, build_tiny_decoder

# 40 tokens for the tiny models' tokenizers (asserted below), inside their 64 positions
TEXT = ("I will hike along the bank of a river. The cat sat on the mat. It was happy to be home. I will open a new "
        "account at my bank and deposit some money.")


def _profile(model, text: str = TEXT, **options):
    """(the profile of ``text``'s trace, the token ids the plain model is given: the trace's own)."""
    trace = record(model, text)
    return long_context_profile(trace, **options), list(trace.tokens("self").ids)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """name -> (LoadedModel, plain eager model)."""
    root = tmp_path_factory.mktemp("long")
    found = {}
    for family in ("gemma3_text", "llama"):
        folder = build_tiny_decoder(root / family, family)
        plain = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
        found[family] = (load_model(str(folder)), plain)
    folder = build_tiny_bert(root / "bert")
    found["bert"] = (load_model(str(folder)), AutoModel.from_pretrained(folder, attn_implementation="eager").eval())
    return found


def _eager(plain, ids) -> np.ndarray:
    """``[L, H, T, T]`` float64 from a plain eager forward pass."""
    with torch.no_grad():
        out = plain(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                    output_attentions=True)
    return np.stack([a[0].double().numpy() for a in out.attentions])


def _bin_of(distance: int) -> int:
    """0 → 0, 1 → 1, 2–3 → 2, 4–7 → 3 …: by the logarithm, not by the edges the code uses."""
    return 0 if distance == 0 else int(math.floor(math.log2(distance))) + 1


def _by_hand(att: np.ndarray, causal: bool, windows, far: int):
    """shares [L, H, B], uniform [L, B], sink [L, H, T], far [L, H] by loops over every query and key."""
    layers, heads, t, _ = att.shape
    bins = _bin_of(t - 1) + 1
    queries = range(1 if causal else 0, t)
    shares, uniform = np.zeros((layers, heads, bins)), np.zeros((layers, bins))
    far_share = np.zeros((layers, heads))
    for layer in range(layers):
        for i in queries:
            seen = [j for j in range(t) if (j <= i or not causal) and (windows[layer] is None or abs(i - j) < windows[layer])]
            for j in range(t):
                d = abs(i - j)
                shares[layer, :, _bin_of(d)] += att[layer, :, i, j]
                if d >= far and j != 0:
                    far_share[layer] += att[layer, :, i, j]
            for j in seen:
                uniform[layer, _bin_of(abs(i - j))] += 1 / len(seen)
    n = len(queries)
    return shares / n, uniform / n, att[..., 0], far_share / n


def test_edges_and_labels_are_log_spaced_and_cover_every_distance():
    assert distance_edges(39).tolist() == [0, 1, 2, 4, 8, 16, 32, 40]
    assert distance_edges(1).tolist() == [0, 1, 2]
    assert bin_labels([0, 1, 2, 4, 8, 10]) == ["0", "1", "2–3", "4–7", "8–9"]


@pytest.mark.parametrize("family", ["gemma3_text", "llama", "bert"])
def test_shares_sinks_and_far_equal_numpy_by_hand_on_eager_attention(models, family):
    model, plain = models[family]
    profile, IDS = _profile(model)
    assert len(IDS) == 40
    att = _eager(plain, IDS)
    causal = family != "bert"
    shares, uniform, sink, far = _by_hand(att, causal, profile.windows, profile.far_distance)
    np.testing.assert_allclose(profile.shares, shares, atol=2e-5)
    np.testing.assert_allclose(profile.uniform, uniform, atol=1e-6)
    np.testing.assert_allclose(profile.far, far, atol=2e-5)
    queries = profile.queries
    np.testing.assert_allclose(profile.sink[..., queries], sink[..., queries], atol=2e-6)
    assert np.isnan(profile.sink[..., 0]).all() == causal  # a decoder's first query is not averaged
    np.testing.assert_allclose(profile.shares.sum(-1), 1.0, atol=1e-5)  # every query's shares sum to 1
    np.testing.assert_allclose(profile.uniform.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(profile.sink_mean, sink[..., queries].mean(-1), atol=2e-6)
    # uniform attention's share on token 0: 1 / (keys a query sees)
    expected = [1 / (i + 1) if causal else 1 / len(IDS) for i in queries]
    full = profile.windows.index(None)  # a layer without a window (gemma3_text's layer 1)
    np.testing.assert_allclose(profile.sink_uniform[full, queries], expected, rtol=1e-6)


def test_the_sliding_window_is_read_from_the_config_and_eager_attention_obeys_it(models):
    model, plain = models["gemma3_text"]
    assert sliding_windows(plain.config, 2) == (4, None)  # layer_types: sliding, full
    profile, IDS = _profile(model)
    att = _eager(plain, IDS)
    distance = np.arange(len(IDS))[:, None] - np.arange(len(IDS))[None, :]
    assert att[0][:, distance >= 4].max() == 0.0 and att[0][:, distance == 3].max() > 0
    assert att[1][:, distance >= 4].max() > 0  # the full layer reaches past it
    assert profile.windows == (4, None) and profile.far_distance == 4
    assert profile.far[0].max() == 0.0 and profile.far_uniform[0] == 0.0  # nothing past the window in layer 0
    for config in (models["llama"][1].config, models["bert"][1].config):
        assert sliding_windows(config, 2) == (None, None)


def test_mistral_s_window_applies_to_every_layer(tmp_path):
    from transformers import MistralConfig

    assert sliding_windows(MistralConfig(sliding_window=4, num_hidden_layers=3), 3) == (4, 4, 4)


def test_a_single_token_is_a_sentence(models):
    model = models["llama"][0]
    one = next(w for w in ("the", "cat", "a") if len(model.tokenizer(w)["input_ids"]) == 1)
    with pytest.raises(AnalysisError):
        _profile(model, one)


def test_progress_reports_every_layer(models):
    seen = []
    _profile(models["llama"][0], "the cat sat on the mat", progress=lambda done, total: seen.append((done, total)))
    assert seen == [(0, 2), (1, 2), (2, 2)]


def test_small_blocks_give_the_same_numbers(models, monkeypatch):
    import core.attention_heads.distance_sums as distance_sums
    import core.attention_heads.long_context as long_context

    whole, ids = _profile(models["gemma3_text"][0])
    monkeypatch.setattr(long_context, "BLOCK_CELLS", 4 * 3 * len(ids))  # blocks of 3 rows (weights read …
    monkeypatch.setattr(distance_sums, "DIRECT_BLOCK_CELLS", 4 * 3 * len(ids))  # … or summed from queries and keys)
    blocks, _ = _profile(models["gemma3_text"][0])
    np.testing.assert_allclose(blocks.shares, whole.shares, atol=1e-6)
    np.testing.assert_allclose(blocks.sink[..., 1:], whole.sink[..., 1:], atol=1e-7)


def test_head_kinds_follow_the_stated_thresholds_in_their_order(models):
    from core.attention_heads.long_context import head_kinds

    profile, _ = _profile(models["gemma3_text"][0])
    kinds = head_kinds(profile)
    for (layer, head), kind in np.ndenumerate(kinds):
        far = profile.far[layer, head]
        expected = ("sink" if profile.sink_mean[layer, head] >= 0.5 else "local" if profile.local[layer, head] >= 0.5
                    else "long-range" if far >= 0.25 and far >= profile.far_uniform[layer] else "between")
        assert kind == expected
    assert (kinds[0] != "long-range").all()  # nothing lies past layer 0's window


@pytest.mark.parametrize("family", ["gemma3_text", "bert"])
def test_each_query_s_bins_sum_to_one_and_equal_the_loops(models, family):
    """Per query, not only on average: the block reduction of eager weights, against loops over the keys."""
    from core.attention_heads.long_context import reduce_block

    model, plain = models[family]
    IDS = model.tokenizer(TEXT)["input_ids"]
    att = _eager(plain, IDS).astype(np.float32)
    causal = family != "bert"
    rows = np.arange(1 if causal else 0, len(IDS))
    edges = distance_edges(len(IDS) - 1)
    for layer in range(att.shape[0]):
        bins, sink, _ = reduce_block(att[layer][:, rows], rows, edges, [0], 4, causal)
        np.testing.assert_allclose(bins.sum(-1), 1.0, atol=1e-5)
        for r, i in enumerate(rows):
            expected = np.zeros((att.shape[1], len(edges) - 1))
            for j in range(len(IDS)):
                expected[:, _bin_of(abs(i - j))] += att[layer][:, i, j]
            np.testing.assert_allclose(bins[:, r], expected, atol=1e-5)
            np.testing.assert_allclose(sink[:, r], att[layer][:, i, 0], atol=1e-7)


def test_the_sink_sentences_give_windowed_and_global_layers_apart(models):
    """Issue 50, item 2: on Gemma 3 the later queries' share on the sink fell from 21.3 % to 8.7 % because 15 of 18
    layers have a 512-token window (position 0 out of it from query 512 on), while the 3 global layers put 43.8 %
    there. Here: the tiny Gemma 3's layer 0 has a 4-token window, layer 1 none; the shares per layer from eager
    attention by numpy, and uniform attention's far share from its definition."""
    from viz.long_context import kinds_sentence, sink_sentence

    model, plain = models["gemma3_text"]
    profile, IDS = _profile(model)
    assert len(IDS) == 40
    att = _eager(plain, IDS)  # [L, H, T, T]
    late = np.arange(20, 40)  # the later half of 40 queries
    windowed, everywhere = att[0][:, late, 0].mean(), att[1][:, late, 0].mean()
    assert windowed == 0.0  # query ≥ 4 does not see position 0 through a 4-token window
    said = sink_sentence(profile, "the sink")
    assert f"For the queries from position 20 on, it is {(windowed + everywhere) / 2:.1%}" in said
    assert (f": {everywhere:.1%} in the 1 layer without a window (1); 0.0% in the 1 layer with a 4-token window (0), "
            "which no longer see the sink from query 4 on.") in said
    # uniform attention 4 or more tokens away (the far distance, the smallest window), sink excluded: none through a
    # 4-token window; without one, query i sees i + 1 keys, i − 3 of them at 4 or more but position 0 not counted
    far = np.mean([max(0, i - 4) / (i + 1) for i in range(1, 40)])
    assert f"(it puts {far:.0%} there in the 1 layer without a window (1) and 0% in the 1 layer with a 4-token window (0))" in kinds_sentence(profile)


@pytest.mark.integration
def test_gemma_3_s_sink_sentence_splits_its_global_and_windowed_layers(bundled_gemma):
    """Issue 50, item 2, on the real gemma-3-270m: 600 tokens of the bundled text, so the later half's queries pass
    the 512-token window. Layers grouped by the config's ``layer_types`` as plain transformers reads them; each group's
    share on position 0 from a plain eager model's attention."""
    from transformers import AutoConfig

    from core.attention_heads.retrieval import bundled_haystack
    from viz.long_context import sink_sentence

    trace = record(bundled_gemma, bundled_haystack(), max_tokens=600)
    ids = list(trace.tokens("self").ids)
    assert ids == bundled_gemma.tokenizer(bundled_haystack())["input_ids"][:600]
    config = AutoConfig.from_pretrained(bundled_gemma.source)
    sliding = [i for i, kind in enumerate(config.layer_types) if kind == "sliding_attention"]
    full = [i for i, kind in enumerate(config.layer_types) if kind == "full_attention"]
    assert len(sliding) == 15 and len(full) == 3 and config.sliding_window == 512
    plain = AutoModelForCausalLM.from_pretrained(bundled_gemma.source, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    att = _eager(plain, ids)[:, :, 300:, 0]  # [L, H, late queries]: the share on position 0
    said = sink_sentence(long_context_profile(trace), "the sink")
    assert f"For the queries from position 300 on, it is {att.mean():.1%}" in said
    assert (f": {att[full].mean():.1%} in the 3 layers without a window ({', '.join(map(str, full))}); "
            f"{att[sliding].mean():.1%} in the 15 layers with a 512-token window") in said
    assert "which no longer see the sink from query 512 on." in said
    assert att[full].mean() > 2 * att[sliding].mean()  # the drop is the window's, not the heads'
