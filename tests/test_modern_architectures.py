"""Today's decoder families (Llama, Mistral, Qwen2/3, Gemma 1/2/3, Phi-3) through core.model.recording, each API
compared with a direct computation on the same checkpoint loaded plainly (eager attention, forward hooks)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoModelForCausalLM

from core.attention_heads.attention import attention_maxima, norm_weighted, rollout
from core.attention_heads.head_parts import sharing_groups
from core.attention_heads.head_statistics import analysis_statistics
from core.attention_heads.inside_head import compute_head, verify_layer
from core.causal.effects import ablate_heads, head_importance
from core.causal.token_attribution import token_attribution
from core.model.inference import analyze
from core.model.models import load_model
from core.model.recording import IMPLEMENTATION, Recorder, UnsupportedArchitecture
from core.outputs.lens import logit_lens
from core.outputs.predictions import load_language_model
from tests.model_factory import DECODER_FAMILIES, build_tiny_decoder
from tests.plain_heads import zero_heads_hook

TEXT = "I will hike along the bank of a river. The cat sat on the mat."
FAMILIES = list(DECODER_FAMILIES)


@pytest.fixture(scope="session")
def decoders(tmp_path_factory):
    """``decoders(name)``: (name, folder, LoadedModel, the same checkpoint loaded plainly as AutoModel with
    eager attention), built once per session."""
    built = {}

    def get(name):
        if name not in built:
            folder = build_tiny_decoder(tmp_path_factory.mktemp("decoders") / name, name)
            plain = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
            built[name] = (name, folder, load_model(str(folder)), plain)
        return built[name]

    return get


@pytest.fixture(scope="session", params=FAMILIES)
def family(request, decoders):
    return decoders(request.param)


def _plain_forward(plain, ids, hooks=()):
    handles = [module.register_forward_pre_hook(hook) for module, hook in hooks]
    try:
        with torch.no_grad():
            return plain(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    finally:
        for handle in handles:
            handle.remove()


def _attention(plain, layer):
    return plain.layers[layer].self_attn


def test_loaded_with_the_recording_attention(family):
    _, _, model, _ = family
    assert model.model.config._attn_implementation == IMPLEMENTATION
    assert model.is_decoder


def test_analyze_equals_plain_eager_model(family):
    _, _, model, plain = family
    analysis = analyze(model, TEXT)
    out = _plain_forward(plain, analysis.input_ids)
    expected = torch.stack(out.attentions, 1)[0].numpy()
    assert analysis.attentions.shape == (2, 4, len(analysis.tokens), len(analysis.tokens))
    np.testing.assert_allclose(analysis.attentions, expected, atol=1e-6)
    np.testing.assert_allclose(analysis.hidden_states, torch.stack(out.hidden_states, 1)[0].numpy(), atol=1e-5)


def test_compute_head_weights_equal_the_models(family):
    name, _, model, plain = family
    analysis = analyze(model, TEXT)
    eager = torch.stack(_plain_forward(plain, analysis.input_ids).attentions, 1)[0].numpy()
    t = len(analysis.tokens)
    for layer in range(2):
        for head in range(4):
            c = compute_head(model, analysis, layer, head)
            assert c.weights.shape == (t, t)
            np.testing.assert_allclose(c.weights, eager[layer, head], atol=1e-5)
            # masked cells are masked (-inf before the softmax), never scores that happen to be small
            assert np.isneginf(c.scaled[~c.keep_mask]).all() and np.isfinite(c.scaled[c.keep_mask]).all()
            assert (eager[layer, head][~c.keep_mask] == 0).all()
            assert c.kv_head == head // 2 and c.shared_with == ((0, 1) if head < 2 else (2, 3))
        verify_layer(model, analysis, layer)


def _window_layers(name: str) -> dict[int, int | None]:
    return {"mistral": {0: 4, 1: 4}, "gemma2": {0: 4, 1: None}, "gemma3_text": {0: 4, 1: None}}.get(name, {0: None, 1: None})


def test_sliding_windows_are_masked_cells(family):
    name, _, model, _ = family
    analysis = analyze(model, TEXT)
    t = len(analysis.tokens)
    assert t > 8
    i, j = np.indices((t, t))
    for layer, window in _window_layers(name).items():
        c = compute_head(model, analysis, layer, 0)
        expected = (j <= i) & ((i - j < window) if window else True)
        np.testing.assert_array_equal(c.keep_mask, expected)
        assert c.sliding_window == window


def test_attention_page_draws_a_sliding_window_as_masked_cells(family):
    """``Analysis.sliding_windows`` comes from the attention calls; the views' hidden cells are exactly the cells the
    plain eager model gives weight 0 below the diagonal, and the head figure draws them as masked (NaN), not 0."""
    from core.attention_heads.attention import attention_view, window_hidden
    from viz.attention import head_figure
    from viz.attention_cells import shown_values

    name, _, model, plain = family
    analysis = analyze(model, TEXT)
    windows = _window_layers(name)
    expected_windows = None if all(w is None for w in windows.values()) else tuple(windows[l] for l in range(2))
    assert analysis.sliding_windows == expected_windows
    view = attention_view(analysis)
    hidden = window_hidden(view, analysis.sliding_windows)
    if expected_windows is None:
        assert hidden is None
        return
    eager = torch.stack(_plain_forward(plain, analysis.input_ids).attentions, 1)[0].numpy()
    below = np.tril(np.ones(eager.shape[-2:], dtype=bool))
    for layer in range(2):
        zero_in_past = below & (eager[layer] == 0).all(axis=0)
        np.testing.assert_array_equal(hidden[layer], zero_in_past)
    layer = next(l for l, w in windows.items() if w)
    fig = head_figure(view.matrices[layer, 0], view.labels, title="t", causal=True, colorscale="Blues",
                      hidden=hidden[layer], window=windows[layer])
    drawn = shown_values(fig.data[-1])
    assert np.isnan(drawn[hidden[layer]]).all() and np.isfinite(drawn[below & ~hidden[layer]]).all()
    assert "sliding window" in fig.layout.title.text
    # words: a word is masked only when the window hides all of its pieces
    words = attention_view(analysis, words=True)
    word_hidden = window_hidden(words, analysis.sliding_windows)
    for q, qs in enumerate(words.positions):
        for k, ks in enumerate(words.positions):
            assert word_hidden[layer, q, k] == all(hidden[layer, a, b] for a in qs for b in ks)


def test_gemma2_scores_are_soft_capped(decoders):
    _, _, model, _ = decoders("gemma2")
    analysis = analyze(model, TEXT)
    c = compute_head(model, analysis, 1, 0)
    assert c.softcap == 2.0
    raw = np.where(c.keep_mask, c.scores * c.scale, -np.inf)
    np.testing.assert_allclose(c.scaled[c.keep_mask], 2.0 * np.tanh(raw[c.keep_mask] / 2.0))
    uncapped = np.exp(raw - raw.max(1, keepdims=True))
    uncapped /= uncapped.sum(1, keepdims=True)
    assert np.abs(uncapped - analysis.attentions[1, 0]).max() > 1e-3  # the cap matters on this model


def test_rotation_step_against_the_projection(family):
    """q and k before RoPE equal the plain model's q/k projections (after q/k norm, where the family has it)."""
    name, _, model, plain = family
    analysis = analyze(model, TEXT)
    attn = _attention(plain, 1)
    seen = {}
    handles = []
    for part in ("q_proj", "k_proj", "qkv_proj", "q_norm", "k_norm"):
        module = getattr(attn, part, None)
        if module is not None:
            handles.append(module.register_forward_hook(lambda _m, _a, out, part=part: seen.__setitem__(part, out[0])))
    try:
        _plain_forward(plain, analysis.input_ids)
    finally:
        for handle in handles:
            handle.remove()
    d, hq = attn.head_dim, 4
    if "qkv_proj" in seen:
        q_all, k_all = seen["qkv_proj"][:, : hq * d], seen["qkv_proj"][:, hq * d: hq * d + 2 * d]
    else:
        q_all, k_all = seen["q_proj"], seen["k_proj"]
    q_heads, k_heads = q_all.reshape(len(q_all), hq, d), k_all.reshape(len(k_all), 2, d)
    if "q_norm" in seen:  # the norm's output is [T, heads, d] (Qwen3) or [heads, T, d] (Gemma 3)
        t = len(q_all)
        q_heads, k_heads = (x if x.shape[0] == t else x.transpose(0, 1) for x in (seen["q_norm"], seen["k_norm"]))
    c = compute_head(model, analysis, 1, 3)
    np.testing.assert_allclose(c.queries_before_rotary, q_heads[:, 3].numpy(), atol=1e-4)
    np.testing.assert_allclose(c.keys_before_rotary, k_heads[:, 1].numpy(), atol=1e-4)
    # position 0 is not rotated; later positions are
    np.testing.assert_allclose(c.queries[0], c.queries_before_rotary[0], atol=1e-5)
    assert np.abs(c.queries[5] - c.queries_before_rotary[5]).max() > 1e-3
    # the head reads the block's pre-norm of hidden_states[1]
    norm = plain.layers[1].input_layernorm
    with torch.no_grad():
        x = norm(torch.from_numpy(analysis.hidden_states[1].copy())).numpy()
    np.testing.assert_allclose(c.layer_input, x, atol=1e-5)


