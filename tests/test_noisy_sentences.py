"""Issue 40's sweep: sentences that compare noisy numbers say "about the same" within a stated margin, token labels
follow the one rule, and cell text contrasts with its cell; on hand-made numbers through the pure functions."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest


def _losses(first: float, second: float):
    return SimpleNamespace(first=first, second=second)


@pytest.mark.parametrize("plain, knocked, verb", [
    (2.0, 2.01, "stays about the same"),   # 0.01 nats: within the margin, was "rises"
    (2.0, 1.99, "stays about the same"),   # was "does not rise"
    (2.0, 2.50, "rises"),
    (2.0, 1.50, "falls"),
])
def test_the_knockout_sentence_says_about_the_same_within_the_loss_margin(plain, knocked, verb):
    from ui.lm_views import LOSS_MARGIN, knockout_text

    assert abs(knocked - plain) <= LOSS_MARGIN or verb != "stays about the same"
    sentence = knockout_text(_losses(5.0, plain), _losses(5.1, knocked), "L1H2, L3H4", 2)
    assert f"the second copy's loss {verb}" in sentence
    assert f"{knocked:.2f} nats (first copy 5.10)" in sentence and "-0.00" not in sentence


def test_the_generation_csv_writes_alternatives_by_the_token_label_rule():
    from core.outputs.generation import Step
    from ui.lm_views import generation_table

    # id 7 is the first byte of "é" alone: decoded on its own it is "\ufffd", for display "<0xC3>"
    steps = [Step(5, " my", 0.5, 0.5, False, [(5, " my", 0.5), (7, "\ufffd", 0.25), (9, "\n", 0.125)])]
    shown = {5: " my", 7: "<0xC3>", 9: "\n"}
    row = generation_table(steps, shown)[0]
    assert row["alternatives"] == "·my 0.500 | <0xC3> 0.250 | \\n 0.125"  # was "' my' 0.500 | '\ufffd' 0.250 | ..."
    assert (row["step"], row["token_id"], row["probability"]) == (1, 5, 0.5)


def test_the_tour_sampling_sentence_labels_tokens_by_the_rule_not_their_raw_text():
    from core.outputs.generation import Step
    from viz.tour_sentences import sampling_sentence

    # the sampler's second token is the first byte of "é" alone: its own text decodes to "\ufffd"
    greedy = [Step(1, " the", 0.6, 0.6, False), Step(2, " cat", 0.5, 0.5, False)]
    sampled = [Step(1, " the", 0.6, 0.6, False), Step(7, "\ufffd", 0.01, 0.02, False)]
    shown = {1: " the", 2: " cat", 7: "<0xC3>"}
    sentence = sampling_sentence(greedy, sampled, shown, " the cat", " theé", 1.0, 0)
    assert "\ufffd" not in sentence
    assert "The two part at token 2" in sentence
    # where they part, and the least likely token (markdown-escaped)
    assert sentence.count("“\\<0xC3\\>”") == 2 and "“·cat”" in sentence


def _wcag_contrast(a, b) -> float:
    """WCAG 2 contrast ratio of two sRGB colours in 0..255, by hand."""
    def luminance(rgb):
        c = np.asarray(rgb, dtype=float) / 255
        c = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
        return float(c @ [0.2126, 0.7152, 0.0722])
    la, lb = luminance(a), luminance(b)
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


def _viridis(p: float) -> np.ndarray:
    """Plotly's Viridis at ``p`` in 0..1, interpolated by hand between its ten stops."""
    import plotly.colors

    stops = [tuple(int(h[k:k + 2], 16) for k in (1, 3, 5)) for h in plotly.colors.sequential.Viridis]
    positions = np.linspace(0, 1, len(stops))
    return np.array([np.interp(p, positions, [s[k] for s in stops]) for k in range(3)])


