"""Every page and every tour step, read as a person would: no sentence, label or figure text names a layer, head or
hidden state the model on screen does not have (layers 0..L-1, hidden states 0..L)."""

from __future__ import annotations

import json
import re

import pytest
from transformers import AutoConfig

from tests.pages_registry import landed_pages
from tests.test_app import APP, page_errors

TOUR_STEPS = 10
_RANGE = r"\s*(?:–|-|to)\s*"
LAYER = re.compile(r"\b(?:layers?|blocks?)\s+\(?(\d+)\)?(?:" + _RANGE + r"(\d+))?", re.IGNORECASE)
HIDDEN = re.compile(r"\bhidden[ _]states?\s*\[?\(?(\d+)\)?\]?(?:" + _RANGE + r"(\d+))?", re.IGNORECASE)
HEAD = re.compile(r"\bheads?\s+(\d+)\b(?!\s*(?:%|of|heads?|layers?))", re.IGNORECASE)
CELL = re.compile(r"\bL(\d+)\s*H(\d+)\b")


def wrong_numbers(text: str, layers: int, heads: int) -> list[str]:
    """Every phrase of ``text`` naming a layer >= ``layers``, a hidden state > ``layers`` or a head >= ``heads``."""
    text = text.replace("*", "").replace("\\", "")
    wrong = []
    for pattern, limit in ((LAYER, layers - 1), (HIDDEN, layers), (HEAD, heads - 1)):
        for m in pattern.finditer(text):
            if any(n is not None and int(n) > limit for n in m.groups()):
                wrong.append(text[max(0, m.start() - 60): m.end() + 20])
    for m in CELL.finditer(text):
        if int(m.group(1)) >= layers or int(m.group(2)) >= heads:
            wrong.append(text[max(0, m.start() - 60): m.end() + 20])
    return wrong


def _strings(value) -> list[str]:
    """Every string in a figure's JSON except its data arrays (the user's tokens)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() if k not in {"x", "y", "z", "customdata", "ids"} for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def screen_text(at) -> list[str]:
    """The text of everything on the page: markdown, alerts, headings, widget labels and help, figure texts."""
    texts: list[str] = []

    def walk(node) -> None:
        for attr in ("value", "label", "help", "body", "placeholder"):
            try:
                v = getattr(node, attr, None)
            except Exception:  # noqa: BLE001 - some elements compute value from widget state
                v = None
            if isinstance(v, str):
                texts.append(v)
        proto = getattr(node, "proto", None)
        if node.type == "plotly_chart" and proto is not None:
            texts.extend(_strings(json.loads(proto.spec)))
        if node.type == "expandable" and proto is not None:
            texts.append(proto.expandable.label)
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return texts


def _check(at, where: str, layers: int, heads: int) -> list[str]:
    assert not page_errors(at), (where, page_errors(at))
    return [f"{where}: …{w}…" for t in screen_text(at) for w in wrong_numbers(t, layers, heads)]


def walk_every_screen(model: str | None) -> list[str]:
    """Open every page and every tour step on ``model`` (None: the bundled one); the wrong phrases found."""
    from streamlit.testing.v1 import AppTest

    from core.model.models import bundled_model_path

    config = AutoConfig.from_pretrained(model or str(bundled_model_path()))
    layers, heads = config.num_hidden_layers, config.num_attention_heads
    at = AppTest.from_file(APP, default_timeout=180)
    if model:
        at.query_params["model"] = model
    at.run()
    wrong = _check(at, "home", layers, heads)
    for file, _path in landed_pages()[1:]:
        at.switch_page(file).run()
        wrong += _check(at, file, layers, heads)
    at.switch_page("app_pages/tour.py").run()
    for step in range(1, TOUR_STEPS + 1):
        at.slider(key="tour.step").set_value(step).run()
        wrong += _check(at, f"tour step {step}", layers, heads)
    return wrong


def test_the_checker_catches_the_phrases_of_issue_28():
    said = ("after the last layer (6). at layer 6 the senses … hidden state 7 (output of layer 6); "
            "layers 0–6; hidden_states[7]; L6H0; layer 5, head 12")
    assert len(wrong_numbers(said, layers=6, heads=12)) == 8
    fine = ("hidden state 6 (output of layer 5); layers 0–5 and hidden states 0–6; 6 layers × 12 heads; "
            "layer 5, head 11; hidden_states[0]; L5H11; 100 % of heads")
    assert wrong_numbers(fine, layers=6, heads=12) == []


@pytest.mark.app
def test_no_screen_names_a_layer_the_tiny_gpt2_lacks(tiny_gpt2_dir):
    wrong = walk_every_screen(tiny_gpt2_dir)
    assert not wrong, "\n".join(wrong)


@pytest.mark.app
def test_no_screen_names_a_layer_the_tiny_bert_lacks(tiny_bert_dir):
    wrong = walk_every_screen(tiny_bert_dir)
    assert not wrong, "\n".join(wrong)


@pytest.mark.app
@pytest.mark.integration
def test_no_screen_names_a_layer_the_bundled_model_lacks():
    wrong = walk_every_screen(None)
    assert not wrong, "\n".join(wrong)