def _value_and_output(plain, layer, ids):
    attn = _attention(plain, layer)
    seen = {}
    for part in ("v_proj", "qkv_proj"):
        if getattr(attn, part, None) is not None:
            handle = getattr(attn, part).register_forward_hook(lambda _m, _a, out: seen.__setitem__("v", out[0]))
            break
    try:
        out = _plain_forward(plain, ids)
    finally:
        handle.remove()
    d = attn.head_dim
    v = seen["v"][:, -2 * d:] if "qkv_proj" == part else seen["v"]
    return v.reshape(len(v), 2, d).numpy(), attn.o_proj.weight.detach().numpy(), out.attentions[layer][0].numpy(), d


def test_norm_weighted_with_hooks_on_value_and_output_projections(family):
    _, _, model, plain = family
    analysis = analyze(model, TEXT)
    got = norm_weighted(model, analysis)
    for layer in range(2):
        v, w_o, att, d = _value_and_output(plain, layer, analysis.input_ids)
        for head in range(4):
            f = v[:, head // 2] @ w_o[:, head * d:(head + 1) * d].T  # [T, hidden]
            np.testing.assert_allclose(got[layer, head], att[head] * np.linalg.norm(f, axis=-1)[None, :], rtol=1e-4, atol=1e-6)


def _knocked_out(plain, ids, heads):
    hooks = []
    for layer in sorted({lay for lay, _ in heads}):
        attn = _attention(plain, layer)
        hooks.append((attn.o_proj, zero_heads_hook([h for lay, h in heads if lay == layer], attn.head_dim)))
    return torch.stack(_plain_forward(plain, ids, hooks).hidden_states, 1)[0].numpy()


def test_ablate_heads_zeroes_the_heads_slice_into_o_proj(family):
    _, _, model, plain = family
    analysis = analyze(model, TEXT)
    heads = [(0, 1), (1, 3)]
    ablated = ablate_heads(model, TEXT, heads)
    expected = _knocked_out(plain, analysis.input_ids, heads)
    np.testing.assert_allclose(ablated.hidden_states, expected, atol=1e-5)
    assert np.abs(expected - analysis.hidden_states).max() > 1e-4


def test_head_importance_matches_hand_knockouts(family):
    _, _, model, plain = family
    analysis = analyze(model, TEXT)
    got = head_importance(model, TEXT)
    base = analysis.hidden_states[-1].mean(0)
    for layer, head in [(0, 0), (1, 2)]:
        pooled = _knocked_out(plain, analysis.input_ids, [(layer, head)])[-1].mean(0)
        cosine = pooled @ base / np.linalg.norm(pooled) / np.linalg.norm(base)
        assert got[layer, head] == pytest.approx(1 - cosine, abs=1e-5)


def test_lens_at_the_last_layer_is_the_models_prediction(family):
    _, folder, model, _ = family
    analysis = analyze(model, TEXT)
    lens = logit_lens(load_language_model(model), analysis)
    full = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        logits = full(torch.tensor([analysis.input_ids])).logits[0].double()
    probs = logits.softmax(-1)
    top = probs.topk(lens.token_ids.shape[-1], dim=-1)
    np.testing.assert_array_equal(lens.token_ids[-1], top.indices.numpy())
    np.testing.assert_allclose(lens.probs[-1], top.values.numpy(), rtol=1e-4)
    assert lens.token_ids.shape[0] == 3


def test_other_views_run_on_the_recorded_family(family):
    _, _, model, _ = family
    analysis = analyze(model, TEXT)
    attribution = token_attribution(model, TEXT, steps=4)
    assert np.isfinite(attribution.scores).all() and len(attribution.scores) == len(analysis.tokens)
    table, _ = analysis_statistics(analysis, model.tokenizer)
    assert len(table) == 2 * 4
    rolled = rollout(analysis)
    t = len(analysis.tokens)
    assert rolled.shape == (2, t, t) and np.allclose(rolled.sum(-1), 1) and (np.triu(rolled[-1], 1) == 0).all()
    assert len(attention_maxima(analysis).long_table()) > 0


def test_sharing_groups_follow_the_config(family):
    _, _, model, _ = family
    assert sharing_groups(model) == [[0, 1], [2, 3]]


def test_recorder_replaces_a_head_and_records_per_layer(family):
    _, _, model, plain = family
    ids = analyze(model, TEXT).input_ids
    with torch.no_grad(), Recorder(model.model, layers={1}, replace={(1, 3): None}) as rec:
        out = model.model(torch.tensor([ids]), output_hidden_states=True)
    assert set(rec.records) == {1}
    record = rec.records[1]
    assert record.queries.shape[1] == 4 and record.keys.shape[1] == 2 and record.kv_groups == 2
    expected = _knocked_out(plain, ids, [(1, 3)])
    np.testing.assert_allclose(torch.stack(out.hidden_states, 1)[0].numpy(), expected, atol=1e-5)


def test_model_that_cannot_be_recorded_gets_a_sentence(decoders):
    _, folder, model, _ = decoders("llama")
    eager = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    unrecorded = dataclasses.replace(model, model=eager)
    analysis = analyze(unrecorded, TEXT)
    with pytest.raises(UnsupportedArchitecture, match="Taking heads apart is not available"):
        compute_head(unrecorded, analysis, 0, 0)


def test_queries_and_keys_reproduce_the_weights_or_refuse(family):
    """BertViz's neuron view recomputes softmax(q·k/√d) under the causal mask: either that gives the model's
    attention, or the model is refused with a sentence (window, cap or another scale)."""
    from core.attention_heads.neuron_view import queries_and_keys

    name, _, model, _ = family
    analysis = analyze(model, TEXT)
    if name in ("mistral", "gemma2", "gemma3_text"):  # sliding windows (and Gemma 2's cap) in these configs
        with pytest.raises(UnsupportedArchitecture, match="neuron view"):
            queries_and_keys(model, analysis)
        return
    queries, keys = queries_and_keys(model, analysis)
    t = len(analysis.tokens)
    scores = queries.astype(np.float64) @ np.swapaxes(keys, -1, -2) / np.sqrt(queries.shape[-1])
    scores = np.where(np.tril(np.ones((t, t), dtype=bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    np.testing.assert_allclose(weights, analysis.attentions, atol=1e-5)


def test_batches_with_padding_drift_and_senses_equal_one_text_at_a_time(family):
    """Drift and senses read batched, right-padded passes: each text must equal its own plain forward pass."""
    from core.model.inference import analyze_many
    from core.representations.drift import embed_corpus
    from core.representations.senses import occurrence_embeddings

    _, _, model, plain = family
    texts = [TEXT, "my bank", "The cat sat on the mat by the bank."]
    for text, batched in zip(texts, analyze_many(model, texts, batch_size=3), strict=True):
        out = _plain_forward(plain, analyze(model, text).input_ids)
        np.testing.assert_allclose(batched.hidden_states, torch.stack(out.hidden_states, 1)[0].numpy(), atol=1e-4)
        np.testing.assert_allclose(batched.attentions, torch.stack(out.attentions, 1)[0].numpy(), atol=1e-5)
    embeddings = embed_corpus(model, texts, batch_size=3)
    alone = analyze(model, texts[1])
    np.testing.assert_allclose(embeddings.pooled["mean"][1], alone.hidden_states.mean(1), atol=1e-4)
    occurrences = occurrence_embeddings(model, texts, "bank", batch_size=3)
    assert occurrences.vectors.shape[:2] == (3, 3) and np.isfinite(occurrences.vectors).all()


def test_a_knocked_out_pass_never_stands_in_for_the_plain_one(family):
    """analyze keeps its recorded pass for compute_head; a knock-out over the same tokens must not replace it."""
    _, _, model, plain = family
    analysis = analyze(model, TEXT)
    ablated = ablate_heads(model, TEXT, [(0, 0), (0, 1), (0, 2), (0, 3)])
    eager = torch.stack(_plain_forward(plain, analysis.input_ids).attentions, 1)[0].numpy()
    np.testing.assert_allclose(compute_head(model, analysis, 1, 2).weights, eager[1, 2], atol=1e-5)
    np.testing.assert_allclose(compute_head(model, ablated, 1, 2).weights, ablated.attentions[1, 2], atol=1e-5)


def test_rotation_figure_draws_both_vectors():
    from viz.inside import rotation_bars

    before, after = np.array([1.0, 0.0, 2.0]), np.array([0.0, 1.0, 2.0])
    fig = rotation_bars(before, after, title="q <b>")
    assert [list(trace.y) for trace in fig.data] == [[1.0, 0.0, 2.0], [0.0, 1.0, 2.0]]
    assert fig.layout.barmode == "group" and "<b>" not in fig.layout.title.text


def test_a_recorder_acts_only_in_its_own_thread(decoders):
    """Sessions share a model: a pass in another thread during a recording is neither recorded nor knocked out."""
    import threading

    _, _, model, _ = decoders("llama")
    ids = torch.tensor([analyze(model, TEXT).input_ids])
    with torch.no_grad():
        clean = model.model(ids).last_hidden_state
    seen = {}

    def other():
        with torch.no_grad():
            seen["other"] = model.model(ids).last_hidden_state

    with torch.no_grad(), Recorder(model.model, replace={(0, 0): None}) as rec:
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert rec.records == {}
        knocked = model.model(ids).last_hidden_state
    torch.testing.assert_close(seen["other"], clean)
    assert (knocked - clean).abs().max() > 1e-4 and set(rec.records) == {0, 1}


@pytest.mark.app
def test_attention_page_says_which_layers_have_a_sliding_window(decoders):
    from tests.test_app import open_app, page_errors

    _, folder, _, _ = decoders("gemma2")
    at = open_app({"model": str(folder), "text": TEXT}, page="app_pages/attention.py")
    assert not page_errors(at)
    said = [c.value for c in at.caption if "sliding window" in c.value]
    assert said and "Layer 0 of" in said[0] and "window of 4 tokens" in said[0], said
