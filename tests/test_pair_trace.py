"""An encoder-decoder's views read its one trace (issue 48, item 5): ``analyze_pair`` against a plain eager forward
pass of the same checkpoint loaded by transformers alone, and a count of full passes (a forward pre-hook on the
encoder's token embedding, counting the calls that read the source) while the pair, a head taken apart and the pair
flow are computed."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from core.attention_heads.inside_pair_head import compute_pair_head
from core.causal.flow_pair import pair_contributions_of, pair_pass
from core.model.recording import UnsupportedArchitecture
from core.model.seq2seq import analyze_pair

SOURCE = "I will hike along the bank of a river."
TARGET = "the cat sat on the mat"


@pytest.fixture(scope="module", params=["t5", "bart"])
def family(request, tiny_t5, tiny_bart, tiny_t5_dir, tiny_bart_dir):
    return (tiny_t5, tiny_t5_dir) if request.param == "t5" else (tiny_bart, tiny_bart_dir)


def _eager(folder: str, source_ids: list[int], decoder_ids: list[int]):
    """A plain eager forward of the checkpoint (its own loading, no app code) with attentions and hidden states."""
    plain = AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval()
    ids = torch.tensor([source_ids])
    with torch.no_grad():
        return plain(input_ids=ids, attention_mask=torch.ones_like(ids), decoder_input_ids=torch.tensor([decoder_ids]),
                     output_attentions=True, output_hidden_states=True, return_dict=True)


def test_analyze_pair_reads_a_trace_equal_to_an_eager_pass(family):
    model, folder = family
    pair = analyze_pair(model, SOURCE, TARGET)
    assert pair.trace is not None and pair.trace.stack_names == ("encoder", "decoder", "cross")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert pair.source.input_ids == tokenizer(SOURCE)["input_ids"]
    labels = tokenizer(text_target=TARGET)["input_ids"]
    assert pair.target.input_ids[1:] == labels[:-1]  # shifted right behind the start token
    out = _eager(folder, pair.source.input_ids, pair.target.input_ids)
    stack = lambda xs: torch.cat(xs).numpy()  # noqa: E731 - [1, ...] per layer → [layers, ...]
    for mine, theirs in ((pair.source.attentions, out.encoder_attentions), (pair.target.attentions, out.decoder_attentions),
                         (pair.cross_attentions, out.cross_attentions)):
        np.testing.assert_allclose(mine, stack(theirs), atol=1e-5)
    np.testing.assert_allclose(pair.source.hidden_states, stack(out.encoder_hidden_states), atol=1e-5)
    np.testing.assert_allclose(pair.target.hidden_states, stack(out.decoder_hidden_states), atol=1e-5)
    for kind in ("encoder", "decoder", "cross"):  # the stacks read the same trace
        np.testing.assert_allclose(pair.trace.attention(kind, 1, [2]), stack(
            {"encoder": out.encoder_attentions, "decoder": out.decoder_attentions, "cross": out.cross_attentions}[kind]
        )[1, [2]], atol=1e-5)


def test_the_pair_its_heads_and_its_flow_run_the_model_once(family):
    model, _ = family
    calls = []
    embedding = model.model.get_encoder().get_input_embeddings()
    source_ids = torch.tensor([model.tokenizer(SOURCE)["input_ids"]])

    def count(_module, args):
        if args[0].shape == source_ids.shape and torch.equal(args[0].cpu(), source_ids):
            calls.append(1)

    handle = embedding.register_forward_pre_hook(count)
    try:
        pair = analyze_pair(model, SOURCE, TARGET)
        for kind, layer in (("encoder", 0), ("decoder", 1), ("cross", 1)):
            head = compute_pair_head(model, pair, kind, layer, 2)
            expected = {"encoder": pair.source.attentions, "decoder": pair.target.attentions,
                        "cross": pair.cross_attentions}[kind][layer, 2]
            np.testing.assert_allclose(head.weights, expected, atol=1e-5)
        flow = pair_pass(pair.trace, model)
        found = pair_contributions_of(flow, pair.source.tokens, pair.target.tokens)
        np.testing.assert_allclose(flow.cross_records[1].weights[0].numpy(), pair.cross_attentions[1], atol=1e-6)
        np.testing.assert_allclose(found.cross_attention.sum(axis=(2, 3)) + found.cross_residual, 1, atol=1e-5)
    finally:
        handle.remove()
    assert len(calls) == 1


def test_a_pair_without_a_trace_is_a_sentence_for_its_head_and_its_flow(tiny_t5):
    """A pair read by the plain output_attentions pass (a model the app does not record) has no trace: its heads and
    its flow say so in a sentence instead of running another pass."""
    import dataclasses

    from core.errors import AnalysisError

    bare = dataclasses.replace(analyze_pair(tiny_t5, SOURCE, TARGET), trace=None)
    with pytest.raises(AnalysisError, match="without a trace"):
        compute_pair_head(tiny_t5, bare, "cross", 0, 0)
    with pytest.raises(UnsupportedArchitecture, match="no trace"):
        pair_pass(bare.trace, tiny_t5)


PAIR_PAGES = ["app_pages/home.py", "app_pages/attention.py", "app_pages/maxima.py", "app_pages/stats.py",
              "app_pages/inside.py", "app_pages/flow.py"]


@pytest.mark.app
def test_the_encoder_decoder_pages_share_one_pass(tiny_t5_dir):
    """Opened one after another in one AppTest on tiny T5, as a user clicks through them: full passes over the source
    counted as ``tests/test_one_pass.py`` counts them (a token-embedding call inside a transformers model's forward
    whose input begins with the source's ids; a block called again alone reads no embedding)."""
    from tests.test_one_pass import passes_per_page

    found = passes_per_page(PAIR_PAGES, tiny_t5_dir, SOURCE, {"target": TARGET})
    print("full passes per page:", found)
    assert sum(found.values()) == 1 and found["app_pages/home.py"] == 1, found
