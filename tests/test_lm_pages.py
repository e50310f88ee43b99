"""Issue 27's views in AppTest on tiny random Llama and GPT-2 language models: sampling, generation, patching, DLA."""

from __future__ import annotations

import json
import re

import pytest

from tests.lm_factory import build_tiny_llama_lm
from tests.model_factory import build_tiny_gpt2_lm
from tests.test_app import open_app, page_errors
from tests.test_tour_lm import rank_one_colour, shade_of
from ui.page_state import view_query

pytestmark = pytest.mark.app
HOSTILE = "<script>alert(1)</script> \"><img src=x onerror=alert(1)>"
CLEAN, CORRUPTED = "I will hike along the bank of a", "I will open along the bank of a"


@pytest.fixture(scope="module")
def lm_dirs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lm-pages")
    return {"llama": str(build_tiny_llama_lm(folder / "llama")), "gpt2": str(build_tiny_gpt2_lm(folder / "gpt2"))}


def _text(at) -> str:
    shown = "\n".join(m.value for m in at.markdown) + "\n".join(c.value for c in at.caption)
    return shown.replace("\\", "")  # markdown escapes, as the reader sees the text


@pytest.mark.parametrize("which", ["llama", "gpt2"])
def test_predictions_page_shapes_the_distribution_and_generates(lm_dirs, which):
    at = open_app({"model": lm_dirs[which], "text": "the cat sat on the", "topk": "5", "steps": "4"},
                  page="app_pages/predictions.py")
    assert not page_errors(at)
    text = _text(at)
    assert "5 of " in text and "tokens can be drawn" in text and "nats before the cuts" in text
    assert "4 tokens written (greedy)" in text
    if which == "gpt2":  # the lens of Llama-like models is issue 26's (core/outputs/lens.py)
        assert "the final prediction stays on top from hidden state" in text
        # issue 40, items 5 and 10: a read-out, not where the answer is decided; rank 1 is the scale's light end
        assert "When the prediction becomes readable: the logit lens" in [h.value for h in at.header]
        assert "not where it is decided" in text and "dark = already on top" not in text
        lens = next(json.loads(c.proto.spec)["data"][0] for c in at.get("plotly_chart")
                    if "Logit lens" in json.loads(c.proto.spec)["layout"]["title"]["text"])
        assert f"A {shade_of(rank_one_colour(lens))} " in text and "cell means rank 1" in text
    alternative = next(b for b in at.button if "alt-1-" in (b.key or ""))
    alternative.click().run()
    assert not page_errors(at)
    assert "the first 2 chosen by hand" in _text(at)
    assert "." in view_query(at.session_state)["branch"]


@pytest.mark.parametrize("view", ["residual", "heads", "mlp", "dla"])
def test_patching_page_views(lm_dirs, view):
    at = open_app({"model": lm_dirs["llama"], "clean": CLEAN, "corrupted": CORRUPTED, "answer": " river",
                   "wrong": " home", "view": view}, page="app_pages/patching.py")
    assert not page_errors(at)
    text = _text(at)
    assert ("All parts add up to the total" in text) if view == "dla" else ("of the way from corrupted" in text)


def test_unequal_lengths_and_hostile_text_are_sentences(lm_dirs):
    at = open_app({"model": lm_dirs["gpt2"], "clean": CLEAN, "corrupted": HOSTILE, "answer": " river",
                   "wrong": " home"}, page="app_pages/patching.py")
    assert not page_errors(at)
    warning = " ".join(w.value for w in at.warning)
    assert "same length" in warning and "alert" in warning
    assert "\\<" in warning and not re.search(r"(?<!\\)[<>]", warning)  # every < and > escaped: shown as text
    at = open_app({"model": lm_dirs["gpt2"], "clean": CLEAN, "corrupted": CORRUPTED, "answer": HOSTILE[:40],
                   "wrong": " home"}, page="app_pages/patching.py")  # an answer may have 40 characters
    assert not page_errors(at) and "not one" in " ".join(w.value for w in at.warning)


def test_a_prompt_over_the_limit_is_kept_in_its_box_and_named_in_a_sentence(lm_dirs):
    """Issue 40, item 18: the boxes had max_chars=400, and a longer paste was dropped without a word (AppTest's
    ``input``, like the browser, leaves a box as it was when the value is longer than its max_chars)."""
    at = open_app({"model": lm_dirs["gpt2"], "clean": CLEAN, "corrupted": CORRUPTED, "answer": " river",
                   "wrong": " home"}, page="app_pages/patching.py")
    pasted = ("word " * 120)[:600]
    next(box for box in at.text_input if box.label == "Clean prompt").input(pasted).run()
    assert not page_errors(at)
    assert next(box for box in at.text_input if box.label == "Clean prompt").value == pasted
    warning = " ".join(w.value for w in at.warning)
    assert "clean prompt has 600 characters" in warning and "400" in warning, warning
    assert "of the way from corrupted" not in _text(at)  # nothing patched on a prompt that is not the one shown
    next(box for box in at.text_input if box.label == "Answer (one token, with its leading space)").input(
        " " + "a" * 40).run()
    warning = " ".join(w.value for w in at.warning)
    assert "answer has 41 characters" in warning and "40" in warning and "Shorten them" in warning, warning


