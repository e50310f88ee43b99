"""analyze: shapes, normalisation, causal masks, equality with a direct forward pass, truncation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from core.errors import AnalysisError
from core.model.analysis import Analysis
from core.model.inference import analyze, analyze_many
from core.teaching.examples import BANK_MONEY, BANK_RIVER

TEXT = "I will hike along the bank of a river."


def test_shapes_and_row_sums(tiny_model):
    a = analyze(tiny_model, TEXT)
    t = a.num_tokens
    assert a.attentions.shape == (tiny_model.num_layers, tiny_model.num_heads, t, t)
    assert a.hidden_states.shape == (tiny_model.num_layers + 1, t, tiny_model.hidden_size)
    assert a.attentions.dtype == np.float32 and a.hidden_states.dtype == np.float32
    np.testing.assert_allclose(a.attentions.sum(-1), 1.0, atol=1e-5)
    assert len(a.word_ids) == len(a.offsets) == t


def test_decoder_upper_triangle_is_exactly_zero(tiny_gpt2):
    a = analyze(tiny_gpt2, TEXT)
    upper = np.triu(np.ones((a.num_tokens, a.num_tokens), dtype=bool), k=1)
    assert np.all(a.attentions[..., upper] == 0.0)
    assert np.all(a.attentions[..., ~upper] > 0.0)  # the keep-mask is tril(diagonal=0)


def test_encoder_attends_both_ways(tiny_bert):
    a = analyze(tiny_bert, TEXT)
    upper = np.triu(np.ones((a.num_tokens, a.num_tokens), dtype=bool), k=1)
    assert np.all(a.attentions[..., upper] > 0.0)


@pytest.mark.parametrize("which", ["tiny_bert_dir", "tiny_gpt2_dir"])
def test_equals_a_direct_transformers_forward_pass(which, request):
    folder = request.getfixturevalue(which)
    from core.model.models import load_model

    model = load_model(folder)
    a = analyze(model, TEXT)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    reference = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    enc = tokenizer(TEXT, return_tensors="pt")
    with torch.no_grad():
        out = reference(**enc, output_attentions=True, output_hidden_states=True)
    assert a.input_ids == enc["input_ids"][0].tolist()
    np.testing.assert_allclose(a.attentions, torch.stack(out.attentions)[:, 0].numpy(), atol=1e-6)
    np.testing.assert_allclose(a.hidden_states, torch.stack(out.hidden_states)[:, 0].numpy(), atol=1e-5)
    assert len(a.hidden_states) == len(out.hidden_states) == model.num_layers + 1


def test_hidden_state_zero_is_the_embedding_layer_output_not_the_lookup(tiny_bert):
    a = analyze(tiny_bert, TEXT)
    emb = tiny_bert.model.embeddings
    ids = torch.tensor([a.input_ids])
    with torch.no_grad():
        expected = emb(input_ids=ids)[0].numpy()
        lookup = emb.word_embeddings(ids)[0].numpy()
    np.testing.assert_allclose(a.hidden_states[0], expected, atol=1e-6)
    assert not np.allclose(a.hidden_states[0], lookup, atol=1e-3)


def test_truncation_is_applied_and_reported(tiny_model):
    long_text = " ".join(["the bank of a river"] * 60)
    a = analyze(tiny_model, long_text)
    assert a.truncated is True
    assert a.num_tokens == tiny_model.max_tokens
    assert a.num_input_tokens > tiny_model.max_tokens
    short = analyze(tiny_model, TEXT, max_tokens=5)
    assert short.truncated and short.num_tokens == 5
    assert analyze(tiny_model, TEXT).truncated is False


def test_special_tokens_come_from_the_tokenizer(tiny_bert, tiny_gpt2):
    bert = analyze(tiny_bert, TEXT)
    assert bert.special_mask.tolist() == [t in ("[CLS]", "[SEP]") for t in bert.tokens]
    gpt = analyze(tiny_gpt2, "the bank <|endoftext|> of a river")
    assert gpt.special_mask.tolist() == [t == "<|endoftext|>" for t in gpt.tokens]
    assert gpt.special_mask.sum() == 1 and not gpt.special_mask[0]  # not decided by position


def test_offsets_point_into_the_text(tiny_model):
    a = analyze(tiny_model, TEXT)
    spans = [TEXT[s:e] for (s, e), special in zip(a.offsets, a.special_mask) if not special]
    assert "".join(spans).replace(" ", "") == TEXT.replace(" ", "")


def test_batched_equals_one_by_one_in_input_order(tiny_model):
    texts = [BANK_RIVER, "Hi.", BANK_MONEY, "the cat sat on the mat"]
    calls = []
    batched = analyze_many(tiny_model, texts, batch_size=2, progress=lambda d, n: calls.append((d, n)))
    assert calls == [(2, 4), (4, 4)]
    for text, b in zip(texts, batched):
        single = analyze(tiny_model, text)
        assert b.text == text and b.tokens == single.tokens
        np.testing.assert_allclose(b.attentions, single.attentions, atol=1e-5)
        np.testing.assert_allclose(b.hidden_states, single.hidden_states, atol=1e-4)


def test_empty_text_is_a_user_message(tiny_model):
    for text in ("", "   \n\t "):
        with pytest.raises(AnalysisError, match="no text"):
            analyze(tiny_model, text)


def test_analysis_rejects_mismatched_shapes(tiny_bert):
    a = analyze(tiny_bert, TEXT)
    fields = dict(a.__dict__)
    fields["attentions"] = np.zeros((2, 4, a.num_tokens, a.num_tokens - 1), dtype=np.float32)
    with pytest.raises(ValueError, match="attentions"):
        Analysis(**fields)
    fields = dict(a.__dict__)
    fields["tokens"] = a.tokens[:-1]
    with pytest.raises(ValueError):
        Analysis(**fields)


def test_arrays_are_read_only(tiny_bert):
    a = analyze(tiny_bert, TEXT)
    with pytest.raises(ValueError):
        a.attentions[0, 0, 0, 0] = 5.0


@pytest.mark.integration
def test_bundled_model_analysis(bundled):
    a = analyze(bundled, BANK_RIVER)
    assert a.tokens[0] == "[CLS]" and a.tokens[-1] == "[SEP]" and "bank" in a.tokens
    assert a.attentions.shape == (6, 12, a.num_tokens, a.num_tokens)
    assert a.hidden_states.shape == (7, a.num_tokens, 384)
    np.testing.assert_allclose(a.attentions.sum(-1), 1.0, atol=1e-5)
    assert a.pooler_output is not None and a.pooler_output.shape == (384,)
    # pooler_output is a dense + tanh on the [CLS] state, not the [CLS] state itself
    assert not np.allclose(a.pooler_output, a.hidden_states[-1, 0], atol=1e-3)


# --- Token limits below the special tokens; batches with a left-padding tokenizer (issue 18, items 2-3) ---

def test_a_limit_below_the_special_tokens_is_a_sentence(tiny_bert):
    # Before: a tensor size mismatch (the tokenizer cannot cut below [CLS] + [SEP])
    for limit in (1, 2):
        with pytest.raises(AnalysisError, match="at least 3"):
            analyze(tiny_bert, TEXT * 5, max_tokens=limit)
    a = analyze(tiny_bert, TEXT, max_tokens=3)
    assert a.num_tokens == 3 and a.truncated and a.special_mask.tolist() == [True, False, True]


def test_gpt2_adds_no_special_tokens_so_one_token_is_allowed(tiny_gpt2):
    a = analyze(tiny_gpt2, TEXT, max_tokens=1)
    assert a.num_tokens == 1 and a.truncated


def test_truncated_only_when_something_was_cut(tiny_model):
    full = analyze(tiny_model, "the cat")
    assert not analyze(tiny_model, "the cat", max_tokens=full.num_tokens).truncated
    assert analyze(tiny_model, "the cat", max_tokens=full.num_tokens - 1).truncated


@pytest.mark.parametrize("which", ["bert", "gpt2"])
def test_batched_equals_single_with_a_left_padding_tokenizer(which, tmp_path):
    from core.model.models import load_model
    from tests.model_factory import build_tiny_bert, build_tiny_gpt2, set_padding_side

    build = build_tiny_bert if which == "bert" else build_tiny_gpt2
    model = load_model(str(set_padding_side(build(tmp_path / which), "left")))
    texts = ["the cat", "I will hike along the bank of a river.", "bank", TEXT + " " + TEXT]
    batched = analyze_many(model, texts, batch_size=4)
    for text, b in zip(texts, batched, strict=True):
        single = analyze(model, text)
        assert b.tokens == single.tokens
        # Before the fix: hidden states differed by up to 2.3 and attention by 0.013 (shifted position ids)
        np.testing.assert_allclose(b.hidden_states, single.hidden_states, atol=1e-5)
        np.testing.assert_allclose(b.attentions, single.attentions, atol=1e-6)
    # and the truncation keeps the start of the text, not its end
    cut = analyze(model, TEXT, max_tokens=4)
    assert cut.offsets[0 if which == "gpt2" else 1][0] == 0
