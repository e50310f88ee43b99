"""The "Does it matter?" page in AppTest: bundled model, tiny encoder/decoder with and without a head, hostile text."""

from __future__ import annotations

import numpy as np
import pytest
from transformers import AutoConfig, AutoTokenizer

from core.model.models import bundled_model_path
from tests.model_factory import build_tiny_bert_mlm, build_tiny_gpt2_lm
from tests.test_app import open_app, page_errors
from ui.page_state import view_query

PAGE = "app_pages/effects.py"
HOSTILE = "<script>alert(1)</script> ![x](http://example.com/a.png) $x^2$ **bold** & \"the\" cat [MASK] `sat`"

pytestmark = pytest.mark.app


@pytest.fixture(scope="module")
def language_model_dirs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("effects-page")
    return {"bert": str(build_tiny_bert_mlm(folder / "bert-mlm")), "gpt2": str(build_tiny_gpt2_lm(folder / "gpt2-lm"))}


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def markdown_text(at) -> str:
    return "\n".join(m.value for m in at.markdown) + "\n".join(c.value for c in at.caption)


@pytest.mark.integration
def test_bundled_model_says_it_has_no_head_and_shows_parts_one_to_three():
    at = open_app({"text": "I will hike along the bank of a river."}, page=PAGE)
    assert not page_errors(at)
    infos = " ".join(i.value for i in at.info)
    assert "has no language" in infos and "logit" in infos
    gap = float(metrics(at)["Completeness gap"].rstrip("%")) / 100
    assert gap < 0.02
    assert "Spearman's ρ of a head's effect" in markdown_text(at)
    at.text_input(key="effects.heads").set_value("L0H2 L3H5").run()
    assert not page_errors(at)
    cosine = float(metrics(at)["Cosine, original vs ablated sentence embedding"])
    assert 0.0 < cosine < 1.0
    assert "in the compare page's two texts" in markdown_text(at)


def test_masked_lm_shows_predictions_before_and_after_and_the_lens(language_model_dirs):
    at = open_app({"model": language_model_dirs["bert"], "text": "the [MASK] of a river"}, page=PAGE)
    assert not page_errors(at)
    at.text_input(key="effects.heads").set_value("L0H1 L1H3").run()
    at.radio(key="effects.ablation").set_value("mean").run()
    assert not page_errors(at)
    text = markdown_text(at)
    assert "log p(" in text and "mean ablation" in text
    assert "is the top token from hidden state" in text  # the logit lens ran
    assert next(s for s in at.selectbox if s.label == "Position").value == 2  # the mask position by default


def test_masked_lm_without_a_mask_measures_the_embedding(language_model_dirs):
    at = open_app({"model": language_model_dirs["bert"], "text": "the bank of a river"}, page=PAGE)
    assert not page_errors(at)
    assert any("has no \\[MASK\\]" in i.value for i in at.info)


def test_causal_lm_target_can_be_typed_and_a_bad_target_is_a_sentence(language_model_dirs):
    at = open_app({"model": language_model_dirs["gpt2"], "text": "the cat sat on the"}, page=PAGE)
    assert not page_errors(at)
    at.text_input(key="effects.heads").set_value("L1H0").run()
    assert "log p(" in markdown_text(at)
    at.text_input(key="effects.target").set_value("the cat sat on the mat").run()
    assert not page_errors(at)
    assert any("give a single token" in w.value for w in at.warning)
    assert "log p(" in markdown_text(at)  # the page still measures, with the model's own top prediction
    assert at.text_area(key="text").value == "the cat sat on the"  # the user's text survives


def test_unknown_heads_are_a_warning_and_known_ones_still_count(tiny_bert_dir):
    at = open_app({"model": tiny_bert_dir, "text": "the cat sat on the mat"}, page=PAGE)
    at.text_input(key="effects.heads").set_value("l1h2, L9H9 <b>x</b>").run()
    assert not page_errors(at)
    assert any("Not a head of this model: L9H9" in w.value for w in at.warning)
    assert "Cosine, original vs ablated sentence embedding" in metrics(at)


def test_encoder_without_head_shows_the_embedding_change(tiny_bert_dir):
    at = open_app({"model": tiny_bert_dir, "text": "the cat sat on the mat"}, page=PAGE)
    at.text_input(key="effects.heads").set_value("L1H2").run()
    assert not page_errors(at)
    assert "Cosine, original vs ablated sentence embedding" in metrics(at)


