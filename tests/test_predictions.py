"""The model's own predictions: loaded only with a trained (saved) head, right shapes, probabilities."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.model.models import load_model
from core.outputs.predictions import MODELS_WITH_HEAD, NoLanguageModelHead, load_language_model, predict
from tests.model_factory import build_tiny_bert_mlm, build_tiny_gpt2_lm, build_tiny_gpt2_untied_without_head


@pytest.fixture(scope="module")
def bert_mlm(tmp_path_factory):
    model = load_model(str(build_tiny_bert_mlm(tmp_path_factory.mktemp("models") / "tiny-bert-mlm")))
    return model, load_language_model(model)


@pytest.fixture(scope="module")
def gpt2_lm(tmp_path_factory):
    model = load_model(str(build_tiny_gpt2_lm(tmp_path_factory.mktemp("models") / "tiny-gpt2-lm")))
    return model, load_language_model(model)


def test_masked_predictions_have_one_row_per_mask(bert_mlm):
    _, lm = bert_mlm
    assert lm.kind == "masked"
    p = predict(lm, "i will hike along the [MASK] of a [MASK] .", top_k=5)
    assert p.tokens[p.positions[0]] == p.tokens[p.positions[1]] == "[MASK]"
    assert p.positions.tolist() == [6, 9]  # [CLS] i will hike along the [MASK] of a [MASK] . [SEP]
    assert p.candidate_ids.shape == p.probabilities.shape == (2, 5)
    assert [len(row) for row in p.candidates] == [5, 5]
    assert np.all(p.probabilities > 0)
    assert np.all(p.probabilities.sum(axis=1) <= 1 + 1e-12)
    assert np.all(np.diff(p.probabilities, axis=1) <= 0)  # best first


def test_masked_probabilities_are_the_heads_softmax(bert_mlm):
    model, lm = bert_mlm
    text = "the [MASK] of a river"
    p = predict(lm, text, top_k=3)
    encoding = model.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        logits = lm.model(**encoding).logits[0, p.positions[0]].double()
    expected = torch.softmax(logits, dim=-1).topk(3)
    np.testing.assert_array_equal(p.candidate_ids[0], expected.indices.numpy())
    np.testing.assert_allclose(p.probabilities[0], expected.values.numpy(), rtol=1e-9)


def test_text_without_mask_gives_no_rows(bert_mlm):
    p = predict(bert_mlm[1], "the bank of a river", top_k=4)
    assert p.positions.shape == (0,) and p.probabilities.shape == (0, 4)


def test_next_token_predictions_at_every_position(gpt2_lm):
    model, lm = gpt2_lm
    assert lm.kind == "next"
    text = "I will hike along the bank of a river."
    p = predict(lm, text, top_k=4)
    t = len(model.tokenizer(text)["input_ids"])
    assert p.positions.tolist() == list(range(t))
    assert p.probabilities.shape == (t, 4) and len(p.candidates) == t
    assert np.all(p.probabilities.sum(axis=1) <= 1 + 1e-12)
    # the token that really came next: its probability is at most the best candidate's
    assert p.actual_ids[:-1].tolist() == model.tokenizer(text)["input_ids"][1:] and p.actual_ids[-1] == -1
    assert np.all(p.actual_probabilities[:-1] <= p.probabilities[:-1, 0] + 1e-12)
    assert np.isnan(p.actual_probabilities[-1])
    assert "".join(p.tokens) == text


def test_top_cuts_without_changing_the_best(gpt2_lm):
    p = predict(gpt2_lm[1], "the cat sat", top_k=6)
    cut = p.top(2)
    assert cut.probabilities.shape == (len(p.positions), 2)
    np.testing.assert_array_equal(cut.candidate_ids, p.candidate_ids[:, :2])


def test_checkpoint_without_head_is_refused(tiny_bert):
    with pytest.raises(NoLanguageModelHead) as err:
        load_language_model(tiny_bert)
    message = str(err.value)
    assert "no language-model head" in message and "cls.predictions" in message
    assert all(name in message for name in MODELS_WITH_HEAD)


def test_decoder_with_untied_missing_head_is_refused(tmp_path):
    model = load_model(str(build_tiny_gpt2_untied_without_head(tmp_path / "untied")))
    with pytest.raises(NoLanguageModelHead, match="lm_head"):
        load_language_model(model)


def test_tied_gpt2_head_is_the_embedding_matrix(tiny_gpt2):
    """GPT-2 ties its head to the word embeddings, so a base checkpoint does contain the head."""
    lm = load_language_model(tiny_gpt2)
    head = lm.model.get_output_embeddings().weight.detach().numpy()
    np.testing.assert_array_equal(head, tiny_gpt2.model.get_input_embeddings().weight.detach().numpy())


@pytest.mark.integration
def test_bundled_model_has_no_head_and_says_so(bundled):
    with pytest.raises(NoLanguageModelHead) as err:
        load_language_model(bundled)
    message = str(err.value)
    assert message.startswith("`all-MiniLM-L6-v2` has no language-model head")
    assert "distilbert-base-cased" in message and "gpt2" in message
    assert "The bundled `SmolLM2-135M-Instruct` has its head and works offline" in message


@pytest.fixture(scope="module")
def bert_mlm_dir(tmp_path_factory) -> str:
    return str(build_tiny_bert_mlm(tmp_path_factory.mktemp("models") / "tiny-bert-mlm-app"))


@pytest.mark.app
def test_page_offers_a_mask_example_then_shows_fill_ins(bert_mlm_dir):
    from tests.test_app import open_app, page_errors

    at = open_app({"model": bert_mlm_dir, "text": "the bank of a river", "top_k": "3"}, page="app_pages/predictions.py")
    assert not page_errors(at)
    assert any("has no" in i.value and "MASK" in i.value for i in at.info)
    at.button[0].click().run()
    assert not page_errors(at)
    assert at.text_area(key="text").value == "I will hike along the [MASK] of a river."
    table = at.dataframe[0].value
    assert list(table["rank"]) == [1, 2, 3] and set(table["position"]) == {6}
    assert table["probability"].sum() <= 1
    assert len(at.get("plotly_chart")) == 1


@pytest.mark.app
def test_page_shows_next_tokens_for_a_decoder(tmp_path):
    from tests.test_app import open_app, page_errors

    folder = str(build_tiny_gpt2_lm(tmp_path / "tiny-gpt2-lm-app"))
    at = open_app({"model": folder, "text": "the cat sat on the mat"}, page="app_pages/predictions.py")
    assert not page_errors(at)
    table = at.dataframe[0].value
    # tokens by the app's one rule: a space as "·" (issue 50, item 10)
    assert "".join(table["text so far ends with"]).replace("·", " ") == "the cat sat on the mat"
    assert list(table["actual next token"][:-1]) == list(table["text so far ends with"][1:])
    assert (table["probability"] <= 1).all()


@pytest.mark.app
@pytest.mark.integration
def test_page_says_the_bundled_model_has_no_head():
    from tests.test_app import open_app, page_errors

    at = open_app(page="app_pages/predictions.py")
    assert not page_errors(at)
    assert any("no language-model head" in i.value and "bert-base-uncased" in i.value for i in at.info)


def test_a_tied_head_is_built_on_the_loaded_model(tiny_gpt2, tiny_gpt2_dir):
    """Tied embeddings: the causal-LM wraps the already loaded base model, and predicts as a plain load does."""
    from transformers import AutoModelForCausalLM

    lm = load_language_model(tiny_gpt2)
    assert lm.model.transformer is tiny_gpt2.model
    direct = AutoModelForCausalLM.from_pretrained(tiny_gpt2_dir, attn_implementation="eager").eval()
    ids = tiny_gpt2.tokenizer("the cat sat on the mat", return_tensors="pt")
    with torch.no_grad():
        torch.testing.assert_close(lm.model(**ids).logits, direct(**ids).logits, rtol=0, atol=1e-6)
    p = predict(lm, "the cat sat on the mat", top_k=3)
    expected = direct(**ids).logits[0].double().softmax(-1).topk(3)
    np.testing.assert_array_equal(p.candidate_ids, expected.indices.numpy())
    np.testing.assert_allclose(p.probabilities, expected.values.detach().numpy(), rtol=1e-6)


def test_max_tokens_cuts_the_text(tiny_gpt2):
    lm = load_language_model(tiny_gpt2)
    text = "the cat sat on the mat and the dog sat on the log"
    ids = tiny_gpt2.tokenizer(text)["input_ids"]
    assert len(predict(lm, text).tokens) == len(ids) and len(ids) > 5
    cut = predict(lm, text, max_tokens=5)
    assert len(cut.tokens) == 5 and cut.positions.tolist() == [0, 1, 2, 3, 4]
    assert cut.actual_ids[:4].tolist() == ids[1:5] and cut.actual_ids[4] == -1  # nothing after the cut is "next"
    assert len(predict(lm, text, max_tokens=10_000).tokens) == len(ids)


@pytest.mark.integration
def test_bundled_language_model_predicts_paris_and_five(bundled_lm):
    lm = load_language_model(bundled_lm)
    assert lm.kind == "next"
    paris = predict(lm, "The capital of France is", top_k=3)
    assert paris.candidates[-1][0] == " Paris"
    assert paris.probabilities[-1, 0] == pytest.approx(0.77, abs=0.02)
    five = predict(lm, "One, two, three, four,", top_k=3)
    assert five.candidates[-1][0] == " five"


def test_next_token_predictions_keep_the_logits_after_the_last_token_read(gpt2_lm):
    """Issue 40, item 17: the sampling view reads the logits after the text from the Predictions pass (no second
    pass); they are the model's own there, after the first ``max_tokens`` tokens only."""
    _, lm = gpt2_lm
    text = "the cat sat on the mat and the dog sat on the log"
    p = predict(lm, text, top_k=3, max_tokens=6)
    ids = lm.tokenizer(text, return_tensors="pt")["input_ids"][:, :6]
    with torch.no_grad():
        expected = lm.model(input_ids=ids).logits[0, -1].numpy()
    assert len(p.tokens) == 6 and p.last_logits.dtype == np.float32
    np.testing.assert_array_equal(p.last_logits, expected)
    np.testing.assert_array_equal(p.top(1).last_logits, expected)
