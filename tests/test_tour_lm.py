"""The guided tour's language-model track (issue 27, item 7) through AppTest on a tiny random GPT-2 language model:
each step draws its figure and says numbers that a direct computation on the same model reproduces, the link
reproduces the step, and the encoder tour is unchanged."""

from __future__ import annotations

import json
import math
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest

from tests.model_factory import build_tiny_gpt2_lm
from tests.test_ablated_views import trace_array
from tests.test_app import open_app, page_errors
from ui.page_state import view_query

pytestmark = pytest.mark.app
TOUR = "app_pages/tour.py"
TEXT = "the cat sat on the mat and the cat"
CLEAN, CORRUPTED = "I will hike along the bank of a", "I will open along the bank of a"
ENCODER_TITLES = ["Text becomes tokens and ids", "The static embedding: one row per token",
                  "Position, and hidden_states[0]", "One attention head", "Every head at once",
                  "What one head computes", "Still the same vector?", "Where does your sentence land?",
                  "Does attention explain?", "A whole corpus"]
ENCODER_CAPTION = ("Ten steps from tokens to a whole corpus. Every number is computed now, for the model and text in "
                   "the sidebar. Use the buttons or the ← → keys.")


@pytest.fixture(scope="module")
def lm_dir(tmp_path_factory):
    return str(build_tiny_gpt2_lm(tmp_path_factory.mktemp("tour-lm") / "gpt2"))


@pytest.fixture(scope="module")
def lm(lm_dir):
    from core.model.models import load_model
    from core.outputs.predictions import load_language_model

    return load_language_model(load_model(lm_dir))


def _track(at):
    """The track switch (its widget key carries a hash of its labels, so it is found by its prefix)."""
    return next(c for c in at.get("segmented_control") if c.key.startswith("tour.track"))


def _tour(query: dict[str, str]):
    at = open_app(query, page=TOUR)
    assert not page_errors(at), page_errors(at)
    return at


def _said(at) -> str:
    return " ".join(m.value for m in at.markdown).replace("\\", "")  # markdown escapes, as the reader sees it


def _figure(at) -> dict:
    charts = at.get("plotly_chart")
    assert len(charts) == 1, len(charts)
    return json.loads(charts[0].proto.spec)


def _link(at) -> tuple[str, dict[str, str]]:
    link = next(b.proto.url for b in at.get("link_button"))  # the step's "open the full page" button
    return urlsplit(link).path, {key: values[0] for key, values in parse_qs(urlsplit(link).query).items()}


def test_a_language_model_opens_on_the_lm_track_and_a_link_can_choose_the_other(lm_dir):
    at = _tour({"model": lm_dir})
    assert _track(at).value == "lm"
    assert at.header[0].value == "1 · What comes next?"
    assert at.slider(key="tour.step").max == 6 and "track" not in view_query(at.session_state)  # the default stays out of links
    at = _tour({"model": lm_dir, "track": "attention", "step": "4"})
    assert at.header[0].value == "4 · One attention head" and at.slider(key="tour.step").max == 10
    assert view_query(at.session_state)["track"] == "attention"


def test_the_encoder_tour_is_unchanged(tiny_bert_dir):
    at = _tour({"model": tiny_bert_dir, "track": "lm"})  # a link's LM track means nothing to an encoder
    assert not at.get("segmented_control") and "track" not in view_query(at.session_state)
    assert at.caption[0].value == ENCODER_CAPTION
    for step, title in enumerate(ENCODER_TITLES, start=1):
        at.slider(key="tour.step").set_value(step).run()
        assert not page_errors(at)
        assert at.header[0].value == f"{step} · {title}"


def test_the_predict_step_says_the_models_own_distribution(lm_dir, lm):
    from core.outputs.causal_lm import encode
    from core.outputs.generation import last_logits, shape_distribution

    at = _tour({"model": lm_dir, "text": TEXT, "step": "1"})
    d = shape_distribution(last_logits(lm, encode(lm, TEXT)))
    top = lm.tokenizer.decode([int(d.order[0])])
    said = _said(at)
    assert f"its top guess is **“{top.replace(' ', '·')}” at {d.raw[0]:.1%}**" in said, said  # spaces shown as ·
    assert f"The entropy is {d.entropy_before:.2f} nats" in said
    bars = _figure(at)["data"][1]
    assert np.allclose(trace_array(bars["x"]), d.probs[:len(trace_array(bars["x"]))])
    assert _link(at) == ("predictions", {"model": lm_dir, "text": TEXT})