@pytest.mark.parametrize("which", ["bert", "gpt2"])
def test_hostile_text_is_shown_as_text(language_model_dirs, which):
    at = open_app({"model": language_model_dirs[which], "text": HOSTILE}, page=PAGE)
    assert not page_errors(at)
    at.text_input(key="effects.heads").set_value("L0H0").run()
    assert not page_errors(at)
    coloured = [h.proto.body for h in at.get("html") if 'class="figure-alt"' not in h.proto.body]
    assert coloured and all("<script>" not in body for body in coloured)
    assert any("&lt;" in body for body in coloured)


@pytest.mark.integration
def test_hostile_text_on_the_bundled_model_is_shown_as_text():
    at = open_app({"text": HOSTILE, "heads": "L0H2"}, page=PAGE)
    assert not page_errors(at)
    assert "Cosine, original vs ablated sentence embedding" in metrics(at)
    coloured = [h.proto.body for h in at.get("html") if 'class="figure-alt"' not in h.proto.body]
    assert coloured and all("<script>" not in body for body in coloured)
    assert any("&lt;" in body for body in coloured)  # "<" is a token of its own, escaped


def test_the_compare_page_offers_the_ablated_run(tiny_bert_dir):
    at = open_app({"model": tiny_bert_dir}, page=PAGE)
    at.text_input(key="effects.heads").set_value("L0H1").run()
    at.switch_page("app_pages/compare.py").run()
    assert not page_errors(at)
    toggle = at.toggle(key="show_ablated")
    before = at.selectbox(key="compare.word").value
    toggle.set_value(True).run()
    assert not page_errors(at)
    assert any("knocked out" in c.value for c in at.caption)
    assert at.selectbox(key="compare.word").value == before


# A link that names the heads (the tour's link, a shared URL) is the whole view: the first run of the page reads them.
@pytest.mark.parametrize("which", ["bert", "gpt2"])
def test_a_link_naming_heads_and_measure_shows_the_knock_out_on_its_first_run(language_model_dirs, which):
    query = {"model": language_model_dirs[which], "text": HOSTILE, "heads": "L1H0 L0H3", "ablation": "mean",
             "measure": "sentence embedding"}
    at = open_app(query, page=PAGE)
    assert not page_errors(at)
    assert at.text_input(key="effects.heads").value == "L1H0 L0H3"
    assert at.radio(key="effects.measure").value == "sentence embedding"
    assert at.radio(key="effects.ablation").value == "mean"
    assert "Cosine, original vs ablated sentence embedding" in metrics(at)
    assert "is the top token from hidden state" in markdown_text(at)  # the run went on to the logit lens
    assert {key: view_query(at.session_state)[key] for key in ("heads", "ablation", "measure")} == {
        "heads": "L1H0 L0H3", "ablation": "mean", "measure": "sentence embedding"}  # and the URL still says so


def test_a_link_naming_heads_on_a_masked_lm_shows_the_prediction_before_and_after(language_model_dirs):
    text = "<script>alert(1)</script> the [MASK] sat"  # HOSTILE's mask lies past the tiny model's 64 tokens
    at = open_app({"model": language_model_dirs["bert"], "text": text, "heads": "L1H0"}, page=PAGE)
    assert not page_errors(at)
    assert at.radio(key="effects.measure").value == "prediction"  # the default: the masked word
    assert "log p(" in markdown_text(at) and "Cosine, original vs ablated sentence embedding" not in metrics(at)


def test_a_model_without_a_head_ends_the_page_with_a_tidy_url(tiny_bert_dir):
    """Part 4 ends the page early for a model without a language-model head; the link's other-page parameters still go."""
    at = open_app({"model": tiny_bert_dir, "text": "the cat sat", "heads": "L1H0", "layer": "1", "stat": "x"}, page=PAGE)
    assert not page_errors(at)
    assert any("nothing to look through" in i.value for i in at.info)
    assert view_query(at.session_state) == {"model": tiny_bert_dir, "text": "the cat sat", "heads": "L1H0"}