def test_an_encoder_gets_a_sentence(tiny_bert_dir):
    at = open_app({"model": tiny_bert_dir}, page="app_pages/patching.py")
    assert not page_errors(at)
    assert "not a causal language model" in " ".join(i.value for i in at.info)


def test_head_statistics_show_induction_scores_for_a_decoder(lm_dirs):
    at = open_app({"model": lm_dirs["llama"], "text": "the cat sat on the mat", "ind_len": "12"}, page="app_pages/stats.py")
    assert not page_errors(at)
    assert "of its attention goes to the token after the earlier occurrence" in _text(at)
    even = sum(1 / (q + 1) for q in range(13, 25)) / 12  # BOS + 12 tokens, then queries 13..24
    assert f"evenly over the tokens it can see would give {even:.1%}" in _text(at)
    assert "strongest induction heads (L" in _text(at)


def test_does_it_matter_knocks_out_the_strongest_induction_heads_on_the_repeated_tokens(lm_dirs):
    """Issue 27, item 6: on Does it matter?, a button chooses the strongest induction heads, and the page measures
    their knock-out on the induction test's repeated random tokens, loss on each copy, as core.attention_heads.induction computes it."""
    import numpy as np

    from core.attention_heads.induction import induction_scores, repeat_loss
    from core.model.models import load_model
    from core.outputs.predictions import load_language_model

    at = open_app({"model": lm_dirs["llama"], "text": "the cat sat on the mat", "measure": "sentence embedding"},
                  page="app_pages/effects.py")
    assert not page_errors(at)
    model = load_model(lm_dirs["llama"])
    scores = induction_scores(model, length=min(40, (model.max_tokens - 1) // 2), seed=0)  # 31 in its 64 tokens
    order = np.argsort(scores.scores.ravel())[::-1][:3]
    strongest = [tuple(int(v) for v in np.unravel_index(int(i), scores.scores.shape)) for i in order]
    codes = " ".join(f"L{l}H{h}" for l, h in strongest)
    at.button(key="effects-induction-heads").click().run()
    assert not page_errors(at)
    assert at.text_input(key="effects.heads").value == codes and view_query(at.session_state)["heads"] == codes
    lm = load_language_model(model)
    plain, knocked = repeat_loss(lm, scores), repeat_loss(lm, scores, strongest)
    assert (f"moves the loss on the second copy from {plain.second:.2f} to {knocked.second:.2f} nats per token, and on "
            f"the first copy from {plain.first:.2f} to {knocked.first:.2f}") in _text(at)


def test_the_bundled_encoder_offers_no_induction_knock_out():
    at = open_app({"text": "the cat sat on the mat"}, page="app_pages/effects.py")
    assert not page_errors(at)
    assert not [b for b in at.button if b.key == "effects-induction-heads"]


def test_sampling_uses_the_sliders_and_top_k_one_is_greedy(lm_dirs):
    at = open_app({"model": lm_dirs["gpt2"], "text": "the cat sat on the", "steps": "5"}, page="app_pages/predictions.py")
    greedy = at.code[0].value
    at.toggle(key="predictions.sample").set_value(True).run()
    at.slider(key="predictions.temp").set_value(3.0).run()
    assert not page_errors(at) and "sampled with seed 0" in _text(at)
    hot = at.code[0].value
    at.slider(key="predictions.topk").set_value(1).run()  # one token left: sampling writes the greedy text
    assert not page_errors(at)
    assert at.code[0].value == greedy != hot
    assert view_query(at.session_state)["topk"] == "1" and view_query(at.session_state)["sample"] == "true"


def test_stop_keeps_the_text_so_far_and_continue_writes_the_same_text(lm_dirs, monkeypatch):
    """Issue 27, item 2: a generation written a chunk at a time (one token per chunk here) can be stopped between
    chunks; the tokens written stay, and Continue ends on the text an uninterrupted generation writes."""
    import ui.lm_writer as writer
    from core.model.models import load_model
    from core.outputs.generation import generate
    from core.outputs.predictions import load_language_model

    monkeypatch.setattr(writer, "CHUNK_SECONDS", 0.0)
    monkeypatch.setattr(writer, "MIN_CHUNK", 1)
    text = "the bass player sat on the"  # a text no other test writes after: nothing cached
    at = open_app({"model": lm_dirs["gpt2"], "text": text, "steps": "7", "sample": "true", "seed": "5"},
                  page="app_pages/predictions.py")
    assert not page_errors(at)
    whole = generate(load_language_model(load_model(lm_dirs["gpt2"])), text, steps=7, sample=True, seed=5)
    so_far = at.code[-1].value  # the page's run wrote one token, the writing fragment one more
    assert so_far == whole.prompt + "".join(s.text for s in whole.steps[:2])
    at.button(key="generation-stop").click().run()
    assert not page_errors(at)
    assert "Stopped after 2 of 7 tokens" in " ".join(i.value for i in at.info)
    assert at.code[-1].value == so_far and "2 tokens written (sampled with seed 5)" in _text(at)
    at.button(key="generation-continue").click().run()
    for _ in range(7):  # each run writes two more tokens; a browser reruns the writing fragment by itself
        if "7 tokens written" in _text(at):
            break
        assert not page_errors(at)
        at.run()
    assert not page_errors(at)
    assert "7 tokens written (sampled with seed 5)" in _text(at) and at.code[-1].value == whole.text


def test_predictions_read_only_the_token_limit_and_say_the_text_was_cut(lm_dirs, monkeypatch):
    """Issue 40, item 17: every part of Predictions reads the first EXPLORER_MAX_TOKENS tokens, as Attention does, and
    the page says the text was cut; the guesses and the written token are the model's own on those tokens."""
    import numpy as np
    import torch

    from core.model.models import load_model
    from core.outputs.predictions import load_language_model

    monkeypatch.setenv("EXPLORER_MAX_TOKENS", "16")  # below the tiny model's own 64
    text = "the cat sat on the mat and the dog sat on the log " * 3
    lm = load_language_model(load_model(lm_dirs["gpt2"]))
    ids = lm.tokenizer(text, return_tensors="pt")["input_ids"][0]
    assert 16 < len(ids) <= 64
    at = open_app({"model": lm_dirs["gpt2"], "text": text, "steps": "3"}, page="app_pages/predictions.py")
    assert not page_errors(at)
    notice = " ".join(i.value for i in at.info)
    assert f"The text has {len(ids)} tokens" in notice and "only the first 16 are used by every part" in notice, notice
    with torch.no_grad():
        probs = lm.model(input_ids=ids[None, :16]).logits[0].double().softmax(-1).numpy()  # [16, vocab]
    table = at.dataframe[0].value
    assert len(table) == 16
    np.testing.assert_allclose(table["probability"].to_numpy(), probs.max(-1), rtol=1e-6)
    read = lm.tokenizer.decode(ids[:16])
    written = at.code[0].value
    assert written.startswith(read) and written[len(read):].startswith(lm.tokenizer.decode([int(probs[-1].argmax())]))
    assert "Over 16 positions" in _text(at)


def test_the_lens_grid_shows_a_window_of_positions_computed_when_shown(lm_dirs):
    """Issue 40, item 17: past 32 tokens the lens shows 32 positions at a time, and a link can choose which."""
    from ui.lm_lens import LENS_POSITIONS

    text = "the cat sat on the mat and the dog sat on the log " * 3
    count = len(build_tokens(lm_dirs["gpt2"], text))
    assert LENS_POSITIONS < count <= 64
    at = open_app({"model": lm_dirs["gpt2"], "text": text}, page="app_pages/predictions.py")
    assert not page_errors(at)
    assert f"Over positions 0 to {LENS_POSITIONS - 1} (of the text's {count})" in _text(at)
    at = open_app({"model": lm_dirs["gpt2"], "text": text, "lens_from": "5"}, page="app_pages/predictions.py")
    assert not page_errors(at)
    assert f"Over positions 5 to {5 + LENS_POSITIONS - 1} (of the text's {count})" in _text(at)
    assert view_query(at.session_state)["lens_from"] == "5"


def build_tokens(folder: str, text: str) -> list[int]:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)(text)["input_ids"]


def test_the_patching_page_computes_only_the_grid_it_shows(lm_dirs):
    """Issue 40, item 15: the first Patching view computes its own grid alone, the others when they are chosen."""
    from ui import results
    from ui.models import run_of

    prompts = {"clean": CLEAN, "corrupted": CORRUPTED, "answer": " river", "wrong": " home"}
    run = run_of(lm_dirs["llama"], (CLEAN, CORRUPTED))
    for kind in ("residual", "heads", "mlp"):  # process-wide: other tests computed these prompts' grids
        results.patches.forget_at(run, kind, " river", " home")

    def kept(kind: str) -> bool:
        return results.patches.peek_at(run, kind, " river", " home") is not None

    at = open_app({"model": lm_dirs["llama"], **prompts}, page="app_pages/patching.py")
    assert not page_errors(at) and "of the way from corrupted" in _text(at)
    assert kept("residual") and not kept("heads") and not kept("mlp")
    next(control for control in at.segmented_control if control.label == "Show").set_value("heads").run()
    assert not page_errors(at)
    assert kept("heads") and not kept("mlp")