def test_the_sample_step_writes_what_generate_writes_and_its_link_reproduces_it(lm_dir, lm):
    from core.outputs.generation import generate

    at = _tour({"model": lm_dir, "text": TEXT, "step": "2", "temp": "1.5", "seed": "3"})
    assert at.slider(key="tour.temp").value == 1.5 and at.number_input(key="tour.seed").value == 3
    greedy = generate(lm, TEXT, steps=12)
    sampled = generate(lm, TEXT, steps=12, sample=True, seed=3, temperature=1.5)
    said = _said(at)
    written = lambda g: "".join(s.text for s in g.steps)  # noqa: E731 - a one-line helper, read where it is used
    assert f"it writes “{written(greedy)}”" in said and f"and writes “{written(sampled)}”" in said
    low = min(s.probability for s in sampled.steps)
    digits = 1 if low >= 0.001 else 1 - math.floor(math.log10(low * 100))  # two significant digits below 0.1 %
    assert f"at **{low * 100:.{digits}f}%**" in said
    bars = _figure(at)["data"][0]
    assert np.allclose(trace_array(bars["y"]), [s.probability for s in sampled.steps])
    page, query = _link(at)
    assert page == "predictions" and query["temp"] == "1.5" and query["seed"] == "3" and query["sample"] == "true"
    predictions = open_app(query, page="app_pages/predictions.py")
    assert not page_errors(predictions)
    assert predictions.code[0].value == sampled.text  # the full page writes the same text
    assert view_query(at.session_state)["temp"] == "1.5" and view_query(at.session_state)["step"] == "2"  # the tour's own link, too


def test_the_lens_step_says_when_the_final_prediction_settles(lm_dir, lm):
    from core.model.inference import analyze
    from core.outputs.lens import lens_summary, logit_lens

    at = _tour({"model": lm_dir, "text": TEXT, "step": "3"})
    lens = logit_lens(lm, analyze(load_model_of(lm_dir), TEXT), k=1)
    summary = lens_summary(lens.final_ranks)
    said = _said(at)
    assert f"stays on top from hidden state {np.mean(summary.settled):.1f} on average" in said, said
    grid = _figure(at)["data"][0]
    assert np.allclose(trace_array(grid["z"]), np.log10(lens.final_ranks + 1))
    assert at.header[0].value == "3 · When the answer becomes readable: the logit lens"
    # issue 40, item 5: a read-out, not a locus; patching is where a detail is located
    assert "not where it is decided" in said and "patching (step 5) measures where" in said
    assert "Where in the network is the next token decided?" not in said
    # issue 40, item 10: the words for rank 1's colour follow the figure's own scale
    assert "dark cells already rank the final prediction first" not in said
    assert f"A {shade_of(rank_one_colour(grid))} " in said and "cell means rank 1, the final prediction already on top" in said


def rank_one_colour(trace: dict) -> str:
    """The colour the lens grid gives rank 1 (z = log10(1) = 0, the scale's low end unless it is reversed)."""
    assert trace["zmin"] == 0
    scale = trace["colorscale"]
    return scale[-1][1] if trace.get("reversescale") else scale[0][1]


