"""Encoder-decoder models: tiny random T5 and BART, built from configs, loaded through ``load_model``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from core.errors import AnalysisError
from core.model.inference import analyze
from core.model.seq2seq import MAX_GENERATED_TOKENS, PairAnalysis, analyze_pair, generate_target
from core.model.tokens import token_labels

SOURCE = "I will hike along the bank of a river."
TARGET = "the cat sat on the mat"


@pytest.fixture(scope="module")
def pair(tiny_seq2seq) -> PairAnalysis:
    return analyze_pair(tiny_seq2seq, SOURCE, TARGET)


def test_load_model_marks_encoder_decoders(tiny_seq2seq, tiny_bert, tiny_gpt2):
    assert tiny_seq2seq.is_encoder_decoder and tiny_seq2seq.can_generate
    assert not tiny_seq2seq.is_decoder  # the encoder sees every token
    assert not tiny_bert.is_encoder_decoder and not tiny_gpt2.is_encoder_decoder


def test_analyze_refuses_an_encoder_decoder_and_names_analyze_pair(tiny_seq2seq):
    with pytest.raises(AnalysisError, match="analyze_pair"):
        analyze(tiny_seq2seq, SOURCE)


def test_analyze_pair_refuses_an_encoder_only_model(tiny_bert):
    with pytest.raises(AnalysisError, match="not an encoder-decoder"):
        analyze_pair(tiny_bert, SOURCE, TARGET)


def test_empty_source_is_a_sentence(tiny_seq2seq):
    with pytest.raises(AnalysisError, match="no text"):
        analyze_pair(tiny_seq2seq, "  ", TARGET)


def test_shapes(pair, tiny_seq2seq):
    s, t = pair.source.num_tokens, pair.target.num_tokens
    config = tiny_seq2seq.model.config
    assert pair.source.attentions.shape == (2, 4, s, s)
    assert pair.source.hidden_states.shape == (3, s, config.d_model)
    assert pair.target.attentions.shape == (2, 4, t, t)
    assert pair.target.hidden_states.shape == (3, t, config.d_model)
    assert pair.cross_attentions.shape == (2, 4, t, s) and pair.cross_attentions.dtype == np.float32
    assert not pair.source.is_decoder and pair.target.is_decoder and not pair.generated


def test_every_attention_row_sums_to_one(pair):
    for matrices in (pair.source.attentions, pair.target.attentions, pair.cross_attentions):
        np.testing.assert_allclose(matrices.sum(axis=-1), 1.0, atol=1e-5)


def test_decoder_self_attention_is_causal(pair):
    t = pair.target.num_tokens
    upper = np.triu(np.ones((t, t), dtype=bool), k=1)
    assert (pair.target.attentions[..., upper] == 0).all()
    assert (pair.target.attentions[..., ~upper] > 0).all()  # softmax weights inside the mask are never 0


def _direct(folder: str, source: str, target: str):
    """The same pass straight through transformers: decoder input built here by hand from the config."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval()
    labels = tokenizer(text_target=target)["input_ids"]
    decoder_input = [model.config.decoder_start_token_id] + labels[:-1]
    encoding = tokenizer(source, return_tensors="pt")
    with torch.no_grad():
        out = model(**encoding, decoder_input_ids=torch.tensor([decoder_input]), output_attentions=True,
                    output_hidden_states=True)
    return tokenizer, decoder_input, out


def test_matches_a_direct_transformers_forward_pass(pair, tiny_seq2seq):
    tokenizer, decoder_input, out = _direct(tiny_seq2seq.source, SOURCE, TARGET)
    np.testing.assert_allclose(pair.cross_attentions, torch.cat(out.cross_attentions).numpy(), atol=1e-6)
    np.testing.assert_allclose(pair.target.attentions, torch.cat(out.decoder_attentions).numpy(), atol=1e-6)
    np.testing.assert_allclose(pair.source.attentions, torch.cat(out.encoder_attentions).numpy(), atol=1e-6)
    np.testing.assert_allclose(pair.target.hidden_states, torch.cat(out.decoder_hidden_states).numpy(), atol=1e-5)
    np.testing.assert_allclose(pair.source.hidden_states, torch.cat(out.encoder_hidden_states).numpy(), atol=1e-5)


