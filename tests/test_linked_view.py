"""A pinned figure drawn again from its link reads the link's options as the page reads them (``ui.page_state.option``
through ``ui.option_values``): the same value, the same clamping, the same default for what a page would refuse."""

from __future__ import annotations

from ui.view_figures import LinkedView


def _view(**params: str) -> LinkedView:
    return LinkedView("attention", params, "all-MiniLM-L6-v2", "a text", "figure")


def test_a_links_options_read_as_the_page_reads_them():
    view = _view(layer="3", head="9", stat="entropy", view="Heatmap", palette="nonsense", present="1", k="2.5")
    assert view.choice("layer", range(6)) == 3  # a number option: the link's "3" is the option 3
    assert view.choice("layer", range(2)) == 0  # a layer this model does not have: the default, as on the page
    assert view.index("head", 4) == 3
    assert view.choice("stat", ["mean", "entropy"]) == "entropy"
    assert view.choice("palette", ["Blues", "Viridis"]) == "Blues"  # not an option: the page's default
    assert view.choice("palette", ["Blues", "Viridis"], "Viridis") == "Viridis"
    assert view.flag("present") is True and view.flag("missing") is False
    assert view.number("k", 5, 1, 10) == 5  # not a whole number: the default
    assert _view(k="40").number("k", 5, 1, 10) == 10 and _view(k="-4").number("k", 5, 1, 10) == 1
