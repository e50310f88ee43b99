"""The guided tour through AppTest: every step from a deep link, on tiny models and the bundled one,
back/next, and hostile sidebar text on every step."""

from __future__ import annotations

import pytest

from tests.test_app import open_app, page_errors
from tests.test_robustness import HOSTILE_TEXTS
from ui.page_state import view_query

TOUR = "app_pages/tour.py"
STEPS = 10


def _tour(query: dict[str, str]):
    # the ten steps: a language model (the tiny GPT-2 has its tied head) opens on the LM track (tests/test_tour_lm.py)
    return open_app({"track": "attention"} | query, page=TOUR)


def _charts(at) -> int:
    return len(at.get("plotly_chart"))


def _header(at) -> str:
    return at.header[0].value


@pytest.mark.app
@pytest.mark.parametrize("step", range(1, STEPS + 1))
@pytest.mark.parametrize("model_fixture", ["tiny_bert_dir", "tiny_gpt2_dir"])
def test_every_step_from_a_deep_link_on_tiny_models(step, model_fixture, request):
    at = _tour({"model": request.getfixturevalue(model_fixture), "step": str(step)})
    assert not page_errors(at), page_errors(at)
    assert _header(at).startswith(f"{step} ·")
    # one live figure, or a sentence saying why this step does not apply to this model
    assert _charts(at) == 1 or any("Next" in i.value for i in at.info), [i.value for i in at.info]


@pytest.mark.app
@pytest.mark.integration
@pytest.mark.parametrize("step", range(1, STEPS + 1))
def test_every_step_paints_one_figure_on_the_bundled_model(step):
    at = _tour({"step": str(step)})
    assert not page_errors(at), page_errors(at)
    assert _charts(at) == 1


@pytest.mark.app
def test_next_and_back_move_one_step_and_stop_at_the_ends(tiny_bert_dir):
    at = _tour({"model": tiny_bert_dir})
    assert _header(at).startswith("1 ·")
    assert at.button(key="tour_back").disabled and not at.button(key="tour_next").disabled  # issue 28
    for step in range(2, STEPS + 1):
        at.button(key="tour_next").click().run()
        assert not page_errors(at), (step, page_errors(at))
        assert _header(at).startswith(f"{step} ·")
        assert at.slider(key="tour.step").value == step
        assert view_query(at.session_state)["step"] == str(step)
    assert at.button(key="tour_next").disabled and not at.button(key="tour_back").disabled  # issue 28
    at.button(key="tour_back").click().run()
    assert _header(at).startswith(f"{STEPS - 1} ·")


@pytest.mark.app
def test_presentation_mode_drops_the_prompts_and_links_and_sizes_figures_16_by_9(tiny_bert_dir):
    at = _tour({"model": tiny_bert_dir, "step": "4", "present": "true"})
    assert not page_errors(at)
    assert not [i for i in at.info if "Try this" in i.value]
    assert not at.get("link_button")
    import json

    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert figure["layout"]["width"] * 9 == figure["layout"]["height"] * 16


@pytest.mark.app
def test_try_this_and_the_full_page_link_carry_the_state(tiny_bert_dir):
    at = _tour({"model": tiny_bert_dir, "step": "4"})
    assert [i for i in at.info if "Try this" in i.value]
    links = [b.proto.url for b in at.get("link_button")]
    assert len(links) == 1 and links[0].startswith("attention?")
    header = _header(at)  # "4 · One attention head": the head the step shows is the one the link opens
    shown = next(m.value for m in at.markdown if "attends most to the previous" in m.value)
    layer, head = shown.split("**layer ")[1].split("**")[0].split(", head ")
    assert f"layer={layer}" in links[0] and f"head={head}" in links[0] and "source=raw" in links[0], (header, links)


@pytest.mark.app
def test_the_senses_step_places_the_sidebar_sentence(tiny_bert_dir):
    at = _tour({"model": tiny_bert_dir, "step": "8", "text": "The crane lifted the steel beam."})
    assert not page_errors(at)
    assert "the sidebar's text" in at.markdown[-1].value or any("the sidebar's text" in m.value for m in at.markdown)
    assert any("“crane”" in m.value for m in at.markdown)


