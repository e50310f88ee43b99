"""The Attention page's one body over an encoder-decoder's stacks: rollout where it is defined (the encoder's
self-attention), a sentence where it is not."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from tests.test_ablated_views import trace_array
from tests.test_app import head_switch_weights, open_app, page_errors

pytestmark = pytest.mark.app

SOURCE, TARGET = "the bank of a river", "the cat sat"


def _head_chart(at) -> dict:
    """The one-head figure's spec (its last trace holds the weights)."""
    (chart,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith("-attention-head")]
    return json.loads(chart.proto.spec)


def test_encoder_rollout_is_the_product_of_the_encoders_own_attention(tiny_bart_dir):
    at = open_app({"model": tiny_bart_dir, "text": SOURCE, "target": TARGET, "stack": "Encoder self-attention",
                   "source": "rollout", "view": "one head", "layer": "1"}, page="app_pages/attention.py")
    assert not page_errors(at)
    assert not [c.value for c in at.caption if "showing the" in c.value]  # rollout is drawn, not replaced
    drawn = trace_array(_head_chart(at)["data"][-1]["z"])  # the weights, drawn over a masked-cells layer
    # independently: the plain model's encoder attentions, rollout by hand (heads averaged, 0.5·A + 0.5·I, rows
    # renormalised, multiplied through the layers)
    tokenizer = AutoTokenizer.from_pretrained(tiny_bart_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(tiny_bart_dir, attn_implementation="eager").eval()
    ids = tokenizer(SOURCE, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = model.get_encoder()(input_ids=ids, output_attentions=True)
    n = ids.shape[1]
    product = np.eye(n)
    for attention in out.attentions:
        mixed = 0.5 * attention[0].double().mean(0).numpy() + 0.5 * np.eye(n)
        product = (mixed / mixed.sum(-1, keepdims=True)) @ product
    assert drawn.shape == (n, n)
    np.testing.assert_allclose(drawn, product, atol=5.1e-5)  # the figure rounds z to 4 decimals
    assert np.abs(product - out.attentions[-1][0].double().mean(0).numpy()).max() > 1e-3  # not the raw layer


@pytest.mark.parametrize("stack, source, sentence", [
    ("Decoder self-attention", "rollout", "not defined for the decoder's self-attention alone"),
    ("Cross-attention", "rollout", "cross-attention maps target tokens to source tokens"),
    ("Cross-attention", "norm-weighted", "for models with one stack of layers only"),
])
def test_a_source_not_defined_for_a_stack_is_said_and_raw_weights_are_drawn(stack, source, sentence, tiny_t5_dir):
    at = open_app({"model": tiny_t5_dir, "text": SOURCE, "target": TARGET, "stack": stack, "source": source,
                   "view": "one head"}, page="app_pages/attention.py")
    assert not page_errors(at)
    said = [c.value for c in at.caption if sentence in c.value]
    assert len(said) == 1 and said[0].endswith(f"showing the {stack.lower()}'s raw attention weights."), said
    drawn = head_switch_weights(at)  # the head switch draws the one head (its codes: the weights at 4 decimals)
    np.testing.assert_allclose(np.nansum(drawn, axis=-1), 1.0, atol=drawn.shape[-1] * 5.1e-5)  # raw: rows sum to 1


@pytest.mark.parametrize("stack, offered, said", [
    ("Encoder self-attention", ["raw attention", "rollout"], ["norm-weighted attention needs"]),
    ("Decoder self-attention", ["raw attention"], ["norm-weighted attention needs", "rollout would leave out"]),
])
def test_maxima_offers_rollout_where_it_is_defined_and_says_why_not_elsewhere(stack, offered, said, tiny_bart_dir):
    at = open_app({"model": tiny_bart_dir, "text": SOURCE, "target": TARGET, "stack": stack},
                  page="app_pages/maxima.py")
    assert not page_errors(at)
    assert at.radio(key="maxima.source").options == offered
    (sentence,) = [c.value for c in at.caption if c.value.startswith(f"For the {stack.lower()}:")]
    assert all(part in sentence for part in said) and ("rollout" in sentence) == ("rollout" not in offered)
    panels = [c for c in at.get("plotly_chart") if c.proto.id.endswith("-maxima-panels")]
    assert len(panels) == 1 and ("rollout, layers 0" in panels[0].proto.spec) == ("rollout" in offered)


def test_statistics_of_cross_attention_rank_the_heads_nearest_the_diagonal_and_link_to_that_stack(tiny_bart_dir):
    from core.model.models import load_model
    from core.model.seq2seq import analyze_pair

    at = open_app({"model": tiny_bart_dir, "text": SOURCE, "target": TARGET, "stack": "Cross-attention"},
                  page="app_pages/stats.py")
    assert not page_errors(at)
    assert next(s for s in at.selectbox if s.label == "Statistic").options == ["entropy", "alignment diagonal", "end tokens"]
    links = [m.value for m in at.markdown if "stack=Cross-attention" in m.value]
    ranked = [m for m in links if "diagonal" not in m]  # every ranked head links to the attention page's cross stack
    assert links and len(ranked) == len(links)
    # by hand: distance of each weight to the diagonal d(i) = i·(S − 1)/(T − 1), averaged over ordinary target tokens
    pair = analyze_pair(load_model(tiny_bart_dir), SOURCE, TARGET)
    m = pair.cross_attentions.astype(np.float64)
    t, s = m.shape[-2:]
    distance = np.abs(np.arange(s)[None, :] - (np.arange(t) * (s - 1) / (t - 1))[:, None])
    per_head = ((m / m.sum(-1, keepdims=True)) * distance).sum(-1)[..., ~pair.target.special_mask].mean(-1)  # [L, H]
    order = sorted(np.ndindex(per_head.shape), key=lambda lh: (per_head[lh], lh))[:5]
    expected = [f"layer {layer}, head {head}: {per_head[layer, head]:.3f}" for layer, head in order]
    column = [c for c in at.columns if any("alignment diagonal" in m.value for m in c.markdown)]
    shown = [m.value.split("](")[0].lstrip("[") for m in column[0].markdown if "](" in m.value]
    assert shown == expected


def test_statistics_of_a_t5_name_its_end_token_not_berts(tiny_t5_dir):
    """T5 adds </s> to a text and no start token: the page's sentences say so, not [CLS] / [SEP]."""
    at = open_app({"model": tiny_t5_dir, "text": SOURCE, "target": TARGET, "stack": "Encoder self-attention"},
                  page="app_pages/stats.py")
    assert not page_errors(at)
    said = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)
    assert "park it on </s>?" in said and "special ones (</s>)" in said, said[:400]
    assert "[CLS]" not in said and "[SEP]" not in said


@pytest.mark.parametrize("stack, bias", [("Cross-attention", False), ("Decoder self-attention", True)])
def test_inside_one_head_of_a_t5_stack_matches_the_plain_models_attention_row(stack, bias, tiny_t5_dir):
    from core.model.models import load_model
    from core.model.seq2seq import analyze_pair

    at = open_app({"model": tiny_t5_dir, "text": SOURCE, "target": TARGET, "stack": stack, "layer": "1", "head": "2",
                   "query": "1"}, page="app_pages/inside.py")
    assert not page_errors(at)
    table = at.dataframe[0].value
    assert ("position bias" in table.columns) == bias  # T5's relative-position bias: self-attention only
    # independently: the plain model's own attention row, decoder fed the ids the page's decoder read
    decoder_ids = analyze_pair(load_model(tiny_t5_dir), SOURCE, TARGET).target.input_ids
    tokenizer = AutoTokenizer.from_pretrained(tiny_t5_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(tiny_t5_dir, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(input_ids=tokenizer(SOURCE, return_tensors="pt")["input_ids"],
                    decoder_input_ids=torch.tensor([list(decoder_ids)]), output_attentions=True)
    own = (out.cross_attentions if stack == "Cross-attention" else out.decoder_attentions)[1][0, 2, 1].numpy()
    np.testing.assert_allclose(table["weight"].to_numpy(), own, atol=1e-5)
