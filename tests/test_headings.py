"""Heading levels on every page never skip one (WCAG 1.3.1; axe-core's heading-order): a page's sections under its
title are st.header (h2), never st.subheader (h3) straight after the h1."""

from __future__ import annotations

import pytest
from streamlit.testing.v1.element_tree import HeadingBase

from tests.pages_registry import landed_pages
from tests.test_app import open_app, page_errors


def heading_levels(node) -> list[tuple[int, str]]:
    """``(level, text)`` of every heading under ``node``, in page order."""
    if isinstance(node, HeadingBase):
        return [(int(node.tag[1]), node.value)]
    return [h for child in sorted(getattr(node, "children", {}).items()) for h in heading_levels(child[1])]


def skipped_levels(levels: list[tuple[int, str]]) -> list[str]:
    problems, previous = [], 1
    for level, text in levels:
        if level > previous + 1:
            problems.append(f"h{level} {text!r} after h{previous}")
        previous = level
    return problems


def test_skipped_levels_are_found():
    assert skipped_levels([(1, "Page"), (3, "Section")]) == ["h3 'Section' after h1"]
    assert not skipped_levels([(1, "Page"), (2, "A"), (3, "a"), (2, "B")])


@pytest.mark.app
@pytest.mark.parametrize("page", [file for file, _ in landed_pages()])
@pytest.mark.parametrize("model_fixture", ["tiny_bert_dir", "tiny_gpt2_dir"])
def test_no_page_skips_a_heading_level(page, model_fixture, request):
    at = open_app({"model": request.getfixturevalue(model_fixture)}, page=page)
    assert not page_errors(at)
    levels = heading_levels(at.main)
    assert levels and levels[0][0] in (1, 2), levels
    assert not skipped_levels(levels), skipped_levels(levels)