def shade_of(colour: str) -> str:
    """'light' or 'dark' by WCAG relative luminance, worked by hand from the hex colour."""
    channels = [int(colour.lstrip("#")[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    luminance = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    assert not 0.1 <= luminance <= 0.4, colour  # an end of the scale is clearly light or dark
    return "light" if luminance > 0.4 else "dark"


def load_model_of(folder: str):
    from core.model.models import load_model

    return load_model(folder)


def test_the_induction_step_names_the_strongest_head(lm_dir):
    from core.attention_heads.induction import induction_scores

    at = _tour({"model": lm_dir, "step": "4"})
    result = induction_scores(load_model_of(lm_dir), length=31, seed=0)  # two copies and a BOS fit 64 positions
    layer, head = np.unravel_index(int(np.argmax(result.scores)), result.scores.shape)
    assert f"The strongest is head {head} of layer {layer}: {result.scores[layer, head]:.0%}" in _said(at)
    assert _link(at)[0] == "stats" and _link(at)[1]["ind_len"] == "31"
    assert np.allclose(trace_array(_figure(at)["data"][0]["z"]), result.scores)


def test_the_patching_step_patches_the_residual_stream_of_its_prompts(lm_dir, lm):
    from core.causal.patching import patch_residual

    at = _tour({"model": lm_dir, "step": "5", "clean": CLEAN, "corrupted": CORRUPTED, "answer": " river",
                "wrong": " home"})
    result = patch_residual(lm, CLEAN, CORRUPTED, " river", " home")
    said = _said(at)
    assert f"is {result.clean_diff:.2f} on the clean prompt and {result.corrupted_diff:.2f} on the corrupted" in said
    p, last = result.tokens.index(" hike"), len(result.tokens) - 1
    shown = lambda token: "“" + token.replace(" ", "·") + "”"  # noqa: E731 - the labelling rule, by hand
    assert f"differ at position {p} ({shown(result.tokens[p])} against {shown(result.corrupted_tokens[p])})" in said, said
    grid = result.grid  # the first layer from which the last position leads by 5 points at every layer after it
    moved = next((l for l in range(len(grid)) if all(grid[k, last] > grid[k, p] + 0.05 for k in range(l, len(grid)))),
                 None)
    if moved is None:
        assert "does not restore more than every changed position by more than 5 points" in said, said
    else:
        assert f"From layer {moved} on, the last position ({shown(result.tokens[last])}) restores more" in said, said
    assert np.allclose(trace_array(_figure(at)["data"][0]["z"]), result.grid)
    page, query = _link(at)
    assert page == "patching" and query["clean"] == CLEAN and query["answer"] == " river"


def test_the_patching_step_defaults_to_the_names_preset_and_explains_unequal_lengths(lm_dir):
    at = _tour({"model": lm_dir, "step": "5"})
    assert at.text_input(key="tour.clean").value.startswith("When Mary and John went to the store")
    assert not at.get("plotly_chart")  # the tiny tokenizer cuts the names into pieces: a sentence says why
    assert any("Use **Next**" in i.value for i in at.info)


def test_next_back_and_the_switch_move_within_the_track(lm_dir):
    at = _tour({"model": lm_dir, "text": TEXT})
    for step in range(2, 7):
        at.button(key="tour_next").click().run()
        assert not page_errors(at), page_errors(at)
        assert at.header[0].value.startswith(f"{step} ·") and view_query(at.session_state)["step"] == str(step)
    assert at.button(key="tour_next").disabled
    _track(at).set_value("attention").run()
    assert not page_errors(at)
    assert at.header[0].value == "1 · Text becomes tokens and ids" and view_query(at.session_state)["track"] == "attention"
    assert at.caption[0].value == ENCODER_CAPTION


def test_presentation_mode_draws_the_lm_steps_as_slides(lm_dir):
    at = _tour({"model": lm_dir, "text": TEXT, "step": "1", "present": "true"})
    figure = _figure(at)
    assert figure["layout"]["width"] * 9 == figure["layout"]["height"] * 16
    assert not [i for i in at.info if "Try this" in i.value]


@pytest.mark.parametrize("step", [1, 2, 3])
@pytest.mark.parametrize("case", ["empty", "markup", "far past the limit", "markdown and latex", "nul bytes"])
def test_hostile_sidebar_text_on_the_text_steps(step, case, lm_dir):
    from tests.test_robustness import HOSTILE_TEXTS

    text = HOSTILE_TEXTS[case]
    at = open_app({"model": lm_dir, "step": str(step), "text": text}, page=TOUR)
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert all("no text" in e.lower() for e in errors) if case == "empty" else not errors, errors
    assert len(at.get("plotly_chart")) == 1 or any("Use **Next**" in i.value for i in at.info)
    for m in at.markdown:  # nothing the user typed becomes HTML
        assert "<script" not in m.value and "<img" not in m.value