@pytest.mark.app
def test_presentation_mode_folds_the_explanations_away(tiny_bert_dir):
    """On a slide the page's explanatory paragraphs sit in closed "About this" expanders; on the page they are text."""
    query = {"model": tiny_bert_dir, "text": "the cat sat", "heads": "L1H0"}
    folded = lambda at, phrase: any(phrase in m.value for e in at.expander for m in e.markdown)  # noqa: E731 - a one-line helper, read where it is used
    shown = open_app(query, page=PAGE)
    present = open_app(query | {"present": "true"}, page=PAGE)
    assert not page_errors(present) and not page_errors(shown)
    for phrase in ("Jain & Wallace", "Remove heads and run the text again", "Integrated gradients"):
        assert folded(present, phrase), phrase
        assert not folded(shown, phrase) and phrase in markdown_text(shown), phrase


@pytest.mark.integration
def test_the_pages_own_cap_is_called_the_pages_not_the_apps():
    """Issues 28 and 41: the page says its own cap of 128 (the app reads MiniLM's 512), once, with its reason."""
    text = "the bank of a river " * 30
    at = open_app({"text": text}, page="app_pages/effects.py")
    folder = bundled_model_path()  # read independently of the app: the tokenizer and the config
    count = len(AutoTokenizer.from_pretrained(folder)(text)["input_ids"])
    config = AutoConfig.from_pretrained(folder)
    heads = config.num_hidden_layers * config.num_attention_heads
    said = [i.value for i in at.info if i.value.startswith("This page reads")]
    assert said == [f"This page reads the first 128 of the text's {count} tokens: it re-runs the model once per head "
                    f"for its knock-outs ({heads} passes over {count} tokens) and more for its attributions."], said
    assert "this app is set to" not in " ".join(said)


def _bold_numbers(line: str) -> list[float]:
    import re

    return [float(n.replace("−", "-")) for n in re.findall(r"\*\*([+\-−]?\d+\.\d+)\*\*", line)]


def test_the_knock_out_result_line_uses_the_pages_sign_convention(language_model_dirs):
    """Issue 40, item 3: the caption says the effect is the drop in log p (positive = less likely); the result line
    gives that drop, before − after, from log p computed here with a hook of its own on the plainly loaded model."""
    import re

    import torch

    from core.model.models import load_model
    from core.outputs.predictions import load_language_model

    text = "the cat sat on the"
    at = open_app({"model": language_model_dirs["gpt2"], "text": text, "heads": "L1H0 L0H2"}, page=PAGE)
    assert not page_errors(at)
    assert any("positive = the target became less likely" in c.value for c in at.caption)
    line = next(m.value for m in at.markdown if m.value.startswith("**log p("))
    lm = load_language_model(load_model(language_model_dirs["gpt2"]))
    ids = lm.tokenizer(text, return_tensors="pt")["input_ids"]
    width = lm.model.config.n_embd // lm.model.config.n_head

    def log_probabilities(knocked: dict[int, list[int]]):
        from tests.plain_heads import zero_heads_hook

        handles = [lm.model.transformer.h[layer].attn.c_proj.register_forward_pre_hook(zero_heads_hook(heads, width))
                   for layer, heads in knocked.items()]
        try:
            with torch.no_grad():
                return lm.model(input_ids=ids).logits[0, -1].double().log_softmax(-1)
        finally:
            for handle in handles:
                handle.remove()

    before, after = log_probabilities({}), log_probabilities({1: [0], 0: [2]})
    target = int(before.argmax())
    drop = float(before[target] - after[target])
    assert abs(drop) >= 0.002  # the knock-out changes the target's log-probability visibly
    shown = re.search(r"(-?\d+\.\d+) → (-?\d+\.\d+)", line.replace("−", "-"))
    assert float(shown.group(1)) == pytest.approx(float(before[target]), abs=6e-4)
    assert float(shown.group(2)) == pytest.approx(float(after[target]), abs=6e-4)
    assert "drop in log p(target)" in line
    assert _bold_numbers(line) == [pytest.approx(drop, abs=6e-4)]
    assert f"became {'less' if drop > 0 else 'more'} likely" in line


def _repeat_loss(first, second):
    from core.attention_heads.induction import RepeatLoss

    first, second = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    return RepeatLoss(float(first.mean()), float(second.mean()), (), first, second)


