"""What a room computes: previous-token scores against the plainly loaded model's own attention, the chance level by
hand, a learner's sentence placed among the built-in ones, and the vote count."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from core.maths.projection import fit_projection
from core.representations.senses import builtin_set, occurrence_embeddings
from core.workshop.views import place_entry, previous_token_scores, vote_counts

TEXTS = ["the bank of the river", "a cat sat on the mat today", "money"]


@pytest.mark.parametrize("which", ["tiny_bert_dir", "tiny_gpt2_dir"])
def test_previous_token_scores_and_chance_match_the_plain_model(which, request, tiny_bert, tiny_gpt2):
    folder = request.getfixturevalue(which)
    model = tiny_bert if which == "tiny_bert_dir" else tiny_gpt2
    got = previous_token_scores(model, TEXTS)
    plain = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    causal = which == "tiny_gpt2_dir"
    per_text, chances = [], []
    for text in TEXTS:
        encoded = tokenizer(text, return_tensors="pt", return_special_tokens_mask=True)
        special = encoded.pop("special_tokens_mask")[0].numpy().astype(bool)
        with torch.no_grad():
            attentions = plain(**encoded, output_attentions=True).attentions
        t = len(special)
        queries = [i for i in range(1, t) if not special[i]]  # query i has a token before it; GPT-2's 0 is left out
        per_text.append(np.array([[np.mean([a[0, h, i, i - 1].item() for i in queries]) for h in range(a.shape[1])]
                                  for a in attentions]))
        chances.append(np.mean([1 / (i + 1) if causal else 1 / t for i in queries]))
    np.testing.assert_allclose(got.scores, np.mean(per_text, axis=0), atol=1e-5)
    assert got.chance == pytest.approx(np.mean(chances))
    assert got.texts == 3 and got.best() == np.unravel_index(np.argmax(np.mean(per_text, axis=0)), got.scores.shape)


def test_a_placed_sentence_lands_where_the_fitted_map_puts_it_with_its_nearest_neighbours(tiny_bert):
    sentences, labels = builtin_set("bank")
    bundled = occurrence_embeddings(tiny_bert, sentences, "bank")
    layer = tiny_bert.num_layers
    fitted = fit_projection(bundled.vectors[layer], "pca", random_state=0)
    own = occurrence_embeddings(tiny_bert, ["We sat on the bank of the river."], "bank")
    placed = place_entry(own, bundled, labels, fitted, layer)
    # by hand: cosine of the query with every bundled occurrence at that layer, the 3 largest
    query = own.vectors[layer, 0].astype(np.float64)
    points = bundled.vectors[layer].astype(np.float64)
    cosine = points @ query / (np.linalg.norm(points, axis=1) * np.linalg.norm(query))
    top = np.argsort(-cosine, kind="stable")[:3]
    assert list(placed.neighbours["sentence"]) == [sentences[bundled.sentence_ids[i]] for i in top]
    np.testing.assert_allclose(placed.neighbours["cosine"], cosine[top], rtol=1e-5)
    centred = query - fitted.estimator.mean_
    np.testing.assert_allclose(placed.xy, centred @ fitted.estimator.components_.T, rtol=1e-4, atol=1e-5)
    senses = [labels[bundled.sentence_ids[i]] for i in top]
    assert placed.sense == max(set(senses), key=senses.count)  # two senses, three neighbours: never a tie
    assert place_entry(occurrence_embeddings(tiny_bert, ["no such word"], "bank"), bundled, labels, fitted, layer) is None


def test_vote_counts_keep_each_learners_last_vote_and_ignore_heads_the_model_lacks():
    votes = [("a", "L0H1"), ("b", "L1H2"), ("a", "L1H2"), ("c", "L9H0"), ("d", "nonsense")]
    counts = vote_counts(votes, 2, 4)
    expected = np.zeros((2, 4), dtype=int)
    expected[1, 2] = 2
    np.testing.assert_array_equal(counts, expected)