@pytest.mark.app
@pytest.mark.parametrize("model_fixture", ["tiny_bert_dir", "tiny_gpt2_dir"])
def test_the_explain_step_knocks_out_the_heads_it_names_and_links_to_the_effects_page(model_fixture, request):
    from urllib.parse import parse_qs, urlsplit

    from core.attention_heads.head_statistics import analysis_statistics
    from core.causal.effects import ablate_heads
    from core.causal.effects_compare import sentence_cosine
    from core.model.inference import analyze
    from core.model.models import load_model
    from core.teaching.tour import clearest_head, clearest_sink_head

    model_dir = request.getfixturevalue(model_fixture)
    text = "The river bank was muddy after the rain, so we walked along the bank slowly."
    at = _tour({"model": model_dir, "step": "9", "text": text})
    assert not page_errors(at), page_errors(at)
    assert _charts(at) == 1
    model = load_model(model_dir)
    plain = analyze(model, text)
    table, _ = analysis_statistics(plain, model.tokenizer)
    heads = list(dict.fromkeys(h[:2] for h in (clearest_sink_head(table), clearest_head(table, "previous")) if h))
    cosines = [sentence_cosine(plain, ablate_heads(model, text, [h], method="zero")) for h in heads]
    import json

    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    effect = next(trace for trace in figure["data"] if trace.get("xaxis") == "x2")
    assert effect["x"] == [f"L{layer}H{head}" for layer, head in heads]
    said = " ".join(m.value for m in at.markdown)
    assert "not what it changes" in said  # the attention-is-not-explanation caveat stays
    for (layer, head), cosine in zip(heads, cosines):
        assert f"**layer {layer}, head {head}**" in said
        assert f"**{cosine:.4f}**" in said
    [link] = [b.proto.url for b in at.get("link_button")]
    assert urlsplit(link).path == "effects"
    query = parse_qs(urlsplit(link).query)
    assert query["heads"] == [" ".join(f"L{layer}H{head}" for layer, head in heads)] and query["ablation"] == ["zero"]
    # the link opens the effects page with those heads knocked out
    effects = open_app({key: values[0] for key, values in query.items()}, page="app_pages/effects.py")
    assert not page_errors(effects), page_errors(effects)
    assert effects.text_input(key="effects.heads").value == query["heads"][0]


HOSTILE = ["empty", "only punctuation", "special token names", "markup", "far past the limit",
           "markdown and latex", "one character", "emoji", "nul bytes"]


@pytest.mark.app
@pytest.mark.parametrize("step", range(1, STEPS + 1))
@pytest.mark.parametrize("case", HOSTILE)
def test_hostile_sidebar_text_on_every_step(step, case, tiny_bert_dir):
    text = HOSTILE_TEXTS[case]
    at = _tour({"model": tiny_bert_dir, "step": str(step), "text": text})
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    if case == "empty":
        assert all("no text" in e.lower() for e in errors)
    else:
        assert not errors, errors
    assert at.text_area(key="text").value == text


@pytest.mark.app
def test_on_hi_the_token_before_is_cls_so_no_head_is_called_a_previous_token_head(tiny_bert_dir):
    """Issue 28: on "Hi" ([CLS] hi [SEP]) a head was called "100 % to the token just before it" and the top sink.
    The tiny vocabulary splits "Hi", so its one-token text is "river"."""
    said = {}
    for step in (4, 5, 9):
        at = _tour({"model": tiny_bert_dir, "text": "river", "step": str(step)})
        assert not page_errors(at), page_errors(at)
        said[step] = " ".join(m.value for m in at.markdown)
    assert "cannot be told from one that parks its attention there" in said[4]
    assert "attends most to the previous token" not in said[4]
    assert "previous-token head" not in said[5] and "previous-token head of step 4" not in said[9]
    at = _tour({"model": tiny_bert_dir, "text": "the bank of a river", "step": "4"})
    assert "attends most to the previous token" in " ".join(m.value for m in at.markdown)


def test_previous_is_sink_only_when_every_token_before_is_a_start_or_end_token():
    import numpy as np

    from core.attention_heads.head_statistics import TokenRoles
    from core.teaching.tour import previous_is_sink

    def roles(query, start, end):
        b = lambda v: np.array(v, dtype=bool)  # noqa: E731 - a one-line helper, read where it is used
        return TokenRoles(b(query), b(start), b(end), b([0] * len(query)), causal=False)

    assert previous_is_sink(roles([0, 1, 0], [1, 0, 0], [0, 0, 1]))  # [CLS] hi [SEP]
    assert not previous_is_sink(roles([0, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 1]))  # [CLS] the bank [SEP]
    assert not previous_is_sink(roles([1], [1], [0]))  # no token has one before it


@pytest.mark.app
def test_the_static_step_writes_token_ids_without_brackets(tiny_bert_dir):
    """Issue 28: "token id [2924]"."""
    at = _tour({"model": tiny_bert_dir, "step": "2"})
    said = " ".join(m.value for m in at.markdown if "word-embedding table" in m.value)
    assert "token id" in said and "[" not in said.split("token id", 1)[1].split("in both")[0], said