def _induction_result(scores):
    from core.attention_heads.induction import InductionScores

    return InductionScores(np.asarray(scores, dtype=np.float64), np.zeros(9, dtype=np.int64), 1, 4)


def test_the_induction_sentence_is_written_from_the_heads_and_the_losses():
    """Issue 40, item 4: "Induction heads lower the loss on the second copy only" was appended for any heads. The
    reading now follows the measured change on each copy against 2 standard errors of its tokens' changes."""
    from viz.induction import induction_knockout_sentence

    result = _induction_result([[0.9, 0.02, 0.1], [0.5, 0.03, 0.05]])
    plain = _repeat_loss([14.0, 14.5, 15.0], [5.0, 5.5, 6.0])
    # A weak induction head (L0H1: 0.02, rank 6 of 6) whose knock-out raises both copies alike (like L23H3 on SmolLM2).
    both = induction_knockout_sentence(result, ((0, 1),), plain, _repeat_loss([14.05, 14.7, 15.1], [5.2, 5.6, 6.2]))
    assert "L0H1 0.020 (rank 6 of 6)" in both
    assert "rises on both copies" in both and "as induction heads do" not in both
    assert "lower the loss on the second copy only" not in both
    # The strongest head: the second copy's loss rises by 3 nats, the first copy's does not move beyond its spread.
    copying = induction_knockout_sentence(result, ((0, 0),), plain, _repeat_loss([14.1, 14.4, 15.0], [8.0, 8.6, 9.0]))
    assert "L0H0 0.900 (rank 1 of 6)" in copying
    assert "rises more than the first's" in copying and "as induction heads do" in copying
    # changes and margins printed from the numbers: +3.03 on the second copy (mean of 3.0, 3.1, 3.0)
    assert "changes +3.03 ± " in copying
    unchanged = induction_knockout_sentence(result, ((1, 2),), plain, _repeat_loss([14.1, 14.4, 15.0], [5.1, 5.4, 6.0]))
    assert "Neither copy's loss changes beyond its spread" in unchanged


@pytest.fixture(scope="module")
def unconverging_gpt2_dir(tmp_path_factory) -> str:
    """The tiny GPT-2 language model with its query/key/value weights × 100, saved: attention so sharp that the
    target's log-probability jumps along the integrated-gradients path and no affordable number of points adds up."""
    import torch

    from core.model.models import load_model
    from core.outputs.predictions import load_language_model

    folder = build_tiny_gpt2_lm(tmp_path_factory.mktemp("unconverging") / "gpt2")
    lm = load_language_model(load_model(str(folder)))
    with torch.no_grad():
        for block in lm.model.transformer.h:
            block.attn.c_attn.weight.mul_(100.0)
    lm.model.save_pretrained(folder)
    return str(folder)


def test_integrated_gradients_that_do_not_add_up_are_flagged_and_not_correlated(unconverging_gpt2_dir):
    """Issue 40, item 2: on SmolLM2 the page's own numbers were a sum of −34.91 against a change of 17.12, with no
    warning, followed by rank correlations "unlikely by chance". Here the sum and the change are read off the page's
    metrics: when they differ by more than 2 %, a visible warning names both and no correlation of the scores is shown."""
    at = open_app({"model": unconverging_gpt2_dir, "text": "the cat sat on the"}, page=PAGE)
    assert not page_errors(at)
    shown = metrics(at)
    total, change = float(shown["Sum of the attributions"]), float(shown["Measure: input − baseline"])
    assert abs(total - change) > 0.02 * abs(change)  # the case this test is about
    warning = next(w.value for w in at.warning if "do not add up" in w.value)
    assert f"{total:.4f}" in warning and f"{change:.4f}" in warning
    assert "|integrated gradients|" not in markdown_text(at)
    assert any("No rank correlation of integrated gradients" in c.value for c in at.caption)


def test_integrated_gradients_that_add_up_keep_their_correlations(language_model_dirs):
    at = open_app({"model": language_model_dirs["gpt2"], "text": "the cat sat on the"}, page=PAGE)
    assert not page_errors(at)
    shown = metrics(at)
    total, change = float(shown["Sum of the attributions"]), float(shown["Measure: input − baseline"])
    assert abs(total - change) <= 0.02 * abs(change)
    assert not [w for w in at.warning if "do not add up" in w.value]
    assert "|integrated gradients| and attention rollout" in markdown_text(at)