def test_decoder_reads_the_target_shifted_right_and_shows_those_tokens(pair, tiny_seq2seq):
    tokenizer, decoder_input, _ = _direct(tiny_seq2seq.source, SOURCE, TARGET)
    assert pair.target.input_ids == decoder_input
    assert pair.target.tokens == tokenizer.convert_ids_to_tokens(decoder_input)
    assert pair.target.special_mask[0]  # the decoder start token
    assert pair.source.input_ids == tokenizer(SOURCE)["input_ids"]
    # every word of the target the decoder read is labelled with its own text
    words = [label for label, special in zip(token_labels(pair.target), pair.target.special_mask) if not special]
    assert "".join(w.removeprefix("##") for w in words) == TARGET.replace(" ", "·")  # a space a token carries: ·


def test_the_decoder_start_token_is_the_models_own(pair, tiny_t5, tiny_bart, tiny_seq2seq):
    expected = "<pad>" if tiny_seq2seq is tiny_t5 else "</s>"  # T5 starts with <pad>, BART with </s>
    assert pair.target.tokens[0] == expected


def test_a_missing_target_is_generated_greedily_and_reproducible(tiny_seq2seq):
    generated = analyze_pair(tiny_seq2seq, SOURCE)
    assert generated.generated and generated.target.text.strip()
    again = analyze_pair(tiny_seq2seq, SOURCE, generated.target.text)  # the box filled with it
    assert not again.generated
    assert again.target.tokens == generated.target.tokens
    np.testing.assert_array_equal(again.cross_attentions, generated.cross_attentions)
    blank = analyze_pair(tiny_seq2seq, SOURCE, "   ")
    assert blank.generated and blank.target.text == generated.target.text


def test_generation_reports_progress_and_stops_at_the_limit(tiny_seq2seq):
    calls: list[tuple[int, int]] = []
    generate_target(tiny_seq2seq, SOURCE, progress=lambda done, total: calls.append((done, total)))
    # at most 64 new tokens, and one fewer than the token limit, so that the end token still fits
    maximum = min(MAX_GENERATED_TOKENS, tiny_seq2seq.max_tokens - 1)
    assert tiny_seq2seq.max_tokens == 64 and maximum == 63
    assert calls and all(total == maximum for _, total in calls)
    assert [done for done, _ in calls] == list(range(1, len(calls) + 1))
    assert len(calls) <= maximum
    short: list[int] = []
    text = generate_target(tiny_seq2seq, SOURCE, max_new_tokens=3, progress=lambda done, total: short.append(done))
    assert short == [1, 2, 3] or (short and short[-1] < 3)
    assert len(tiny_seq2seq.tokenizer(text_target=text, add_special_tokens=False)["input_ids"]) <= 3 * 4


def test_an_exception_from_progress_stops_generation(tiny_seq2seq):
    class Stop(Exception):
        pass

    def stop_after_two(done, total):
        if done >= 2:
            raise Stop

    with pytest.raises(Stop):
        generate_target(tiny_seq2seq, SOURCE, progress=stop_after_two)


def test_long_texts_are_cut_to_the_token_limit(tiny_seq2seq):
    long = "the bank of a river " * 10
    pair = analyze_pair(tiny_seq2seq, long, long, max_tokens=8)
    assert pair.source.num_tokens == 8 and pair.source.truncated and pair.source.num_input_tokens > 8
    assert pair.target.num_tokens == 8 and pair.target.truncated
    assert pair.cross_attentions.shape[2:] == (8, 8)


def test_results_are_read_only(pair):
    with pytest.raises(ValueError):
        pair.cross_attentions[0, 0, 0, 0] = 1.0
