"""Induction scores and direct logit attribution read from a trace (issue 48 item 4), against direct computations on a
plainly loaded model (transformers' own eager ``output_attentions``; hooks and the weights by hand), and the app's
results of them reading a text's kept trace without another full pass (ui.results)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from core.attention_heads.induction import induction_scores, induction_scores_of
from core.causal.logit_attribution import attribution_of, direct_logit_attribution
from core.model.models import load_model
from core.model.recording import UnsupportedArchitecture
from core.model.trace import record, record_ids
from core.outputs.predictions import load_language_model
from tests.lm_factory import build_tiny_llama_lm, token_id
from tests.model_factory import build_tiny_decoder, build_tiny_gpt2_lm

TEXT, ANSWER, WRONG = "The ferryman crossed the river every morning and the children on the bank", " river", " home"
FAMILIES = ["gpt2", "llama", "qwen2", "gemma", "gemma3_text"]


@pytest.fixture(scope="module", params=FAMILIES)
def family(request, tmp_path_factory):
    """``(name, folder, LanguageModel)`` of a tiny random causal LM of the family."""
    folder = tmp_path_factory.mktemp(request.param) / request.param
    if request.param == "gpt2":
        build_tiny_gpt2_lm(folder)
    else:
        build_tiny_decoder(folder, request.param, seed=1)
    return request.param, folder, load_language_model(load_model(str(folder)))


def plain(folder) -> torch.nn.Module:
    """The checkpoint loaded as transformers loads it, with eager attention, outside the app's loading."""
    return AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()


def test_induction_scores_are_eager_attentions_averaged_by_hand(family):
    name, folder, lm = family
    length = 9
    result = induction_scores(lm, length=length, seed=3)
    ids = result.token_ids
    p = result.prefix
    assert ids[:p].tolist() == ([lm.tokenizer.bos_token_id] if lm.tokenizer.bos_token_id is not None else [])
    assert ids[p:p + length].tolist() == ids[p + length:].tolist()
    with torch.no_grad():
        attentions = plain(folder)(input_ids=torch.tensor(ids)[None], output_attentions=True).attentions
    weights = np.stack([a[0].numpy() for a in attentions]).astype(np.float64)  # [layers, heads, T, T]
    expected = np.zeros(weights.shape[:2])
    for j in range(length):  # the j-th token of the second copy -> the token after its first occurrence
        expected += weights[:, :, p + length + j, p + j + 1] / length
    np.testing.assert_allclose(result.scores, expected, rtol=1e-5, atol=1e-6)
    if name == "gemma3_text":  # its sliding window (4) is shorter than the distance back: layer 0 cannot see those keys
        assert np.all(result.scores[0] == 0) and np.any(result.scores[1] > 0)
    # the base model alone (a LoadedModel) and a trace of the same ids give the same numbers
    base = load_model(str(folder))
    np.testing.assert_array_equal(induction_scores(base, length=length, seed=3).scores, result.scores)
    again = induction_scores_of(record_ids(base, ids), prefix=p, length=length)
    np.testing.assert_array_equal(again.scores, result.scores)


def test_a_trace_of_tokens_not_repeated_is_refused(family):
    _, folder, _ = family
    trace = record(load_model(str(folder)), TEXT)
    with pytest.raises(ValueError, match="twice"):
        induction_scores_of(trace, prefix=1, length=3)


def test_record_ids_reads_the_ids_as_given(family):
    """No token added or cut; each token's span is its own decoded piece; the trace equals record of the same text."""
    _, folder, _ = family
    model = load_model(str(folder))
    ids = model.tokenizer(TEXT)["input_ids"]
    by_ids, by_text = record_ids(model, ids), record(model, TEXT)
    sequence = by_ids.tokens("self")
    assert sequence.ids == tuple(ids) and not sequence.truncated
    for i, (start, end) in zip(ids, sequence.offsets, strict=True):
        if end > start:
            assert sequence.text[start:end] == model.tokenizer.decode([i])
    np.testing.assert_array_equal(by_ids.residual["self"], by_text.residual["self"])
    np.testing.assert_array_equal(by_ids.attention("self", 1), by_text.attention("self", 1))