def _figures():
    from viz.effects import lens_grid
    from viz.predictions import next_token_heatmap

    probabilities = np.linspace(0, 1, 24).reshape(6, 4)  # every shade of the scale, the middle greens too
    candidates = [[f"t{i}{j}" for j in range(4)] for i in range(6)]
    return {"next tokens": next_token_heatmap([f"c{i}" for i in range(6)], candidates, probabilities),
            "lens grid": lens_grid([f"c{j}" for j in range(4)], candidates, probabilities, title="lens")}, probabilities


@pytest.mark.parametrize("which", ["next tokens", "lens grid"])
def test_every_candidate_cells_text_contrasts_with_its_cell(which):
    figures, probabilities = _figures()
    fig = figures[which]
    heatmap = next(t for t in fig.data if t.type == "heatmap")
    assert not heatmap.texttemplate and heatmap.text is None  # no text in Plotly's one automatic colour
    words = next(t for t in fig.data if t.type == "scatter" and t.mode == "text")
    assert list(words.text) == [f"t{i}{j}" for i in range(6) for j in range(4)]
    import plotly.colors

    assert [c for _, c in heatmap.colorscale] == plotly.colors.sequential.Viridis and (heatmap.zmin, heatmap.zmax) == (0, 1)
    for (x, y, colour) in zip(words.x, words.y, words.textfont.color):
        row, column = int(y), list(heatmap.x).index(x)
        text_rgb = [int(colour[k:k + 2], 16) for k in (1, 3, 5)]
        assert _wcag_contrast(text_rgb, _viridis(probabilities[row, column])) >= 4.5, (which, row, column, colour)


@pytest.mark.parametrize("sink_change, previous_change, words", [
    (0.0011, 0.0010, "about as much as"),   # 10% apart: was "more than"
    (0.0010, 0.0012, "about as much as"),   # was "less than"
    (0.0040, 0.0010, "more than"),
    (0.0010, 0.0040, "less than"),
])
def test_the_tour_knockout_step_compares_two_heads_with_a_margin(sink_change, previous_change, words):
    from viz.tour_sentences import KNOCKOUT_RATIO, knockout_comparison

    sentence = knockout_comparison(sink_change, previous_change, "the first token")
    assert f"changes your sentence {words} the previous-token head" in sentence
    assert f"({sink_change:.2g} vs {previous_change:.2g} in 1 − cosine)" in sentence
    ratio = max(sink_change, previous_change) / min(sink_change, previous_change)
    assert (ratio <= KNOCKOUT_RATIO) == (words == "about as much as")


def test_the_induction_sentence_names_the_heads_within_the_margin_of_the_strongest():
    from ui.lm_views import induction_sentence

    scores = np.array([[0.10, 0.91], [0.88, 0.30], [0.84, 0.02]])  # L1H0 is 3 points behind, L2H0 7 points
    result = SimpleNamespace(scores=scores, length=10, prefix=1, token_ids=np.zeros(21, dtype=int))
    sentence = induction_sentence(result)
    assert sentence.startswith("The strongest is head 1 of layer 0: 91% of its attention")
    assert "(within 5 points of it: head 0 of layer 1 at 88%)." in sentence
    assert "layer 2" not in sentence and "3 heads score above 40%" in sentence


def test_the_tour_same_vector_step_counts_a_control_lead_only_beyond_the_margin():
    from core.teaching.tour import CONTROL_MARGIN, control_lead

    # cosine(A, C) − cosine(A, B) per hidden state: 0.005 and 0.01 are within the margin, 0.15 and 0.30 are not
    sentence = control_lead(np.array([0.0, 0.005, 0.01, 0.15, 0.30]))
    assert CONTROL_MARGIN == 0.02
    assert "more similar by more than 0.02 in cosine at hidden states 3, 4." in sentence  # was "1, 2, 3, 4"
    assert "grows from +0.000 at hidden state 0 (position only) to +0.300" in sentence
    flat = control_lead(np.array([0.0, 0.004, 0.011]))  # a lead of 0.011 that "grew": within the margin
    assert "never more similar by more than 0.02" in flat and "no clear growth" in flat and "grows" not in flat


