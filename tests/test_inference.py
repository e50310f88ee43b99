"""analyze: shapes, normalisation, causal masks, equality with a direct forward pass, truncation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from core.model.inference import Analysis, AnalysisError, analyze, analyze_many
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


# Issue 40 item 9: names the README and older notebooks use keep importing from where they were documented; issue 37
# item 6 moved the modules into core's sub-packages and kept these paths (docs/architecture.md lists them).
PUBLIC_NAMES = ["core.inference.analyze", "core.inference.analyze_many", "core.inference.iter_analyses",
                "core.inference.Analysis", "core.inference.AnalysisError", "core.inference.analyze_pair",
                "core.inference.PairAnalysis", "core.inference.generate_target", "core.seq2seq.analyze_pair",
                "core.heads.compute_head", "core.models.load_model", "core.attention.norm_weighted",
                "core.attention.head_attention", "core.attention.layer_attention", "core.effects.ablate_heads",
                "core.lens.logit_lens", "core.predictions.predict", "core.generation.next_token_distribution",
                "core.patching.patch_residual", "core.patching.patch_heads", "core.attribution.direct_logit_attribution",
                "core.head_stats.induction_scores", "core.head_stats.InductionScores", "core.recording.is_recordable",
                "core.flow.contributions", "core.flow.route_graph", "core.retrieval.retrieval_scores",
                "core.errors.UserFacingError"]
# Where each contract path's names are defined now: written here by hand, not read from the shims.
DEFINED_IN = {"core.inference": "core.model.inference", "core.seq2seq": "core.model.seq2seq",
            "core.heads": "core.attention_heads.inside_head", "core.models": "core.model.models",
            "core.attention": "core.attention_heads.attention", "core.effects": "core.causal.effects",
            "core.lens": "core.outputs.lens", "core.predictions": "core.outputs.predictions",
            "core.generation": "core.outputs.generation", "core.patching": "core.causal.patching",
            "core.attribution": "core.causal.logit_attribution", "core.head_stats": "core.attention_heads.induction",
            "core.recording": "core.model.recording", "core.flow": "core.causal.flow",
            "core.retrieval": "core.attention_heads.retrieval", "core.errors": "core.errors",
            "core.bundled_lm": "core.model.bundled_lm", "core.contextuality": "core.representations.contextuality",
            "core.flow_cross": "core.causal.flow_cross", "core.flow_details": "core.causal.flow_details",
            "core.flow_pair": "core.causal.flow_pair", "core.induction": "core.attention_heads.induction",
            "core.lm_parts": "core.outputs.causal_lm", "core.long_context": "core.attention_heads.long_context",
            "core.margins": "core.maths.margins", "core.on_demand": "core.model.on_demand", "core.parts": "core.model.parts",
            "core.qk_map": "core.attention_heads.qk_map", "core.recorded_pass": "core.model.recorded_pass",
            "core.stacks": "core.model.stacks"}
# The paths docs/ named before issue 37 item 6 regrouped core (README and docs now name the new places).
DOCS_NAMED = ["core.bundled_lm.BUNDLED_LMS", "core.contextuality.embed_corpus_and_contextuality",
              "core.flow_cross.cross_terms", "core.flow_details.head_write", "core.flow_details.route_summary",
              "core.flow_details.top_neurons", "core.flow_pair.decoder_logits", "core.flow_pair.pair_contributions",
              "core.flow_pair.pair_route_sentence", "core.flow_pair.record_pair", "core.induction.repeat_loss",
              "core.lm_parts.causal_parts", "core.long_context.long_context_profile", "core.long_context.sliding_windows",
              "core.margins.leads_from", "core.on_demand.OnDemandAttention", "core.parts.layer_parts",
              "core.parts.parts_of", "core.qk_map.MAX_CORPUS_TOKENS", "core.qk_map.UMAP_EPOCHS",
              "core.qk_map.query_key_map", "core.qk_map.record_corpus", "core.recorded_pass.attention_weights",
              "core.stacks.stacks_of", "core.heads.SUPPORTED", "core.heads.DESCRIPTIONS", "core.recording.Recorder",
              "core.models.threads_for_input", "core.retrieval.model_answer", "core.flow.output_map"]


@pytest.mark.parametrize("path", PUBLIC_NAMES + DOCS_NAMED)
def test_public_names_import(path):
    import importlib

    module, name = path.rsplit(".", 1)
    assert getattr(importlib.import_module(module), name) is not None


@pytest.mark.parametrize("path", [p for p in PUBLIC_NAMES + DOCS_NAMED if not p.startswith("core.inference.")
                                  or p.endswith((".analyze", ".Analysis", ".analyze_many", ".iter_analyses"))])
def test_each_old_path_gives_the_very_object_of_its_new_place(path):
    """Same object, so same shapes: the shim re-exports, it does not wrap or copy."""
    import importlib

    module, name = path.rsplit(".", 1)
    assert getattr(importlib.import_module(module), name) is getattr(importlib.import_module(DEFINED_IN[module]), name)


@pytest.mark.parametrize("module", ["core.inference", "core.model.inference"])
def test_the_old_analyze_pair_path_is_the_seq2seq_function(module):
    import importlib

    from core.model import seq2seq

    inference = importlib.import_module(module)  # the issue 16 path, and the module's own place
    assert inference.analyze_pair is seq2seq.analyze_pair
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = inference.no_such_name