def _by_hand(lm, folder) -> tuple[np.ndarray, np.ndarray, float, float]:
    """``(heads [L, H], mlps [L], embeddings, total)`` of logit(ANSWER) − logit(WRONG) at the last position, from hooks
    on a plainly loaded model and its weights: each head's slice of the output projection, the final norm's scale frozen
    at the last position's residual (LayerNorm: w·(c − mean c)/σ(x); RMSNorm: g·c/rms(x), Gemma's g = 1 + w)."""
    model = plain(folder)
    config = model.config
    gpt2 = config.model_type == "gpt2"
    base = model.transformer if gpt2 else model.model
    blocks = base.h if gpt2 else base.layers
    heads, width = config.num_attention_heads, getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    seen: dict = {}
    handles = [base.ln_f.register_forward_pre_hook(lambda m, a: seen.update(x=a[0][0, -1].double())) if gpt2 else
               base.norm.register_forward_pre_hook(lambda m, a: seen.update(x=a[0][0, -1].double()))]
    for layer, block in enumerate(blocks):
        projection = block.attn.c_proj if gpt2 else block.self_attn.o_proj
        handles.append(projection.register_forward_pre_hook(lambda m, a, k=layer: seen.update({("z", k): a[0][0, -1]})))
        handles.append(block.mlp.register_forward_hook(lambda m, a, o, k=layer: seen.update({("mlp", k): o[0, -1]})))
    ids = lm.tokenizer(TEXT, return_tensors="pt")["input_ids"]
    try:
        with torch.no_grad():
            out = model(input_ids=ids, output_hidden_states=True)
    finally:
        for handle in handles:
            handle.remove()
    torch.set_grad_enabled(False)  # the arithmetic below on the weights, restored at the end
    x = seen["x"]
    norm = base.ln_f if gpt2 else base.norm
    if gpt2:
        def through(c):
            return norm.weight.double() * (c - c.mean()) / torch.sqrt(x.var(unbiased=False) + norm.eps)
    else:
        gain = norm.weight.double() + (1 if config.model_type == "gemma" else 0)
        def through(c):
            return gain * c / torch.sqrt((x**2).mean() + config.rms_norm_eps)
    unembed = model.get_output_embeddings().weight.detach().double()
    u = unembed[token_id(lm, ANSWER)] - unembed[token_id(lm, WRONG)]
    head_parts = np.zeros((len(blocks), heads))
    for layer, block in enumerate(blocks):
        z = seen[("z", layer)].double()
        weight = (block.attn.c_proj if gpt2 else block.self_attn.o_proj).weight.detach().double()
        for head in range(heads):
            piece = slice(head * width, (head + 1) * width)
            c = z[piece] @ weight[piece] if gpt2 else weight[:, piece] @ z[piece]  # Conv1D [in, out]; Linear [out, in]
            head_parts[layer, head] = float(through(c) @ u)
    mlps = np.array([float(through(seen[("mlp", layer)].double()) @ u) for layer in range(len(blocks))])
    logits = out.logits[0, -1].double()
    total = float(logits[token_id(lm, ANSWER)] - logits[token_id(lm, WRONG)])
    embeddings = float(through(out.hidden_states[0][0, -1].double()) @ u)
    torch.set_grad_enabled(True)
    return head_parts, mlps, embeddings, total


def test_direct_logit_attribution_from_the_trace_equals_hooks_by_hand(family):
    name, folder, lm = family
    if name == "gemma3_text":  # norms after each sublayer: the stream is not a plain sum, refused as before
        with pytest.raises(UnsupportedArchitecture, match="plain sum"):
            direct_logit_attribution(lm, TEXT, ANSWER, WRONG)
        return
    result = direct_logit_attribution(lm, TEXT, ANSWER, WRONG)
    heads, mlps, embeddings, total = _by_hand(lm, folder)
    scale = max(1.0, float(np.abs(heads).max()))
    np.testing.assert_allclose(result.heads, heads, rtol=1e-4, atol=1e-5 * scale)
    np.testing.assert_allclose(result.mlps, mlps, rtol=1e-4, atol=1e-5 * scale)
    assert result.embeddings == pytest.approx(embeddings, rel=1e-4, abs=1e-5 * scale)
    assert result.total == pytest.approx(total, rel=1e-5, abs=1e-5)
    parts = result.heads.sum() + result.mlps.sum() + result.embeddings + result.biases
    assert parts == pytest.approx(total, rel=1e-4, abs=1e-4)
    # the same from a trace of the base model the app loads (the head loaded apart from it: untied checkpoints)
    base = load_model(str(folder))  # held: a trace reads its model weakly
    again = attribution_of(lm, record(base, TEXT), ANSWER, WRONG)
    np.testing.assert_allclose(again.heads, result.heads, rtol=1e-5, atol=1e-6 * scale)


@pytest.fixture
def full_passes():
    """Counts full passes over token ids: each call of a token embedding (``torch.nn.Embedding`` of integer ids; a
    Llama has no other) with the ids it embedded. A block of a trace called again alone reads no embedding."""
    found: list = []

    def count(module, args):
        if isinstance(module, torch.nn.Embedding) and args and not args[0].is_floating_point():
            found.append(tuple(args[0].reshape(-1).tolist()))

    handle = torch.nn.modules.module.register_module_forward_pre_hook(count)
    yield found
    handle.remove()


def test_the_apps_attribution_reads_the_texts_kept_trace(tmp_path, full_passes):
    from ui import results
    from ui.models import language_model_of, loaded_model

    folder = str(build_tiny_llama_lm(tmp_path / "llama"))
    model, lm = loaded_model(folder), language_model_of(folder)  # held, as the app's model cache holds them
    ids = tuple(model.tokenizer(TEXT)["input_ids"])

    def over(tokens) -> int:  # full passes over these ids (a load's or a probe's passes read other ids)
        return sum(called == tuple(tokens) for called in full_passes)

    trace = results.traces(folder, TEXT)  # a page read the text first
    assert over(ids) == 1
    found = results.logit_attributions(folder, TEXT, ANSWER, WRONG)
    assert over(ids) == 1, "direct logit attribution ran a pass of its own over a text whose trace is kept"
    np.testing.assert_array_equal(found.heads, attribution_of(lm, trace, ANSWER, WRONG).heads)
    direct = direct_logit_attribution(lm, TEXT, ANSWER, WRONG)  # its own pass (counted): the same numbers
    assert over(ids) == 2
    np.testing.assert_allclose(found.heads, direct.heads, rtol=1e-5, atol=1e-6)
    assert found.total == pytest.approx(direct.total, abs=1e-5)
    # another text, not yet read: one pass, and its trace is kept for the pages that read that text next
    other = TEXT + " at dawn"
    results.logit_attributions(folder, other, ANSWER, None)
    assert over(model.tokenizer(other)["input_ids"]) == 1 and results.traces.peek(folder, other) is not None
    # induction: one pass over its repeated tokens, as before
    scores = results.inductions(folder, (), 6, 0)
    assert over(scores.token_ids.tolist()) == 1