def test_the_corpus_step_says_each_layer_moves_the_text_further_only_beyond_the_margin():
    from core.teaching.tour import falls_at_every_layer

    assert falls_at_every_layer(np.array([0.95, 0.80, 0.62, 0.41]))
    assert not falls_at_every_layer(np.array([0.95, 0.80, 0.795, 0.41]))  # 0.005 at one layer: was "further" anyway
    assert not falls_at_every_layer(np.array([0.95, 0.80, 0.81, 0.41]))


def test_the_senses_verdict_calls_a_tied_vote_a_tie_rather_than_naming_the_sense_the_cosines_pick():
    import pandas as pd

    from core.representations.placement import sense_votes
    from ui.placement import PlacedSentence, verdict

    rows = [(0, "river", 0.61), (0, "river", 0.60), (0, "money", 0.63), (0, "money", 0.59),   # 2 : 2 at hidden state 0
            (1, "river", 0.80), (1, "river", 0.79), (1, "money", 0.70), (1, "river", 0.69)]   # 3 : 1 at hidden state 1
    neighbours = pd.DataFrame(rows, columns=["layer", "label", "cosine"])
    placed = PlacedSentence("I sat on the bank.", (13, 17), 1, False, None, None, None, neighbours, sense_votes(neighbours))
    tied = verdict(placed, 0)
    assert "money 2, river 2: a tie: no sense wins the vote." in tied  # was "the vote is **money**" (1.22 against 1.21)
    assert "the vote is **river**" in verdict(placed, 1) and "tie" not in verdict(placed, 1)


def test_the_contextuality_sentence_names_every_hidden_state_within_the_margin_of_the_lowest():
    import pandas as pd

    from core.representations.contextuality import contextuality_sentence

    adjusted = [0.60, 0.30, 0.205, 0.20, 0.21, 0.35]  # 2-4 within 0.02 of the lowest (3); 1 and 5 are not
    table = pd.DataFrame({"layer": range(6), "self_similarity": [a + 0.3 for a in adjusted],
                          "anisotropy": [0.3] * 6, "self_similarity_adjusted": adjusted,
                          "intra_sentence": [float("nan")] * 6})
    sentence = contextuality_sentence(table)
    assert "lowest at hidden states 2–4 (within 0.02 of its minimum, 0.200)." in sentence  # was "at hidden state 3"
    single = contextuality_sentence(table.assign(self_similarity_adjusted=[0.6, 0.3, 0.1, 0.2, 0.25, 0.35]))
    assert "lowest at hidden state 2 (0.100)." in single


def test_the_static_similarity_sentence_names_no_lowest_layer_within_the_margin_of_the_last():
    from core.teaching.about import static_similarity_sentence

    # mean over the text tokens per hidden state: 1.0, 0.6, 0.40, 0.41 (the last is 0.01 above the lowest)
    similarity = np.array([[1.0, 1.0], [0.5, 0.7], [0.39, 0.41], [0.40, 0.42]])
    text = static_similarity_sentence(similarity, np.array([False, False]))
    assert text == "Over the tokens of your text it averages 0.41 at hidden state 3, the last."  # was "lowest at 2"
    dipped = static_similarity_sentence(np.array([[1.0], [0.30], [0.31], [0.6]]), np.array([False]))
    assert dipped.endswith("and is lowest at hidden states 1–2 (within 0.02 of 0.30).")


def test_the_dla_sentence_names_the_parts_within_the_margin_of_the_largest():
    from viz.patching import dla_sentence

    heads = np.array([[0.20, -1.50], [1.45, 0.30]])  # |−1.50| largest; 1.45 within 0.1 of it
    mlps = np.array([0.90, -0.20, 0.40])              # 0.90 alone
    result = SimpleNamespace(heads=heads, mlps=mlps, embeddings=0.5, biases=0.0,
                             total=float(heads.sum() + mlps.sum() + 0.5))
    sentence = dla_sentence(result, " Mary", " John")
    assert ("The largest head contribution is head 1 of layer 0 (-1.50), with head 0 of layer 1 (+1.45) within 0.1 "
            "of it; the largest MLP is layer 0's (+0.90); the embeddings") in sentence
